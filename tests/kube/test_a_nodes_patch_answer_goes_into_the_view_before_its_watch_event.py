"""A node as one of the operator's own changes wrote it (or read it, giving up) goes into the
node view at once, as its watch event would, and wakes the jobs it concerns the same way; the
watch event that follows is a heartbeat.

Before, only a claim's answer went into the view. A swap's quarantine and promotion waited
for the Node watch, and the pass after the swap (woken by the survivors' deletions, at once)
saw the failed node still active and the promoted spare still a spare whenever the watch
lagged the answers to the patches — at thousands of nodes, often: it quarantined the node
again and said `NodeFailed`, `NodeQuarantined` and `SparePromoted` a second time."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import JobRef, QuarantineNode, ReleaseNode, SetNodeRole
from phased.core.settings import Settings
from phased.reconcile import JobEntry, Reconciler
from tests.kube.fake_cluster import FakeCluster

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")


def _held(role: NodeRole) -> dict[str, str]:
    return {
        labels.LABEL_JOB_UID: JOB.uid,
        labels.LABEL_JOB: JOB.name,
        labels.LABEL_JOB_NAMESPACE: JOB.namespace,
        labels.LABEL_ROLE: role.value,
        labels.LABEL_INSTALLATION: Settings().installation,
    }


def _pool(role: NodeRole) -> dict[str, Any]:
    return {"taints": [{"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"}]}


class _Operator:
    """A reconciler on the fake API, its view listed from it, the jobs it wakes recorded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.rec = Reconciler(cluster, Settings())  # type: ignore[arg-type]
        self.rec.nodes.replace_all(copy.deepcopy(list(cluster.nodes.values())))
        self.entry = JobEntry(ref=JOB, raw={})
        self.rec.jobs[JOB.uid] = self.entry
        self.woken: list[str] = []
        monkeypatch.setattr(self.rec, "trigger", lambda uid, *_, **__: self.woken.append(uid))
        monkeypatch.setattr(self.rec, "trigger_waiting", lambda: self.woken.append("line"))

    def act(self, *actions: Any) -> None:
        async def run() -> None:
            for action in actions:
                await self.rec._perform(self.entry, action, NOW)

        asyncio.run(run())

    def role(self, name: str) -> NodeRole | None:
        node = self.rec.nodes.get(name)
        assert node is not None
        return node.role


def test_a_swaps_quarantine_and_promotion_are_in_the_view_when_they_return(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeCluster()
    cluster.add_node("n0", _held(NodeRole.ACTIVE), spec=_pool(NodeRole.ACTIVE))
    cluster.add_node("s0", _held(NodeRole.SPARE), spec=_pool(NodeRole.SPARE))
    op = _Operator(monkeypatch, cluster)
    op.act(
        QuarantineNode("n0", "NodeNotReady", "not ready", NOW, NOW),
        SetNodeRole("s0", NodeRole.ACTIVE, replaces="n0"),
    )
    assert op.role("n0") == NodeRole.QUARANTINED
    failed = op.rec.nodes.get("n0")
    assert failed is not None and failed.unschedulable
    assert op.role("s0") == NodeRole.ACTIVE
    for name in ("n0", "s0"):  # the view holds the version the patch answered with
        view = op.rec.nodes.get(name)
        assert view is not None
        assert view.resource_version == cluster.nodes[name]["metadata"]["resourceVersion"]
    # As the two watch events would have: the quarantine wakes the line too (the nodes a
    # phase could ever be given are fewer).
    assert op.woken == [JOB.uid, "line", JOB.uid]
    op.woken.clear()
    for name in ("n0", "s0"):  # and the watch events, when they come, are heartbeats
        op.rec.node_event("MODIFIED", copy.deepcopy(cluster.nodes[name]))
    assert op.woken == []


def test_a_release_is_in_the_view_at_once_and_wakes_the_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeCluster()
    cluster.add_node("s0", _held(NodeRole.SPARE), spec=_pool(NodeRole.SPARE))
    op = _Operator(monkeypatch, cluster)
    op.act(ReleaseNode("s0"))
    node = op.rec.nodes.get("s0")
    assert node is not None and node.owner_uid is None
    assert op.woken == [JOB.uid, "line"]


def test_a_change_that_finds_the_node_gone_or_not_the_jobs_puts_that_in_the_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeCluster()
    cluster.add_node("n0", _held(NodeRole.ACTIVE), spec=_pool(NodeRole.ACTIVE))
    cluster.add_node("n1", _held(NodeRole.ACTIVE), spec=_pool(NodeRole.ACTIVE))
    op = _Operator(monkeypatch, cluster)
    del cluster.nodes["n0"]  # deleted; the watch has not said so yet
    other = {**_held(NodeRole.ACTIVE), labels.LABEL_JOB_UID: "uid-other"}
    cluster.nodes["n1"]["metadata"]["labels"] = other  # someone else's now
    cluster.nodes["n1"]["metadata"]["resourceVersion"] = "999"
    op.act(SetNodeRole("n0", NodeRole.SPARE), SetNodeRole("n1", NodeRole.SPARE))
    assert op.rec.nodes.get("n0") is None
    n1 = op.rec.nodes.get("n1")
    assert n1 is not None and n1.owner_uid == "uid-other" and n1.resource_version == "999"
    # Each change was first made from the view and refused (404; 409, the node moved on),
    # then n1 read: nothing was written to a node gone or no longer the job's.
    assert cluster.calls == [
        ("PATCH", "/api/v1/nodes/n0"),
        ("PATCH", "/api/v1/nodes/n1"),
        ("GET", "/api/v1/nodes/n1"),
    ]
    assert cluster.nodes["n1"]["metadata"]["labels"] == other
