"""A phase that accepts several GPU types and waits in line publishes its need for every
accepted type the cluster has enough nodes of, not only for the one it names: nodes of
another accepted type coming free are its as much as nodes of the named one, so a job behind
it for that other type keeps them for it. Before, it published the named type alone, and
when nodes of the other type came free, which of the two got them depended on whose pass
ran first, not on the line."""

from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo, Plan
from tests.core.builders import SETTINGS, T0, at, nodes, of_type, owned, phase, snapshot, spec

ELDER = JobRef(namespace="ml", name="either", uid="uid-either", created=T0 - timedelta(days=2))
YOUNGER = JobRef(namespace="ml", name="h200", uid="uid-h200", created=T0 - timedelta(days=1))
RUNNING = JobRef(namespace="ml", name="other", uid="uid-other", created=T0 - timedelta(days=3))
EITHER = spec(phase("train", 4, 4, gpu_types=["H100", "H200"]))
H200_ONLY = spec(phase("train", 4, 4, gpu_types=["H200"]))


def _cluster(h200_free: int) -> list[NodeInfo]:
    """Every H100 and H200 node held by a running job, but ``h200_free`` H200 nodes."""
    busy = [owned(n, NodeRole.ACTIVE, RUNNING) for n in nodes("h", 6)]
    busy += [owned(n, NodeRole.ACTIVE, RUNNING) for n in nodes("k", 6 - h200_free, gpu="H200")]
    free = [n for n in nodes("k", 6, gpu="H200")][6 - h200_free :]
    return [*busy, *free]


def _claimant(job: JobRef, plan: Plan) -> Claimant:
    return Claimant(job.uid, 0, job.created, dict(plan.status.waiting_for))


def test_it_publishes_its_need_for_every_accepted_type_the_cluster_has_enough_of():
    plan = decide(snapshot(EITHER, _cluster(0), job=ELDER), SETTINGS, T0)
    assert plan.status.state == JobState.WAITING
    assert plan.status.waiting_for == {"H100": 4, "H200": 4}


def test_nodes_of_its_other_type_coming_free_go_to_it_whichever_pass_runs_first():
    elder = decide(snapshot(EITHER, _cluster(0), job=ELDER), SETTINGS, T0)
    younger = decide(snapshot(H200_ONLY, _cluster(0), job=YOUNGER), SETTINGS, T0)
    line_for_younger = (_claimant(ELDER, elder),)
    line_for_elder = (_claimant(YOUNGER, younger),)
    freed = _cluster(4)  # the running job gave back four H200 nodes
    # The younger job's pass runs first: the elder job is ahead, and could take them.
    first = decide(
        snapshot(H200_ONLY, freed, job=YOUNGER, waiting=line_for_younger), SETTINGS, at(1)
    )
    assert of_type(first, ClaimNode) == []
    assert first.status.waiting_for == {"H200": 4}
    # The elder job's pass takes them, whether it runs before or after.
    taken = decide(snapshot(EITHER, freed, job=ELDER, waiting=line_for_elder), SETTINGS, at(1))
    assert sorted(c.node for c in of_type(taken, ClaimNode)) == ["k02", "k03", "k04", "k05"]


def test_a_type_the_cluster_has_too_few_of_is_not_published():
    few = [n for n in _cluster(0) if not n.name.startswith("k")]
    few += [owned(n, NodeRole.ACTIVE, RUNNING) for n in nodes("k", 3, gpu="H200")]
    plan = decide(snapshot(EITHER, few, job=ELDER), SETTINGS, T0)
    assert plan.status.waiting_for == {"H100": 4}


def test_a_started_phase_reforming_waits_for_every_type_it_could_move_to():
    from phased.api.v1alpha1 import PhaseRecord, TrainingJobStatus
    from phased.core.times import format_time

    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=4,
        phases=[
            PhaseRecord(
                name="train",
                start_time=format_time(at(-3600)),
                gpu_type="H100",
                gpus_per_node=8,
                gpu_types=["H100", "H200"],
            )
        ],
    )
    plan = decide(snapshot(EITHER, _cluster(0), status=status, job=ELDER), SETTINGS, T0)
    assert plan.status.state == JobState.WAITING
    assert plan.status.waiting_for == {"H100": 4, "H200": 4}  # it may re-form on either
