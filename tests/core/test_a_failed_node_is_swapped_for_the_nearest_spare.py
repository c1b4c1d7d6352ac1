"""Failure answers: nearest spare, several at once, force where the kubelet is gone."""

from dataclasses import replace

import pytest

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import CreatePod, DeletePod, QuarantineNode, ReleaseNode, SetNodeRole
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    at,
    events,
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


def _running_pool(actives, spares, world=None, scope="Gang", **kw):
    world = world or len(actives)
    the_spec = spec(
        phase("train", 2, len(actives)),
        spares=len(spares),
        failurePolicy={"restartScope": scope, **kw},
        launcher={"type": "Torchrun", "rendezvous": "C10d" if scope == "Worker" else "Static"},
    )
    pods = [
        pod(f"llm-train-g0-{i}", "train", i, world=world, node_name=n.name)
        for i, n in enumerate(actives)
    ]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=world,
        pool={"active": [n.name for n in actives], "spares": [n.name for n in spares]},
    )
    held = [owned(n, A) for n in actives] + [owned(n, S) for n in spares]
    return the_spec, held, pods, status


# where the lost node sits, the spares on offer, and the spare that must be chosen
NEAREST = [
    (
        "same rack wins",
        {"rack": "r1"},
        [("s-far", "r9", "b9", "z9"), ("s-rack", "r1", "b1", "z1")],
        "s-rack",
    ),
    (
        "same block beats same zone",
        {"rack": "r1"},
        [("s-zone", "r7", "b7", "z1"), ("s-block", "r2", "b1", "z1")],
        "s-block",
    ),
    (
        "same zone beats elsewhere",
        {"rack": "r1"},
        [("s-away", "r8", "b8", "z8"), ("s-zone", "r7", "b7", "z1")],
        "s-zone",
    ),
    (
        "ties go by name",
        {"rack": "r1"},
        [("s-b", "r1", "b1", "z1"), ("s-a", "r1", "b1", "z1")],
        "s-a",
    ),
]


@pytest.mark.parametrize(
    ("case", "where", "offered", "chosen"), NEAREST, ids=[c[0] for c in NEAREST]
)
def test_the_topology_nearest_ready_spare_is_promoted(case, where, offered, chosen):
    actives = [node("a0"), node("a1", rack="r2")]
    spares = [node(n, rack=r, block=b, zone=z) for n, r, b, z in offered]
    the_spec, held, pods, status = _running_pool(actives, spares)
    held[0] = with_ready(held[0], False, at(-60))
    plan = decide(snapshot(the_spec, held, pods, status), SETTINGS, T0)
    promoted = of_type(plan, SetNodeRole)
    assert [p.node for p in promoted] == [chosen]
    assert plan.status.failures[0].replaced_by == chosen


def test_two_nodes_failing_together_are_each_quarantined_and_swapped():
    actives = [node(f"a{i}", rack=f"r{i}") for i in range(10)]
    spares = [node("s1", rack="r1"), node("s3", rack="r3"), node("s5", rack="r5")]
    the_spec, held, pods, status = _running_pool(actives, spares, scope="Worker")
    held[1] = with_ready(held[1], False, at(-45))
    held[3] = with_ready(held[3], False, at(-40))
    plan = decide(snapshot(the_spec, held, pods, status), SETTINGS, T0)
    assert sorted(q.node for q in of_type(plan, QuarantineNode)) == ["a1", "a3"]
    assert sorted(p.node for p in of_type(plan, SetNodeRole)) == ["s1", "s3"]
    assert {f.node: f.replaced_by for f in plan.status.failures} == {"a1": "s1", "a3": "s3"}
    deletes = of_type(plan, DeletePod)
    assert sorted(d.name for d in deletes) == ["llm-train-g0-1", "llm-train-g0-3"]
    assert all(d.force for d in deletes)  # the kubelet is gone
    created = sorted(c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod))
    assert created == ["llm-train-g0-1-a1", "llm-train-g0-3-a1"]
    assert events(plan).count("NodeFailed") == 2
    assert plan.status.state == JobState.RECOVERING


def test_detected_is_when_the_trouble_began_and_cordoned_is_now():
    actives = [node("a0"), node("a1")]
    the_spec, held, pods, status = _running_pool(actives, [node("s0")])
    held[1] = with_ready(held[1], False, at(-100))
    plan = decide(snapshot(the_spec, held, pods, status), SETTINGS, T0)
    (q,) = of_type(plan, QuarantineNode)
    assert (q.detected, q.cordoned) == (at(-100), T0)


def test_a_gpu_fault_condition_is_answered_without_force():
    from phased.core.model import NodeCondition

    actives = [node("a0"), node("a1")]
    the_spec, held, pods, status = _running_pool(actives, [node("s0")])
    xid = NodeCondition("GPUXidError", "True", at(-1), message="XID 79")
    held[0] = replace(held[0], conditions=(*held[0].conditions, xid))
    plan = decide(snapshot(the_spec, held, pods, status), SETTINGS, T0)
    assert [q.reason for q in of_type(plan, QuarantineNode)] == ["GPUFault"]
    assert [d.force for d in of_type(plan, DeletePod) if d.name == "llm-train-g0-0"] == [False]


def test_a_deleted_node_is_recorded_without_a_cordon():
    actives = [node("a0"), node("a1")]
    the_spec, held, pods, status = _running_pool(actives, [node("s0")])
    gone = [n for n in held if n.name != "a1"]
    plan = decide(snapshot(the_spec, gone, pods, status), SETTINGS, T0)
    assert of_type(plan, QuarantineNode) == []
    assert [(f.node, f.reason, f.cordoned) for f in plan.status.failures] == [
        ("a1", "NodeDeleted", None)
    ]
    assert [p.node for p in of_type(plan, SetNodeRole)] == ["s0"]
    assert plan.status.failures[0].replaced_by == "s0"


def test_an_unsynced_node_view_never_reports_deletions():
    actives = [node("a0"), node("a1")]
    the_spec, held, pods, status = _running_pool(actives, [node("s0")])
    gone = [n for n in held if n.name != "a1"]
    plan = decide(snapshot(the_spec, gone, pods, status, known=None), SETTINGS, T0)
    assert plan.status.failures == []


def test_without_spares_the_gang_restarts_smaller_if_min_still_holds():
    actives = [node("a0"), node("a1"), node("a2")]
    the_spec, held, pods, status = _running_pool(actives, [])
    held[2] = with_ready(held[2], False, at(-60))
    snap = snapshot(the_spec, held, pods, status)
    plan = decide(snap, SETTINGS, T0)
    assert "SparesExhausted" in [c.type for c in plan.status.conditions if c.status == "True"]
    assert plan.status.restart_generation == 1
    created = of_type(landed(snap, plan).decide(), CreatePod)  # once the survivors are gone
    assert len(created) == 2
    assert created[0].manifest["metadata"]["labels"]["phased.dev/world-size"] == "2"


def test_without_spares_below_min_the_job_waits_holding_nothing_idle():
    actives = [node("a0"), node("a1")]
    the_spec, held, pods, status = _running_pool(actives, [])
    held[1] = with_ready(held[1], False, at(-60))
    snap = snapshot(the_spec, held, pods, status)
    plan = decide(snap, SETTINGS, T0)
    assert plan.status.state == JobState.WAITING
    assert plan.status.waiting_for == {"H100": 2}  # its whole min, to be claimed at once
    assert of_type(plan, CreatePod) == []
    assert "CapacityShort" in events(plan)
    # a0 is given back by the next pass, once its place in line is published
    assert of_type(plan, ReleaseNode) == [] and plan.requeue_after == 0
    again = landed(snap, plan).decide()
    assert [r.node for r in of_type(again, ReleaseNode)] == ["a0"]
    assert again.status.state == JobState.WAITING


def test_a_failed_spare_is_quarantined_and_refilled_without_touching_workers():
    actives = [node("a0"), node("a1")]
    the_spec, held, pods, status = _running_pool(actives, [node("s0")])
    held[2] = with_ready(held[2], False, at(-60))
    plan = decide(snapshot(the_spec, [*held, node("f0")], pods, status), SETTINGS, T0)
    assert [q.node for q in of_type(plan, QuarantineNode)] == ["s0"]
    assert of_type(plan, DeletePod) == [] and of_type(plan, CreatePod) == []
    assert "SparesRefilled" in events(plan)
    assert plan.status.failures[0].interruption_seconds == 0
    assert plan.status.restarts == 0


def test_never_claims_a_node_of_another_job():
    other = JOB.__class__(namespace="x", name="other", uid="uid-other")
    actives = [node("a0"), node("a1")]
    the_spec, held, pods, status = _running_pool(actives, [node("s0")])
    held[2] = with_ready(held[2], False, at(-60))
    theirs = owned(node("t0"), S, other)
    plan = decide(snapshot(the_spec, [*held, theirs], pods, status), SETTINGS, T0)
    touched = {getattr(a, "node", None) for a in plan.actions}
    assert "t0" not in touched
