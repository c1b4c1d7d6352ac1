"""A new generation is created once the workers it replaces have left its nodes: created
beside them, a worker whose node they still hold fails to schedule and is backed off."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import CreatePod, DeletePod, NodeCondition, PodPhase, Snapshot
from phased.core.phases import STOP_MARGIN_S
from tests.core.builders import (
    SETTINGS,
    T0,
    at,
    landed,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)

A, S = NodeRole.ACTIVE, NodeRole.SPARE
GRACE = 20  # failurePolicy.survivorGracePeriod


def _lost_node(gpu_fault: bool = False) -> Snapshot:
    """Three workers on a0..a2 and a spare; a0 NotReady past its grace (or, with
    ``gpu_fault``, a node that stays Ready with a GPU fault)."""
    held = [owned(node(f"a{i}"), A) for i in range(3)] + [owned(node("s0"), S)]
    if gpu_fault:
        xid = NodeCondition("GPUXidError", "True", at(-5), message="XID 79")
        held[0] = replace(held[0], conditions=(*held[0].conditions, xid))
    else:
        held[0] = with_ready(held[0], False, at(-60))
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=3, node_name=f"a{i}") for i in range(3)]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=3,
        pool={"active": ["a0", "a1", "a2"], "spares": ["s0"]},
    )
    the_spec = spec(
        phase("train", 3, 3),
        spares=1,
        failurePolicy={"survivorGracePeriod": f"{GRACE}s", "gpuFaultGrace": "0s"},
    )
    return snapshot(the_spec, held, pods, status, service_exists=True)


def _names(plan) -> list[str]:
    return sorted(c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod))


def _stopping(cluster, snap: Snapshot, names: list[str], by_seconds: float) -> None:
    """Workers as the API shows them after their graceful delete: still there, Terminating,
    until their grace ends."""
    was = {p.name: p for p in snap.pods}
    for name in names:
        cluster.pods[name] = replace(was[name], stop_by=at(by_seconds))


def test_the_restart_creates_nothing_beside_survivors_still_stopping():
    snap = _lost_node()
    plan = decide(snap, SETTINGS, T0)
    deletes = {d.name: d for d in of_type(plan, DeletePod)}
    assert deletes["llm-train-g0-0"].force  # its kubelet is gone: gone at once
    assert deletes["llm-train-g0-1"].grace_seconds == GRACE
    assert plan.status.restart_generation == 1
    assert of_type(plan, CreatePod) == []
    # it looks again when the survivors' grace has run out at the latest
    assert plan.requeue_after is not None
    assert plan.requeue_after <= GRACE + STOP_MARGIN_S

    cluster = landed(snap, plan)
    _stopping(cluster, snap, ["llm-train-g0-1", "llm-train-g0-2"], GRACE)
    cluster.advance(1)
    still = cluster.decide()
    assert of_type(still, CreatePod) == []
    assert still.requeue_after == GRACE + STOP_MARGIN_S - 1

    cluster.pods.pop("llm-train-g0-1")  # one left: the other still holds its node
    assert of_type(cluster.decide(), CreatePod) == []
    cluster.pods.pop("llm-train-g0-2")
    assert _names(cluster.decide()) == [f"llm-train-g1-{i}" for i in range(3)]


def test_survivors_that_ended_are_not_waited_for():
    snap = _lost_node()
    cluster = landed(snap, decide(snap, SETTINGS, T0))
    _stopping(cluster, snap, ["llm-train-g0-1", "llm-train-g0-2"], GRACE)
    for name in ("llm-train-g0-1", "llm-train-g0-2"):  # their kubelets reported them ended
        cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=143)
    assert _names(cluster.decide()) == [f"llm-train-g1-{i}" for i in range(3)]


def test_a_survivor_stuck_past_its_grace_is_no_longer_waited_for():
    snap = _lost_node()
    cluster = landed(snap, decide(snap, SETTINGS, T0))
    _stopping(cluster, snap, ["llm-train-g0-1"], GRACE)
    cluster.now = T0 + timedelta(seconds=GRACE + STOP_MARGIN_S - 0.5)
    assert of_type(cluster.decide(), CreatePod) == []
    cluster.now = T0 + timedelta(seconds=GRACE + STOP_MARGIN_S)
    # created; the scheduler places each worker as its node frees, a stuck start otherwise
    assert _names(cluster.decide()) == [f"llm-train-g1-{i}" for i in range(3)]


def test_a_worker_stopping_on_a_node_that_left_the_pool_holds_nothing_it_needs():
    """A GPU fault on a node that stays Ready: its worker is deleted with a grace, but the
    node is quarantined, and the new generation does not go there."""
    snap = _lost_node(gpu_fault=True)
    plan = decide(snap, SETTINGS, T0)
    assert "llm-train-g0-0" in {d.name for d in of_type(plan, DeletePod)}
    cluster = landed(snap, plan)
    _stopping(cluster, snap, ["llm-train-g0-0"], GRACE)  # still Terminating on the quarantined a0
    cluster.pods.pop("llm-train-g0-1", None)
    cluster.pods.pop("llm-train-g0-2", None)
    assert _names(cluster.decide()) == [f"llm-train-g1-{i}" for i in range(3)]
