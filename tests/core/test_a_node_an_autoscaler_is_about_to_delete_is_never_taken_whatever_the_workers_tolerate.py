"""A node an autoscaler has marked for deletion is about to go, whatever the workers
tolerate: the cluster autoscaler's ``ToBeDeletedByClusterAutoscaler`` taint and Karpenter's
``karpenter.sh/disrupted`` (``karpenter.sh/disruption`` before v1) are counted as taints the
workers do not tolerate, even by workers that tolerate every taint (``operator: Exists`` and
no key, as many GPU templates write it). So a free node so marked is never claimed, a spare so
marked is never promoted and leaves the pool (``TaintedNodeReleased``) to be replaced, and an
active node so marked leaves the pool once its worker is evicted. Before, such workers
"tolerated" the taint: the spare was promoted onto a node being deleted, and the pool was
refilled with one."""

from dataclasses import replace
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import ClaimNode, EmitEvent, PodPhase, SetNodeRole, Taint
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

TOLERATES_ALL = [{"operator": "Exists"}]
DELETIONS = [
    Taint("ToBeDeletedByClusterAutoscaler", "1718000000", "NoSchedule"),
    Taint("karpenter.sh/disrupted", "", "NoSchedule"),
    Taint("karpenter.sh/disruption", "disrupting", "NoSchedule"),
]


def _cluster(count: int) -> Cluster:
    template: dict[str, Any] = {
        "image": "registry.example/llm:1",
        "command": ["train"],
        "spec": {"tolerations": TOLERATES_ALL},
    }
    the_spec = spec(phase("train", 2, 2), spares=1, template=template)
    return Cluster(the_spec, {n.name: n for n in nodes("h", count)})


def _tainted(c: Cluster, name: str, taint: Taint) -> None:
    c.nodes[name] = replace(c.nodes[name], taints=(*c.nodes[name].taints, taint))


def _events(c: Cluster, reason: str) -> list[str]:
    return [a.message for a in c.log if isinstance(a, EmitEvent) and a.reason == reason]


def _settle(c: Cluster) -> None:
    for _ in range(12):
        c.advance(30)
        plan = c.step()
        if not any(not isinstance(a, EmitEvent) for a in plan.actions):
            return
    raise AssertionError("not quiet")


@pytest.mark.parametrize("taint", DELETIONS, ids=lambda t: t.key)
def test_a_spare_marked_for_deletion_is_not_promoted_and_is_replaced(taint: Taint) -> None:
    c = _cluster(4)
    c.settle()
    assert c.held(NodeRole.SPARE) == ["h02"]
    _tainted(c, "h02", taint)
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    c.advance(600)  # past notReadyGrace
    _settle(c)
    promoted = [a.node for a in c.log if isinstance(a, SetNodeRole) and a.role == NodeRole.ACTIVE]
    assert "h02" not in promoted
    assert "h02" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)
    assert c.nodes["h02"].taints == (taint,)  # our marks gone, the autoscaler's kept
    (said,) = _events(c, "TaintedNodeReleased")
    assert "h02" in said and f"{taint.key}:NoSchedule" in said
    live = [p for p in c.pods.values() if p.generation == c.status.restart_generation]
    assert {p.node_name for p in live} == {"h01", "h03"}
    assert all(p.phase == PodPhase.RUNNING for p in live)


@pytest.mark.parametrize("taint", DELETIONS, ids=lambda t: t.key)
def test_a_free_node_marked_for_deletion_is_not_claimed(taint: Taint) -> None:
    c = _cluster(3)
    _tainted(c, "h00", taint)
    c.settle()
    assert c.status.state == JobState.RUNNING
    assert "h00" not in [a.node for a in c.log if isinstance(a, ClaimNode)]
    assert c.held(NodeRole.ACTIVE) == ["h01", "h02"] and c.held(NodeRole.SPARE) == []


def test_an_active_node_marked_for_deletion_leaves_the_pool_once_its_worker_is_evicted() -> None:
    c = _cluster(3)
    c.settle()
    _tainted(c, "h00", DELETIONS[0])
    _settle(c)
    assert "h00" in c.held(NodeRole.ACTIVE)  # the worker runs on until it is evicted
    evicted = next(p.name for p in c.pods.values() if p.node_name == "h00")
    del c.pods[evicted]  # the autoscaler's drain
    _settle(c)
    assert "h00" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)
    assert len(_events(c, "TaintedNodeReleased")) == 1
    live = [p for p in c.pods.values() if p.generation == c.status.restart_generation]
    assert {p.node_name for p in live} == {"h01", "h02"}
    assert all(p.phase == PodPhase.RUNNING for p in live)
