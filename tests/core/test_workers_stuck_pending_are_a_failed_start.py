"""Workers Pending past pendingGrace: a condition and one event, a retried start within
pendingRestarts, then the job fails; node failures are not mistaken for them."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole, PhaseRecord, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import CreatePod, DeletePod, NodeSet, Plan, PodInfo, PodPhase, Snapshot
from phased.core.times import format_time
from tests.core.builders import (
    SETTINGS,
    T0,
    at,
    events,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)


def _stuck(p: PodInfo, reason: str = "ImagePullBackOff", created=None) -> PodInfo:
    return replace(
        p,
        phase=PodPhase.PENDING,
        waiting_reason=reason,
        waiting_message="Back-off pulling image",
        created=created or at(-700),
    )


def _job(scope: str = "Gang", restarts_used: int = 0, stuck_ranks=(1,), **policy) -> Snapshot:
    the_spec = spec(
        phase("train", 2, 2),
        failurePolicy={"restartScope": scope, **policy},
        # Worker scope needs a launcher a lost rank can rejoin.
        **({"launcher": {"type": "Torchrun", "rendezvous": "C10d"}} if scope == "Worker" else {}),
    )
    actives = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(2)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i}") for i in range(2)]
    pods = [_stuck(p) if p.rank in stuck_ranks else p for p in pods]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        phases=[
            PhaseRecord(
                name="train",
                start_time=format_time(at(-800)),
                gpu_type="H100",
                pending_restarts=restarts_used,
            )
        ],
        pool={"active": ["a0", "a1"]},
    )
    return snapshot(the_spec, actives, pods, status)


def _cond(plan: Plan, kind: str):
    found = [c for c in plan.status.conditions if c.type == kind]
    return found[0] if found else None


def test_a_worker_pending_past_the_grace_restarts_the_gang_once_with_one_event():
    plan = decide(_job(), SETTINGS, T0)
    cond = _cond(plan, "WorkersPending")
    assert cond.status == "True"
    assert "llm-train-g0-1: ImagePullBackOff (Back-off pulling image)" in cond.message
    assert events(plan).count("WorkersStuckPending") == 1
    assert plan.status.restart_generation == 1
    assert sorted(d.name for d in of_type(plan, DeletePod)) == ["llm-train-g0-0", "llm-train-g0-1"]
    assert plan.status.phases[0].pending_restarts == 1
    assert plan.status.worker_restarts == 0  # not the code's fault: restartBudget untouched


def test_with_worker_scope_only_the_stuck_rank_is_replaced():
    plan = decide(_job(scope="Worker"), SETTINGS, T0)
    assert [d.name for d in of_type(plan, DeletePod)] == ["llm-train-g0-1"]
    (created,) = of_type(plan, CreatePod)
    assert created.manifest["metadata"]["labels"]["phased.dev/rank"] == "1"


def test_once_the_retries_are_spent_the_job_fails_with_the_reason():
    plan = decide(_job(restarts_used=1), SETTINGS, T0)
    assert plan.status.state == JobState.FAILED
    failed = _cond(plan, "Failed")
    assert failed.reason == "WorkersStuckPending" and "ImagePullBackOff" in failed.message
    assert "WorkersStuckPending" in events(plan)


def test_before_the_grace_nothing_happens_but_decide_asks_to_look_again_in_time():
    snap = _job()
    young = tuple(_stuck(p, created=at(-60)) if p.rank == 1 else p for p in snap.pods)
    plan = decide(replace(snap, pods=young), SETTINGS, T0)
    assert of_type(plan, DeletePod) == [] and _cond(plan, "WorkersPending") is None
    assert plan.requeue_after is not None and plan.requeue_after <= 540


def test_a_pending_worker_on_a_node_that_is_not_ready_is_left_to_failure_handling():
    snap = _job()
    sick = tuple(with_ready(n, False, at(-5)) if n.name == "a1" else n for n in snap.nodes.values())
    plan = decide(replace(snap, nodes=NodeSet.of(sick)), SETTINGS, T0)
    assert _cond(plan, "WorkersPending") is None
    assert of_type(plan, DeletePod) == []


def test_an_unscheduled_worker_reports_the_schedulers_reason():
    snap = _job(pendingGrace="1m")
    unscheduled = tuple(
        replace(_stuck(p, reason="Unschedulable"), node_name=None, waiting_message="0/9 nodes")
        if p.rank == 1
        else p
        for p in snap.pods
    )
    plan = decide(replace(snap, pods=unscheduled), SETTINGS, T0)
    assert "Unschedulable (0/9 nodes)" in _cond(plan, "WorkersPending").message
    assert "pendingGrace 1m" in _cond(plan, "WorkersPending").message


def test_the_condition_clears_once_no_worker_is_pending():
    snap = _job()
    first = decide(snap, SETTINGS, T0)
    running = tuple(replace(p, phase=PodPhase.RUNNING) for p in snap.pods)
    plan = decide(replace(snap, pods=running, status=first.status), SETTINGS, at(60))
    assert _cond(plan, "WorkersPending").status == "False"
