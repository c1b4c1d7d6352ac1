"""A running job short of spares (after a failure, or ``spares.count`` raised) is in line for
the spares it is short of, at its place (priority, then age, then UID): its pass publishes
the need in ``status.sparesWanted`` (by type, as ``waitingFor`` is keyed), and the jobs
behind it — waiting to start, or running and refilling their own spares — keep those free
nodes for it as they keep them for a waiting job ahead. Before, only waiting jobs were in
line: with scarce nodes, whichever pass ran first won, and a lower-priority job behind took
the node the higher-priority running job's spares needed, leaving it short.

The need never makes the running job look waiting (its state, ``waitingFor`` and
``CapacityShort`` stay as they are), is cleared once the spares are full and whenever the
job does not run, never holds back a job ahead of it, and keeps for it no node it could not
take (``gpusPerNode``, tolerations, type)."""

from dataclasses import replace

from phased.api.v1alpha1 import (
    JobState,
    NodeRole,
    PhaseRecord,
    TrainingJobSpec,
    TrainingJobStatus,
)
from phased.core.conditions import ConditionType
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo, Plan, Snapshot
from phased.core.times import format_time
from tests.core.builders import (
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

HIGH = JobRef(namespace="ml", name="high", uid="uid-high", created=T0)
LOW = JobRef(namespace="ml", name="low", uid="uid-low", created=T0)
RUNNING = spec(phase("train", 2, 2), spares=2, priority=10)
LOW_RUNNING = spec(phase("train", 2, 2), spares=2)
LOW_WAITING = spec(phase("train", 1, 1))


def _running(
    job: JobRef,
    the_spec: TrainingJobSpec,
    prefix: str,
    free: list[NodeInfo],
    waiting: tuple[Claimant, ...] = (),
    spares_held: int = 0,
    spares_wanted: dict[str, int] | None = None,
) -> Snapshot:
    """``job`` running on two actives (named ``prefix``) with ``spares_held`` spares."""
    actives = [owned(n, NodeRole.ACTIVE, job) for n in nodes(prefix, 2)]
    spares = [owned(n, NodeRole.SPARE, job) for n in nodes(f"{prefix}s", spares_held)]
    name = f"{job.name}-train-g0"
    pods = [
        pod(f"{name}-{i}", "train", i, world=2, node_name=f"{prefix}{i:02d}", job=job)
        for i in range(2)
    ]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        phases=[PhaseRecord(name="train", start_time=format_time(at(-3600)), gpu_type="H100")],
        pool={"active": [n.name for n in actives], "spares": [n.name for n in spares]},
        spares_wanted=spares_wanted or {},
    )
    return snapshot(the_spec, [*actives, *spares, *free], pods, status, waiting=waiting, job=job)


def _in_line(job: JobRef, priority: int, status: TrainingJobStatus) -> Claimant:
    """The running job as the jobs behind read it from its published status (as the
    reconciler does: ``tests/handlers/test_a_running_job_short_of_spares_is_read_into_the_line
    .py``)."""
    return Claimant(
        job.uid,
        priority=priority,
        created=job.created,
        wants=dict(status.spares_wanted),
        gpus_per_node=8,
        tolerations=(),
        types=("H100",),
        spares=True,
    )


def _claimed(plan: Plan, role: NodeRole | None = None) -> list[str]:
    return sorted(c.node for c in of_type(plan, ClaimNode) if role is None or c.role == role)


def test_a_running_job_short_of_spares_publishes_what_it_is_short_of() -> None:
    plan = decide(_running(HIGH, RUNNING, "a", []), SETTINGS, T0)
    assert plan.status.spares_wanted == {"H100": 2}
    plan = decide(_running(HIGH, RUNNING, "a", nodes("h", 1)), SETTINGS, T0)
    assert _claimed(plan, NodeRole.SPARE) == ["h00"]
    assert plan.status.spares_wanted == {"H100": 1}


def test_it_still_looks_running_to_everything_else() -> None:
    plan = decide(_running(HIGH, RUNNING, "a", []), SETTINGS, T0)
    assert plan.status.state == JobState.RUNNING
    assert plan.status.waiting_for == {}
    short = [
        c
        for c in plan.status.conditions
        if c.type == ConditionType.CAPACITY_SHORT and c.status == "True"
    ]
    assert short == []


def test_the_need_is_cleared_once_the_spares_are_full() -> None:
    snap = _running(HIGH, RUNNING, "a", [], spares_held=2, spares_wanted={"H100": 1})
    assert decide(snap, SETTINGS, T0).status.spares_wanted == {}


def test_the_need_is_cleared_when_the_job_does_not_run() -> None:
    snap = _running(HIGH, RUNNING, "a", [], spares_wanted={"H100": 2})
    stopped = replace(snap, pods=())  # its generation is gone
    assert decide(stopped, SETTINGS, T0).status.spares_wanted == {}
    done = snap.status.model_copy(update={"state": JobState.SUCCEEDED})
    finished = replace(snap, status=done)
    assert decide(finished, SETTINGS, T0).status.spares_wanted == {}


def test_a_waiting_job_behind_keeps_the_node_for_the_running_jobs_spares() -> None:
    # The running job's pass published its need while no node was free; then one comes free
    # and the lower-priority waiting job's pass runs first.
    published = decide(_running(HIGH, RUNNING, "a", []), SETTINGS, T0).status
    ahead = _in_line(HIGH, 10, published)
    plan = decide(snapshot(LOW_WAITING, nodes("h", 1), job=LOW, waiting=(ahead,)), SETTINGS, at(1))
    assert _claimed(plan) == []
    # and the running job's own pass takes it
    plan = decide(
        _running(HIGH, RUNNING, "a", nodes("h", 1), spares_wanted={"H100": 2}), SETTINGS, at(1)
    )
    assert _claimed(plan, NodeRole.SPARE) == ["h00"]


def test_a_running_job_behind_refilling_its_own_spares_keeps_the_node_for_it() -> None:
    # Two free nodes cannot cover the two the job ahead is short of: it still takes both.
    published = decide(_running(HIGH, RUNNING, "a", []), SETTINGS, T0).status
    ahead = _in_line(HIGH, 10, published)
    plan = decide(_running(LOW, LOW_RUNNING, "b", nodes("h", 1), (ahead,)), SETTINGS, at(1))
    assert _claimed(plan) == []
    assert plan.status.spares_wanted == {"H100": 2}  # and it is in line behind, for its own


def test_only_what_the_job_ahead_is_short_of_is_kept_for_it() -> None:
    published = decide(
        _running(HIGH, RUNNING, "a", [], spares_held=1, spares_wanted={"H100": 1}), SETTINGS, T0
    ).status
    ahead = _in_line(HIGH, 10, published)
    plan = decide(_running(LOW, LOW_RUNNING, "b", nodes("h", 3), (ahead,)), SETTINGS, at(1))
    assert len(_claimed(plan, NodeRole.SPARE)) == 2  # three free, one kept for it


def test_its_spare_need_never_holds_back_a_job_ahead_of_it() -> None:
    behind = _in_line(LOW, 0, TrainingJobStatus(spares_wanted={"H100": 2}))
    first = spec(phase("train", 1, 1), priority=20)
    plan = decide(snapshot(first, nodes("h", 1), job=HIGH, waiting=(behind,)), SETTINGS, T0)
    assert _claimed(plan) == ["h00"]
    plan = decide(_running(HIGH, RUNNING, "a", nodes("h", 1), (behind,)), SETTINGS, T0)
    assert _claimed(plan, NodeRole.SPARE) == ["h00"]


def test_nodes_it_could_not_take_are_not_kept_for_it() -> None:
    published = decide(_running(HIGH, RUNNING, "a", []), SETTINGS, T0).status
    ahead = _in_line(HIGH, 10, published)  # 8 GPUs a node
    small = spec(phase("train", 1, 1, gpus=4))
    free = [node("s00", gpus=4)]
    plan = decide(snapshot(small, free, job=LOW, waiting=(ahead,)), SETTINGS, at(1))
    assert _claimed(plan) == ["s00"]
