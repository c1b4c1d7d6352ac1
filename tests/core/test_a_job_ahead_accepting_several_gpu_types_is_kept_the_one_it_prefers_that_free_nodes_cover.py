"""A job waiting ahead in line that accepts several GPU types starts, in its own pass, on the
first type in its order of preference that the free nodes cover. A job behind it keeps for it
the nodes of that type, and takes those of another it would not start on: the line judges
the job ahead as its own pass chooses. Before, a job ahead that the free nodes of any other of
its types covered was kept nothing of the type the job behind waited for, whichever it
preferred: both passes, woken by the same nodes, claimed the same ones (two jobs of equal
priority and age accepting the same two types both reached for the first), and which got
them depended on whose claim landed first, not on the line — a split left both short, gave
both pools back and began again; a job ahead preferring the type lost it to the job behind."""

from datetime import timedelta

from phased.api.v1alpha1 import JobState
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo, Plan
from phased.core.pools import type_keys
from tests.core.builders import SETTINGS, T0, nodes, of_type, phase, snapshot, spec

CREATED = T0 - timedelta(days=1)
# Equal priority and age: the UID decides, and "uid-a" comes first.
FIRST = JobRef(namespace="ml", name="a", uid="uid-a", created=CREATED)
SECOND = JobRef(namespace="ml", name="b", uid="uid-b", created=CREATED)
H100_FIRST = spec(phase("train", 2, 2, gpu_types=["H100", "H200"]))
H200_FIRST = spec(phase("train", 2, 2, gpu_types=["H200", "H100"]))
H200_ONLY = spec(phase("train", 2, 2, gpu_types=["H200"]))


def _free(h100: int = 2, h200: int = 2) -> list[NodeInfo]:
    return [*nodes("h", h100), *nodes("k", h200, gpu="H200")]


def _in_line(job: JobRef, the_spec) -> Claimant:
    """``job`` as the line names it: waiting for ``nodes.min`` of each type it accepts."""
    the_phase = the_spec.phases[0]
    keys = tuple(type_keys(the_phase))
    return Claimant(
        job.uid,
        0,
        job.created,
        {key: the_phase.nodes.min for key in keys},
        gpus_per_node=the_phase.gpus_per_node,
        tolerations=(),
        types=keys,
    )


def _pass(job: JobRef, the_spec, other: JobRef, other_spec, free: list[NodeInfo]) -> Plan:
    """``job``'s pass, ``other`` waiting in line beside it."""
    line = (_in_line(other, other_spec),)
    return decide(snapshot(the_spec, free, job=job, waiting=line), SETTINGS, T0)


def _claimed(plan: Plan) -> set[str]:
    return {c.node for c in of_type(plan, ClaimNode)}


def test_two_jobs_accepting_the_same_two_types_start_on_different_nodes():
    first = _pass(FIRST, H100_FIRST, SECOND, H100_FIRST, _free())
    second = _pass(SECOND, H100_FIRST, FIRST, H100_FIRST, _free())
    assert _claimed(first) == {"h00", "h01"}  # the first in line, on the type it prefers
    assert _claimed(second) == {"k00", "k01"}  # the other type it accepts, not the same nodes


def test_a_job_behind_keeps_for_the_job_ahead_the_type_it_prefers():
    ahead = _pass(FIRST, H200_FIRST, SECOND, H200_ONLY, _free())
    behind = _pass(SECOND, H200_ONLY, FIRST, H200_FIRST, _free())
    assert _claimed(ahead) == {"k00", "k01"}
    assert _claimed(behind) == set()
    assert behind.status.state == JobState.WAITING


def test_a_job_behind_takes_the_type_the_job_ahead_does_not_prefer():
    ahead = _pass(FIRST, H100_FIRST, SECOND, H200_ONLY, _free())
    behind = _pass(SECOND, H200_ONLY, FIRST, H100_FIRST, _free())
    assert _claimed(ahead) == {"h00", "h01"}
    assert _claimed(behind) == {"k00", "k01"}


def test_a_job_behind_takes_the_preferred_type_the_free_nodes_do_not_cover_for_the_job_ahead():
    free = _free(h100=2, h200=1)
    behind_spec = spec(phase("train", 1, 1, gpu_types=["H200"]))
    ahead = _pass(FIRST, H200_FIRST, SECOND, behind_spec, free)
    behind = _pass(SECOND, behind_spec, FIRST, H200_FIRST, free)
    assert _claimed(ahead) == {"h00", "h01"}  # one H200 is too few: it starts on H100
    assert _claimed(behind) == {"k00"}
