from dataclasses import replace

import pytest

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import NodeCondition, QuarantineNode
from tests.core.builders import (
    SETTINGS,
    T0,
    at,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)

A = NodeRole.ACTIVE


def _snap(first, status=None):
    held = [first, owned(node("a1"), A), owned(node("s0"), NodeRole.SPARE)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i}") for i in range(2)]
    status = status or TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        pool={"active": ["a0", "a1"], "spares": ["s0"]},
    )
    the_spec = spec(phase("train", 2, 2), spares=1, failurePolicy={"notReadyGrace": "30s"})
    return snapshot(the_spec, held, pods, status)


@pytest.mark.parametrize(
    ("since", "fails", "wake"),
    [(-10, False, 20), (-29, False, 1), (-30, True, None), (-3600, True, None)],
)
def test_not_ready_grace_counts_from_the_ready_transition(since, fails, wake):
    plan = decide(_snap(with_ready(owned(node("a0"), A), False, at(since))), SETTINGS, T0)
    assert bool(of_type(plan, QuarantineNode)) == fails
    if wake is not None:
        assert plan.requeue_after == wake
        assert [s.node for s in plan.status.suspects] == ["a0"]


def test_a_gpu_capacity_drop_is_remembered_from_first_sight():
    dropped = replace(owned(node("a0"), A), allocatable={"nvidia.com/gpu": 7})
    first = decide(_snap(dropped), SETTINGS, T0)
    assert of_type(first, QuarantineNode) == []
    assert [(s.reason, s.since) for s in first.status.suspects] == [
        ("GPUCapacityDropped", "2026-03-01T12:00:00Z")
    ]
    assert first.requeue_after == 10
    second = decide(_snap(dropped, first.status), SETTINGS, at(10))
    (q,) = of_type(second, QuarantineNode)
    assert q.reason == "GPUCapacityDropped" and q.detected == T0


def test_a_gpu_fault_waits_for_its_own_grace():
    the_spec = spec(phase("train", 2, 2), spares=1, failurePolicy={"gpuFaultGrace": "1m"})
    fault = NodeCondition("GPUUnhealthy", "True", at(-20))
    sick = replace(owned(node("a0"), A), conditions=(*owned(node("a0"), A).conditions, fault))
    snap = _snap(sick)
    plan = decide(snap.__class__(**{**snap.__dict__, "spec": the_spec}), SETTINGS, T0)
    assert of_type(plan, QuarantineNode) == [] and plan.requeue_after == 40


def test_a_node_that_recovers_inside_the_grace_is_no_longer_a_suspect():
    first = decide(_snap(with_ready(owned(node("a0"), A), False, at(-10))), SETTINGS, T0)
    back = decide(
        _snap(with_ready(owned(node("a0"), A), True, at(5)), first.status), SETTINGS, at(6)
    )
    assert back.status.suspects == [] and of_type(back, QuarantineNode) == []


def _not_ready(status: str, since):
    a0 = owned(node("a0"), A)
    others = tuple(c for c in a0.conditions if c.type != "Ready")
    return replace(a0, conditions=(NodeCondition("Ready", status, since), *others))


def test_a_not_ready_node_that_goes_silent_keeps_its_grace_clock():
    # The kubelet said NotReady, then stopped reporting: Ready goes False -> Unknown with a
    # new transition time, but the node was never back, so its 30s still count from -20.
    first = decide(_snap(_not_ready("False", at(-20))), SETTINGS, T0)
    assert of_type(first, QuarantineNode) == [] and first.requeue_after == 10
    silent = _snap(_not_ready("Unknown", at(5)), first.status)
    assert of_type(decide(silent, SETTINGS, at(8)), QuarantineNode) == []
    (q,) = of_type(decide(silent, SETTINGS, at(10)), QuarantineNode)
    assert q.detected == at(-20)


def test_a_node_seen_ready_again_restarts_its_grace_clock():
    first = decide(_snap(_not_ready("False", at(-20))), SETTINGS, T0)
    back = decide(_snap(_not_ready("True", at(5)), first.status), SETTINGS, at(6))
    again = _snap(_not_ready("False", at(8)), back.status)
    assert of_type(decide(again, SETTINGS, at(30)), QuarantineNode) == []
    (q,) = of_type(decide(again, SETTINGS, at(38)), QuarantineNode)
    assert q.detected == at(8)
