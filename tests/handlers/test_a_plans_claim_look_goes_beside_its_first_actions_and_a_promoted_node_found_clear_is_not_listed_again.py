"""Two round trips off a swap's path, neither taken from what a claim or a clearing checks.

A failure's answer quarantines the failed node and deletes the gang's workers, then promotes
a spare and claims a free node to refill the spares. The free node's pods were listed before
any of it was sent (so that decide could choose another were others' pods running there);
now that list goes beside the first batch, and only the claim waits for it: the promotion
beside it goes once the quarantine landed. Found occupied, the claim is not sent: the pass
ends as when a claim is refused (no status written, the job decided again at once with the
node known to be occupied). A plan whose first batch claims (a pool formed) looks first, as
before, and chooses again within the pass.

The promoted spare is marked ``clearing-since`` with its role, and each pass of the job then
listed its pods to find guests — the pass that creates the gang on it too, the survivors
gone. Its pods are listed once the promotion landed: found with no pod but the job's, that
list stands in for the next passes' look for a second; anything else found, each pass lists
it afresh."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from phased import reconcile as module
from phased.api.v1alpha1 import NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.model import (
    Action,
    ClaimNode,
    DeletePod,
    EmitEvent,
    NodeSet,
    Plan,
    QuarantineNode,
    SetNodeRole,
    Snapshot,
)
from phased.core.settings import Settings
from phased.kube.client import KubeClient, KubeError
from phased.kube.nodes import Claim
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.core.builders import JOB, node, owned
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RAW = {
    "apiVersion": "phased.dev/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"name": "llm", "namespace": "ml", "uid": "u1", "resourceVersion": "5"},
    "spec": {},
}
GUEST = {
    "metadata": {"name": "guest", "namespace": "other", "uid": "g1"},
    "spec": {"nodeName": "f0"},
    "status": {"phase": "Running"},
}

ANSWER: tuple[Action, ...] = (
    QuarantineNode("n0", "NodeNotReady", "not ready", NOW, NOW),
    DeletePod("w0", force=True),
    SetNodeRole("s0", NodeRole.ACTIVE, replaces="n0"),
    *(DeletePod(f"w{i}") for i in range(1, 4)),
    ClaimNode("f0", "7", NodeRole.SPARE),
    EmitEvent("Normal", "SparePromoted", "s0 replaces n0"),
)


class _Cluster:
    """The pass's requests, stubbed: each a little while out, in a timeline."""

    def __init__(self, rec: Reconciler, busy: frozenset[str] = frozenset()) -> None:
        self.timeline: list[str] = []
        self.busy = busy
        self.written: list[Any] = []
        self.decided = 0
        self.ended = 0.0  # when the pass ended (time.monotonic)
        self.slow: dict[str, float] = {}  # requests that take longer than the rest
        rec.pod_verbs.on_node = self.on_node  # type: ignore[method-assign]
        rec.pod_verbs.delete = self.delete  # type: ignore[method-assign]
        rec.node_verbs.quarantine = self.node("quarantine")  # type: ignore[method-assign]
        rec.node_verbs.set_role = self.node("set role")  # type: ignore[method-assign]
        rec.node_verbs.claim = self.claim  # type: ignore[method-assign]

    async def _out(self, what: str) -> None:
        self.timeline.append(what)
        await asyncio.sleep(self.slow.get(what, 0.02))
        self.timeline.append(f"{what} done")

    async def on_node(self, name: str) -> list[Any]:
        await self._out(f"list {name}")
        return [GUEST] if name in self.busy else []

    async def delete(self, namespace: str, name: str, **_: Any) -> None:
        await self._out(f"delete {name}")

    def node(self, verb: str) -> Any:
        async def change(name: str, *_: Any, **__: Any) -> bool:
            await self._out(f"{verb} {name}")
            return True

        return change

    async def claim(self, name: str, *_: Any) -> Claim:
        await self._out(f"claim {name}")
        return Claim(won=True, fresh=None)


def _pass(
    monkeypatch: pytest.MonkeyPatch,
    plans: list[Plan],
    busy: frozenset[str] = frozenset(),
    slow: dict[str, float] | None = None,
) -> tuple[Reconciler, _Cluster]:
    """One reconcile of u1 whose decisions are ``plans`` in turn (the last one repeated)."""

    async def scenario() -> tuple[Reconciler, _Cluster]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        rec.jobs["u1"] = JobEntry(ref=job_ref_from_raw(RAW), raw=RAW)
        rec.pods.replace([], "1", "")  # the pods' first list: the pass reads from the index
        cluster = _Cluster(rec, busy)
        cluster.slow = slow or {}

        async def finalized(*_: Any) -> bool:
            return True

        async def observed(*_: Any) -> Snapshot:
            ref = rec.jobs["u1"].ref
            return Snapshot(ref, None, None, TrainingJobStatus(), nodes=NodeSet.of(()), pods=())

        def decide(snapshot: Snapshot, *_: Any) -> Plan:
            cluster.decided += 1
            return plans[min(cluster.decided - 1, len(plans) - 1)]

        async def write(*args: Any) -> None:
            cluster.written.append(args)

        async def post(*_: Any) -> None:
            return None

        monkeypatch.setattr(rec.job_verbs, "set_finalizer", finalized)
        monkeypatch.setattr(rec, "_observe", observed)
        monkeypatch.setattr(rec, "_write_status", write)
        monkeypatch.setattr(rec, "_observe_metrics", lambda *_: None)
        monkeypatch.setattr(rec.event_verbs, "post", post)
        monkeypatch.setattr(module, "decide", decide)
        await rec.reconcile("u1")
        cluster.ended = time.monotonic()
        return rec, cluster

    return asyncio.run(scenario())


def test_a_failures_answer_looks_at_its_refill_beside_its_first_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer = Plan(actions=ANSWER, status=TrainingJobStatus())
    _, cluster = _pass(monkeypatch, [answer], slow={"list f0": 0.1})
    t = cluster.timeline
    # The look at the node to claim went out with the first batch (the quarantine and the
    # deletions), before any of them came back.
    first = {"list f0", "quarantine n0", *(f"delete w{i}" for i in range(4))}
    assert set(t[:6]) == first
    # The claim waited for the look; the promotion beside it went once the quarantine
    # landed, the look still out.
    assert t.index("list f0 done") < t.index("claim f0")
    assert t.index("quarantine n0 done") < t.index("set role s0") < t.index("list f0 done")
    assert cluster.decided == 1
    assert len(cluster.written) == 1


def test_a_refill_found_occupied_stops_the_plan_at_its_claim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rec, cluster = _pass(
        monkeypatch, [Plan(actions=ANSWER, status=TrainingJobStatus())], frozenset({"f0"})
    )
    t = cluster.timeline
    assert "quarantine n0 done" in t and "delete w3 done" in t  # the first batch landed
    assert "set role s0 done" in t  # the promotion beside the claim went on its own
    assert not any(w.startswith("claim") for w in t)
    assert cluster.written == []  # the plan's status holds a node the job did not get
    assert "f0" in rec.occupied  # the next decision knows it
    entry = rec.jobs["u1"]
    assert entry.claim_refused
    assert entry.timer is not None  # decided again in a moment
    assert entry.timer_due - cluster.ended <= 0.1


def test_a_refill_look_that_fails_leaves_the_promotion_beside_it_landed_not_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The look fails while the promotion it no longer holds back is still out: the pass
    fails only once that promotion has come back."""
    original = _Cluster.on_node
    clusters: list[_Cluster] = []

    async def on_node(self: _Cluster, name: str) -> list[Any]:
        clusters.append(self)
        await original(self, name)
        raise KubeError(500, "InternalError", "etcd timeout", "list", "pods")

    monkeypatch.setattr(_Cluster, "on_node", on_node)
    slow = {"set role s0": 0.1, "quarantine n0": 0.01}
    with pytest.raises(KubeError):
        _pass(monkeypatch, [Plan(actions=ANSWER, status=TrainingJobStatus())], slow=slow)
    t = clusters[0].timeline
    # Back before the pass failed: one left in flight is cancelled with the event loop.
    assert t.index("list f0 done") < t.index("set role s0 done")
    assert not any(w.startswith("claim") for w in t)


def test_a_plan_that_claims_first_looks_first_and_chooses_again_within_the_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forming = Plan(actions=(ClaimNode("f0", "7", NodeRole.ACTIVE),), status=TrainingJobStatus())
    other = Plan(actions=(ClaimNode("f1", "8", NodeRole.ACTIVE),), status=TrainingJobStatus())
    _, cluster = _pass(monkeypatch, [forming, other], frozenset({"f0"}))
    t = cluster.timeline
    assert t[:2] == ["list f0", "list f0 done"]
    assert cluster.decided == 2
    assert "claim f0" not in t and "claim f1" in t
    assert len(cluster.written) == 1


MARK = {labels.ANNOTATION_CLEARING: "2026-03-01T12:00:00Z"}


def _clearing(rec: Reconciler) -> None:
    ours = replace(JOB, uid="u1")
    held = (replace(owned(node("s0"), NodeRole.ACTIVE, ours), annotations=MARK),)
    rec.nodes.snapshot = lambda: NodeSet.of(held)  # type: ignore[method-assign]


def test_a_promoted_node_found_clear_is_not_listed_again_for_a_moment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    promote = Plan(actions=(SetNodeRole("s0", NodeRole.ACTIVE),), status=TrainingJobStatus())
    rec, cluster = _pass(monkeypatch, [promote])
    assert cluster.timeline == ["set role s0", "set role s0 done", "list s0", "list s0 done"]
    _clearing(rec)
    cluster.timeline.clear()
    found = asyncio.run(rec._node_pods(rec.jobs["u1"].ref, rec.nodes.snapshot()))
    assert found == {"s0": ()} and cluster.timeline == []  # the list after the promotion
    # Another job holding the node next (released, claimed and promoted by it) lists it.
    other = replace(rec.jobs["u1"].ref, uid="u2")
    theirs = replace(owned(node("s0"), NodeRole.ACTIVE, replace(JOB, uid="u2")), annotations=MARK)
    cluster.timeline.clear()
    asyncio.run(rec._node_pods(other, NodeSet.of((theirs,))))
    assert cluster.timeline == ["list s0", "list s0 done"]
    cluster.timeline.clear()
    seen, pods = rec._promoted_clear["u1", "s0"]
    rec._promoted_clear["u1", "s0"] = (seen - 1.5, pods)  # a moment later
    asyncio.run(rec._node_pods(rec.jobs["u1"].ref, rec.nodes.snapshot()))
    assert cluster.timeline == ["list s0", "list s0 done"]


def test_a_promoted_node_with_a_guest_is_listed_by_each_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    promote = Plan(actions=(SetNodeRole("s0", NodeRole.ACTIVE),), status=TrainingJobStatus())
    rec, cluster = _pass(monkeypatch, [promote], frozenset({"s0"}))
    assert not rec._promoted_clear
    _clearing(rec)
    cluster.timeline.clear()
    found = asyncio.run(rec._node_pods(rec.jobs["u1"].ref, rec.nodes.snapshot()))
    assert cluster.timeline == ["list s0", "list s0 done"]
    assert [p.name for p in found["s0"]] == ["guest"]


def test_a_node_already_active_is_not_listed_when_its_role_is_written_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> list[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        entry = JobEntry(ref=job_ref_from_raw(RAW), raw=RAW)
        rec.jobs["u1"] = entry
        cluster = _Cluster(rec)
        ours = replace(JOB, uid="u1")
        active = owned(node("s0"), NodeRole.ACTIVE, ours)
        monkeypatch.setattr(rec.nodes, "get", lambda name: active if name == "s0" else None)
        await rec._perform(entry, SetNodeRole("s0", NodeRole.ACTIVE), NOW)
        return cluster.timeline

    assert asyncio.run(scenario()) == ["set role s0", "set role s0 done"]


def test_a_promoted_nodes_list_that_fails_fails_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The promotion landed; the list only spares the next passes a request."""

    async def scenario() -> Reconciler:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        entry = JobEntry(ref=job_ref_from_raw(RAW), raw=RAW)
        rec.jobs["u1"] = entry
        cluster = _Cluster(rec)

        async def broken(name: str) -> list[Any]:
            raise KubeError(500, "InternalError", "etcd timeout", "list", "pods")

        cluster.on_node = broken  # type: ignore[method-assign]
        rec.pod_verbs.on_node = broken  # type: ignore[method-assign]
        await rec._perform(entry, SetNodeRole("s0", NodeRole.ACTIVE), NOW)
        return rec

    assert not asyncio.run(scenario())._promoted_clear
