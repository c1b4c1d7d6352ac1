from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.decide import decide
from phased.core.model import DeletePod, ReleaseNode
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    node,
    of_type,
    owned,
    pod,
    snapshot,
    spec,
    with_ready,
)


def test_deletion_deletes_workers_and_releases_active_and_spare_only():
    held = [
        owned(node("a0"), NodeRole.ACTIVE),
        with_ready(owned(node("a1"), NodeRole.ACTIVE), False, T0),
        owned(node("s0"), NodeRole.SPARE),
        owned(node("q0"), NodeRole.QUARANTINED),
    ]
    pods = [
        pod("llm-train-g0-0", "train", 0, node_name="a0"),
        pod("llm-train-g0-1", "train", 1, node_name="a1"),
    ]
    plan = decide(snapshot(spec(), held, pods, job=replace(JOB, deleting=True)), SETTINGS, T0)
    assert {(d.name, d.force) for d in of_type(plan, DeletePod)} == {
        ("llm-train-g0-0", False),
        ("llm-train-g0-1", True),
    }
    assert sorted(r.node for r in of_type(plan, ReleaseNode)) == ["a0", "a1", "s0"]
    assert not plan.finished


def test_deletion_is_finished_when_only_quarantined_nodes_remain():
    held = [owned(node("q0"), NodeRole.QUARANTINED)]
    plan = decide(snapshot(spec(), held, job=replace(JOB, deleting=True)), SETTINGS, T0)
    assert plan.actions == () and plan.finished
