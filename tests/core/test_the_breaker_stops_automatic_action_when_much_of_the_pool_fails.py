from phased.api.v1alpha1 import FailureRecord, JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import DeletePod, QuarantineNode, SetNodeRole
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


def _pool(failed: int, size: int = 10, ledger=()):
    actives = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(size)]
    for i in range(failed):
        actives[i] = with_ready(actives[i], False, at(-60))
    pods = [
        pod(f"llm-train-g0-{i}", "train", i, world=size, node_name=f"a{i}") for i in range(size)
    ]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=size,
        failures=list(ledger),
        pool={"active": [n.name for n in actives]},
    )
    return snapshot(spec(phase("train", 2, size)), actives, pods, status)


def test_three_of_ten_at_once_trip_the_breaker_at_twenty_percent():
    plan = decide(_pool(3), SETTINGS, T0)
    assert of_type(plan, QuarantineNode) == [] and of_type(plan, DeletePod) == []
    assert of_type(plan, SetNodeRole) == []
    (cond,) = [c for c in plan.status.conditions if c.type == "MassFailure"]
    assert cond.status == "True" and "3 of 10" in cond.message and "30%" in cond.message
    assert events(plan) == ["MassFailure"]
    assert plan.status.failures == []


def test_two_of_ten_are_answered():
    plan = decide(_pool(2), SETTINGS, T0)
    assert len(of_type(plan, QuarantineNode)) == 2


def test_earlier_failures_inside_the_window_count():
    earlier = [
        FailureRecord(id=1, node="old", reason="NodeNotReady", detected=format_time(at(-120)))
    ]
    plan = decide(_pool(2, ledger=earlier), SETTINGS, T0)
    assert of_type(plan, QuarantineNode) == []
    assert plan.requeue_after == 180  # when the earliest counted failure leaves the 5m window


def test_a_single_failure_in_a_tiny_pool_is_always_answered():
    plan = decide(_pool(1, size=3), SETTINGS, T0)
    assert len(of_type(plan, QuarantineNode)) == 1


def test_the_breaker_clears_once_the_window_has_passed():
    first = decide(_pool(3), SETTINGS, T0)
    snap = _pool(3)
    later = decide(snap.__class__(**{**snap.__dict__, "status": first.status}), SETTINGS, at(300))
    assert len(of_type(later, QuarantineNode)) == 3
    assert [c.status for c in later.status.conditions if c.type == "MassFailure"] == ["False"]
