"""A plan's node changes and pod deletions next to each other are sent at once, its pod
creations in batches of 1, 2, 4, ...

One request after another, a lost node's answer was a round trip per node change (each a
read and a patch) and per survivor of the gang to delete before the pass could end, and the
new generation waits until every one is gone: at 5,000 nodes and an API server under load,
each round trip is tens of milliseconds. A node changed twice in a plan is changed the
second time once the first change landed. The deletions of such a run all go in its first
batch, after its node changes: none waits for a node change, and the new generation waits
for the workers they stop (the survivors of a failure went with the spare's promotion, a
round trip later). Nor do the node changes after them wait for them: a spare's promotion
goes once the failed node's quarantine is back, the deletions still out; they are awaited
before anything else is sent and before the pass ends. The creations go as the ReplicaSet
and Job controllers send theirs ("slow start"): one create refused by the namespace stops
the run after one request, and a gang is asked for in a few round trips. Every request sent
is awaited before an error stops the plan, and the first error in the order they were sent
is the one that counts (a refusal is said on the job)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from phased.api.v1alpha1 import NodeRole, TrainingJobStatus
from phased.core.model import (
    Action,
    ClaimNode,
    CreatePod,
    DeletePod,
    EmitEvent,
    EnsureService,
    Plan,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
    StartClearing,
)
from phased.core.settings import Settings
from phased.kube.client import Forbidden, KubeClient, KubeError
from phased.reconcile import JobEntry, Reconciler, _Refused, batches, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RAW = {
    "apiVersion": "phased.dev/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"name": "llm", "namespace": "ml", "uid": "u1", "resourceVersion": "5"},
    "spec": {},
}


def _create(rank: int) -> CreatePod:
    return CreatePod(manifest={"metadata": {"name": f"llm-train-g1-r{rank}"}})


def _swap(survivors: int, workers: int) -> tuple[Action, ...]:
    """A failed node's answer as decide plans it: quarantine, promote, delete the survivors
    (one event between them), then, in a later pass, create the new generation."""
    return (
        QuarantineNode("n0", "NodeNotReady", "not ready", NOW, NOW),
        SetNodeRole("s0", NodeRole.ACTIVE, replaces="n0"),
        *(DeletePod(f"llm-train-g0-r{i}") for i in range(survivors // 2)),
        EmitEvent("Normal", "SpareSwapped", "s0 replaces n0"),
        *(DeletePod(f"llm-train-g0-r{i}") for i in range(survivors // 2, survivors)),
        *(_create(r) for r in range(workers)),
    )


def test_node_changes_and_deletions_next_to_each_other_go_as_one_batch_and_creations_double() -> (
    None
):
    sizes = [(type(b[0]).__name__, len(b)) for b in batches(_swap(survivors=7, workers=12))]
    assert sizes == [
        ("QuarantineNode", 8),  # the failed node leaves, and the 7 survivors' deletions go
        ("SetNodeRole", 1),  # with it (an event between them does not split them), before
        ("CreatePod", 1),  # the promotion that replaces it; events go last
        ("CreatePod", 2),
        ("CreatePod", 4),
        ("CreatePod", 5),
    ]
    # Runs are kept in the plan's order; an action of another kind between them splits them.
    split = (DeletePod("a"), EnsureService({}), DeletePod("b"), SetNodeRole("s", NodeRole.ACTIVE))
    assert [len(b) for b in batches(split)] == [1, 1, 2]
    # Within a batch the node changes go first (the failed node's quarantine is not sent
    # behind the deletions), then the deletions, each in the plan's order.
    plan = [a for a in _swap(7, 12) if not isinstance(a, EmitEvent)]
    sent = [a for b in batches(_swap(7, 12)) for a in b]
    assert sorted(sent, key=plan.index) == plan
    assert [a for a in sent if isinstance(a, DeletePod)] == [
        a for a in plan if isinstance(a, DeletePod)
    ]
    assert [type(a).__name__ for a in sent[:9]] == [
        "QuarantineNode",
        *["DeletePod"] * 7,
        "SetNodeRole",
    ]


def test_a_node_changed_twice_in_a_plan_is_changed_once_the_first_change_landed() -> None:
    plan = (
        SetNodeRole("s", NodeRole.ACTIVE),
        DeletePod("a"),
        QuarantineNode("n", "NodeNotReady", "not ready", NOW, NOW),
        StartClearing("s"),  # the same node: the next batch
        ReleaseNode("n"),
        ClaimNode("f", "7", NodeRole.SPARE),
    )
    assert [[type(a).__name__ for a in b] for b in batches(plan)] == [
        ["SetNodeRole", "QuarantineNode", "DeletePod"],  # the promotion comes first here
        # "s" again: the next batch, sent once the first is back (the release of "n" after
        # its quarantine, too)
        ["StartClearing", "ReleaseNode", "ClaimNode"],
    ]


def test_a_node_made_active_waits_for_the_node_changes_before_it() -> None:
    # A swap of places: the troubled active made a spare, the spare made active. Sent
    # together, a pass killed between them could leave the promotion alone landed: an
    # active beyond nodes.max, kept as a resize still to come.
    swap = (
        SetNodeRole("troubled", NodeRole.SPARE),
        DeletePod("w-1"),
        SetNodeRole("spare", NodeRole.ACTIVE, replaces="troubled"),
        ClaimNode("free", "7", NodeRole.SPARE),
    )
    assert [len(b) for b in batches(swap)] == [2, 2]
    # Nodes made active together (a pool formed), and deletions before one, go at once.
    forming = (
        DeletePod("old"),
        ClaimNode("a", "1", NodeRole.ACTIVE),
        ClaimNode("b", "2", NodeRole.ACTIVE),
        ClaimNode("c", "3", NodeRole.SPARE),
    )
    assert [len(b) for b in batches(forming)] == [4]


class _Api:
    """The pass's requests, recorded with how many were in flight; errors by pod name."""

    def __init__(self, ticks: int = 3) -> None:
        self.in_flight = 0
        self.batches: list[list[str]] = []  # pods sent while others of the batch were out
        self.sent: list[str] = []
        self.log: list[str] = []  # "name" when sent, "name back" when answered
        self.errors: dict[str, KubeError] = {}
        self.ticks = ticks  # how long a request stays out
        self.slow: dict[str, int] = {}  # ... or, by name, this long
        self.out_at_end = -1  # requests still out when the pass ended

    async def _request(self, name: str) -> None:
        if self.in_flight == 0:
            self.batches.append([])
        self.in_flight += 1
        self.batches[-1].append(name)
        self.sent.append(name)
        self.log.append(name)
        try:
            # stay out long enough for the rest of a batch to be sent
            for _ in range(self.slow.get(name, self.ticks)):
                await asyncio.sleep(0)
            if name in self.errors:
                raise self.errors[name]
        finally:
            self.in_flight -= 1
            self.log.append(f"{name} back")

    async def delete(self, namespace: str, name: str, **_: Any) -> None:
        await self._request(name)

    async def create(self, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        await self._request(manifest["metadata"]["name"])
        return manifest  # the pod as created

    async def node(self, name: str, *_: Any, **__: Any) -> bool:
        await self._request("node")
        return False  # nothing changed that the pass must look at

    async def post(self, *_: Any) -> None:
        return None


def _act(monkeypatch: pytest.MonkeyPatch, actions: tuple[Action, ...], api: _Api) -> None:
    rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
    entry = JobEntry(ref=job_ref_from_raw(RAW), raw=RAW)
    rec.jobs["u1"] = entry
    monkeypatch.setattr(rec.pod_verbs, "delete", api.delete)
    monkeypatch.setattr(rec.pod_verbs, "create", api.create)
    monkeypatch.setattr(rec.node_verbs, "quarantine", api.node)
    monkeypatch.setattr(rec.node_verbs, "set_role", api.node)
    monkeypatch.setattr(rec.event_verbs, "post", api.post)
    plan = Plan(actions=actions, status=TrainingJobStatus())

    async def act() -> None:
        try:
            await rec._act(entry, plan, NOW)
        finally:
            api.out_at_end = api.in_flight

    asyncio.run(act())


def test_the_survivors_are_deleted_at_once_and_the_new_workers_created_in_doubling_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = _Api()
    _act(monkeypatch, _swap(survivors=7, workers=8), api)
    assert [len(b) for b in api.batches] == [8, 1, 1, 2, 4, 1]
    # The quarantine and the deletions, then the promotion: the survivors stop a round trip
    # sooner, and the new generation (which waits for them to be gone) with them.
    assert api.batches[0] == ["node", *(f"llm-train-g0-r{i}" for i in range(7))]
    assert api.batches[1] == ["node"]
    assert api.batches[2:] == [
        ["llm-train-g1-r0"],
        ["llm-train-g1-r1", "llm-train-g1-r2"],
        [f"llm-train-g1-r{r}" for r in range(3, 7)],
        ["llm-train-g1-r7"],
    ]


def test_a_refused_create_stops_the_run_once_its_batch_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = _Api()
    quota = Forbidden(403, "Forbidden", "exceeded quota", "create", "pods")
    api.errors["llm-train-g1-r2"] = quota
    with pytest.raises(_Refused) as refused:
        _act(monkeypatch, tuple(_create(r) for r in range(8)), api)
    assert refused.value.error is quota
    # r1 and r2 went together; nothing after their batch was asked for
    assert api.sent == ["llm-train-g1-r0", "llm-train-g1-r1", "llm-train-g1-r2"]
    assert api.in_flight == 0


def test_a_failed_delete_stops_the_plan_after_every_delete_of_its_batch_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = _Api()
    first = KubeError(500, "InternalError", "etcd timeout", "delete", "pods")
    api.errors["llm-train-g0-r1"] = first
    api.errors["llm-train-g0-r4"] = KubeError(500, "InternalError", "later", "delete", "pods")
    with pytest.raises(KubeError) as failed:
        _act(monkeypatch, _swap(survivors=6, workers=2), api)
    assert failed.value is first  # the first in the plan's order, not the first to come back
    # The quarantine and every deletion were sent and came back, and the promotion (which
    # waits for the quarantine only); the creates (which wait for the deletions) were not.
    assert api.sent == ["node", *(f"llm-train-g0-r{i}" for i in range(6)), "node"]
    assert api.in_flight == 0


def test_the_promotion_goes_while_the_survivors_deletions_are_out_and_the_creates_after_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = _Api()
    api.slow = {f"llm-train-g0-r{i}": 40 for i in range(7)}  # deletions slower than a patch
    _act(monkeypatch, _swap(survivors=7, workers=2), api)
    deletions = [f"llm-train-g0-r{i}" for i in range(7)]
    # The quarantine first, then the deletions; the promotion once the quarantine is back,
    # before any deletion is; the first create once every deletion is.
    assert api.log[:8] == ["node", *deletions]
    promoted = api.log.index("node", 1)
    assert api.log.index("node back") < promoted
    assert all(api.log.index(f"{d} back") > promoted for d in deletions)
    first_create = api.log.index("llm-train-g1-r0")
    assert all(api.log.index(f"{d} back") < first_create for d in deletions)
    assert api.out_at_end == 0


def test_a_failed_node_change_stops_the_plan_once_the_deletions_out_beside_it_are_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = _Api()
    conflict = KubeError(500, "InternalError", "etcd timeout", "patch", "nodes")
    later = KubeError(500, "InternalError", "later", "delete", "pods")
    api.errors["node"] = conflict
    api.errors["llm-train-g0-r0"] = later
    api.slow = {f"llm-train-g0-r{i}": 40 for i in range(3)}
    with pytest.raises(KubeError) as failed:
        _act(monkeypatch, _swap(survivors=3, workers=2), api)
    assert failed.value is conflict  # the quarantine's, sent first
    # Nothing after the quarantine's batch was sent, and no deletion was left out.
    assert api.sent == ["node", *(f"llm-train-g0-r{i}" for i in range(3))]
    assert api.in_flight == 0
    assert api.out_at_end == 0  # every deletion was back before the error left the pass
