"""A running generation's spare refill leaves a job ahead in line the free nodes that would
admit it now — judged as that job's own pass judges them, its ``gpuFaultConditions``
included: a free node on which one of *its* fault conditions is True is one it never claims
(it would fail at once). Before, such nodes were counted towards the job ahead's need when
the running job's own conditions did not name them: the job ahead was taken to start now,
the refill left it the nodes, and its own pass, not counting them, waited on — the running
job short of spares for as long as the fault lasted, the nodes idle. The jobs behind it in
line, likewise, keep for it only free nodes it would claim."""

from dataclasses import replace

from phased.core.decide import decide
from phased.core.model import ClaimNode, NodeCondition, NodeInfo
from tests.core.builders import (
    LONG_AGO,
    SETTINGS,
    T0,
    at,
    node,
    nodes,
    of_type,
    phase,
    snapshot,
    spec,
)
from tests.core.test_a_running_jobs_spare_refill_never_takes_the_free_nodes_a_job_ahead_could_start_on import (  # noqa: E501
    AHEAD_JOB,
    _ahead,
    _running,
    _spares_claimed,
)

FAULT = "ThermalThrottle"
AHEAD_FAULTS = {"gpuFaultConditions": [FAULT]}


def _free() -> list[NodeInfo]:
    hot = node("h00", extra=(NodeCondition(FAULT, "True", LONG_AGO),))
    return [hot, *nodes("h", 4)[1:]]


def test_the_job_ahead_is_not_taken_to_start_on_nodes_its_fault_conditions_refuse():
    ahead = replace(_ahead(wants=4), fault_conditions=(FAULT,))
    plan = decide(_running(_free(), (ahead,)), SETTINGS, T0)
    assert len(_spares_claimed(plan)) == 2  # it cannot start: the refill is not held back


def test_the_job_ahead_does_start_on_them_with_none_of_its_faults_true():
    ahead = replace(_ahead(wants=3), fault_conditions=(FAULT,))
    plan = decide(_running(_free(), (ahead,)), SETTINGS, T0)
    assert _spares_claimed(plan) == ["h00"]  # the three it would claim are left to it


def test_its_own_pass_would_indeed_not_claim_the_node_at_fault():
    ahead_spec = spec(
        {"name": "train", "nodes": {"min": 4, "max": 4}, "gpuTypes": ["H100"], "gpusPerNode": 8},
        failurePolicy=AHEAD_FAULTS,
    )
    plan = decide(snapshot(ahead_spec, _free(), job=AHEAD_JOB), SETTINGS, at(1))
    assert not of_type(plan, ClaimNode)
    assert plan.status.waiting_for == {"H100": 4}


def test_a_job_behind_being_admitted_is_not_kept_from_a_node_the_job_ahead_would_refuse():
    ahead = replace(_ahead(wants=5), fault_conditions=(FAULT,))
    behind = spec(phase("prep", 1, 1))
    free = [*_free(), node("h04")]
    plan = decide(snapshot(behind, free, waiting=(ahead,)), SETTINGS, T0)
    assert [c.node for c in of_type(plan, ClaimNode)] == ["h00"]  # the four others: ahead's
