"""A running generation refills its spares without waiting in line, but never from the free
nodes that a job ahead of it in line could start on now: the free nodes it could take (less
what the jobs before it in line could take) cover its need, and its own pass, woken by the
same nodes, would take them. Before, whichever pass ran first won: a running job of lower
priority, admitted with fewer spares than it asks for because the line kept the rest for
the job ahead, took them as spares at its very next pass, and the job ahead, which could
have started, waited on. A job ahead that the free nodes do not cover still holds back no
refill (those nodes would only sit idle), as before."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole, PhaseRecord, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo, Plan, Snapshot
from phased.core.times import format_time
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    at,
    node,
    nodes,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)

RUNNING = spec(phase("train", 2, 2), spares=2)
AHEAD_JOB = JobRef(namespace="ml", name="ahead", uid="uid-ahead", created=T0)
AHEAD_SPEC = spec(phase("train", 3, 3))


def _ahead(wants: int = 3, gpus: int = 8) -> Claimant:
    """The job ahead: a higher priority, waiting for ``wants`` H100 nodes of ``gpus`` GPUs."""
    return Claimant(
        AHEAD_JOB.uid,
        priority=10,
        created=T0,
        wants={"H100": wants},
        gpus_per_node=gpus,
        tolerations=(),
    )


def _running(free: list[NodeInfo], waiting: tuple[Claimant, ...]) -> Snapshot:
    """The job behind, running on two actives with none of its two spares held."""
    actives = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i:02d}") for i in range(2)]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        phases=[PhaseRecord(name="train", start_time=format_time(at(-3600)), gpu_type="H100")],
        pool={"active": ["a00", "a01"], "spares": []},
    )
    return snapshot(RUNNING, [*actives, *free], pods, status, waiting=waiting)


def _spares_claimed(plan: Plan) -> list[str]:
    return sorted(c.node for c in of_type(plan, ClaimNode) if c.role == NodeRole.SPARE)


def test_the_refill_leaves_the_free_nodes_a_job_ahead_could_start_on():
    plan = decide(_running(nodes("h", 4), (_ahead(),)), SETTINGS, T0)
    assert len(_spares_claimed(plan)) == 1  # 4 free, 3 of them the job ahead's


def test_the_job_ahead_starts_whichever_pass_runs_first():
    cluster = {n.name: n for n in _running(nodes("h", 4), (_ahead(),)).nodes.values()}
    refill = decide(_running(nodes("h", 4), (_ahead(),)), SETTINGS, T0)
    for claim in of_type(refill, ClaimNode):
        cluster[claim.node] = owned(cluster[claim.node], claim.role, JOB)
    # The job ahead's pass, woken by the same free nodes, right after.
    plan = decide(snapshot(AHEAD_SPEC, cluster.values(), job=AHEAD_JOB), SETTINGS, at(1))
    assert len(of_type(plan, ClaimNode)) == 3
    assert plan.status.waiting_for == {}


def test_a_job_ahead_the_free_nodes_do_not_cover_holds_back_no_refill():
    plan = decide(_running(nodes("h", 4), (_ahead(wants=5),)), SETTINGS, T0)
    assert len(_spares_claimed(plan)) == 2


def test_free_nodes_the_job_ahead_could_not_run_on_are_refilled_from_first():
    small = [node(f"s{i:02d}", gpus=4) for i in range(2)]
    spec4 = spec(phase("train", 2, 2, gpus=4), spares=2)
    snap = replace(_running([*nodes("h", 3), *small], (_ahead(),)), spec=spec4)
    plan = decide(snap, SETTINGS, T0)
    assert _spares_claimed(plan) == ["s00", "s01"]  # the 8-GPU ones are the job ahead's


def test_a_job_behind_the_running_one_holds_back_nothing():
    behind = replace(_ahead(), priority=-1)
    plan = decide(_running(nodes("h", 4), (behind,)), SETTINGS, T0)
    assert len(_spares_claimed(plan)) == 2
