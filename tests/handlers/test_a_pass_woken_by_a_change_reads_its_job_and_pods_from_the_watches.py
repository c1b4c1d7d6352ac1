"""Where a pass reads its job and its pods: from what the watches hold (the job as kopf's
watch and our own status writes left it, the pods from the pod index, which holds our own
creates' and deletes' answers) when a change woke it — no request before it decides — and
from the API (a GET and a LIST, sent at once) when the pod index is not synced yet, when the
job's last pass failed (a request of it may have landed unanswered), and when the resync
asked for the look (a watch fallen silent hides nothing for longer than an interval); and
while the job is being deleted, or once a read found it gone (a namesake may follow it, and
only a GET tells them apart)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phased import reconcile as module
from phased.api.v1alpha1 import TrainingJobStatus
from phased.core.model import CreatePod, DeletePod, Plan, Snapshot
from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.kube.podindex import indexed
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi
from tests.kube.test_the_pod_index_follows_watch_events_and_answers_and_never_goes_back import (
    pod,
)

RAW = {
    "apiVersion": "phased.dev/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"name": "llm", "namespace": "ml", "uid": "u1", "resourceVersion": "5"},
    "spec": {},
}
FRESH = {**RAW, "metadata": {**RAW["metadata"], "resourceVersion": "9"}}


class Pass:
    """A reconciler with job ``u1`` and its pod ``w-0`` Running in the index (unless not
    ``synced``), whose API answers the job at version 9 and the pod Failed; decide records
    the snapshot it is given and plans nothing."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, *, synced: bool = True, raw: Any = RAW
    ) -> None:
        self.rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        self.entry = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
        self.answer: dict[str, Any] | None = FRESH
        self.rec.jobs["u1"] = self.entry
        if synced:
            self.rec.pods.replace([indexed(pod("w-0", 7))], "10")  # type: ignore[list-item]
        self.requests: list[str] = []
        self.seen: list[Snapshot] = []

        async def got(*_: Any) -> dict[str, Any] | None:
            self.requests.append("GET job")
            return self.answer

        async def listed(*_: Any) -> list[Any]:
            self.requests.append("LIST pods")
            return [pod("w-0", 8, phase="Failed")]

        async def finalized(*_: Any) -> bool:
            return True

        async def nothing(*_: Any) -> None:
            return None

        def decide(snapshot: Snapshot, *_: Any) -> Plan:
            self.seen.append(snapshot)
            return Plan(actions=(), status=TrainingJobStatus())

        monkeypatch.setattr(self.rec.job_verbs, "get", got)
        monkeypatch.setattr(self.rec.pod_verbs, "select", listed)
        monkeypatch.setattr(self.rec.job_verbs, "set_finalizer", finalized)
        monkeypatch.setattr(self.rec, "_write_status", nothing)
        monkeypatch.setattr(self.rec, "_observe_metrics", lambda *_: None)
        monkeypatch.setattr(module, "decide", decide)

    def woken(self, *, routine: bool = False) -> Snapshot | None:
        """One pass, woken as the resync wakes a job (``routine``) or as a change does; the
        snapshot it decided on (None: it decided nothing)."""
        decided = len(self.seen)

        async def scenario() -> None:
            passes = self.rec.passes
            self.rec.trigger("u1", routine=routine)
            for _ in range(1000):
                if self.rec.passes > passes:
                    return
                await asyncio.sleep(0.001)
            raise AssertionError("no pass")

        asyncio.run(scenario())
        return self.seen[-1] if len(self.seen) > decided else None


def states(snapshot: Snapshot | None) -> list[str]:
    assert snapshot is not None
    return [f"{p.name} {p.phase}" for p in snapshot.pods]


def test_a_pass_woken_by_a_change_sends_no_request_before_it_decides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = Pass(monkeypatch)
    snapshot = one.woken()
    assert one.requests == []
    assert states(snapshot) == ["w-0 Running"]
    assert snapshot is not None and snapshot.job.uid == "u1"


def test_the_resyncs_look_reads_afresh_and_the_next_change_reads_the_watches_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = Pass(monkeypatch)
    assert states(one.woken(routine=True)) == ["w-0 Failed"]
    assert sorted(one.requests) == ["GET job", "LIST pods"]
    assert one.entry.raw["metadata"]["resourceVersion"] == "9"  # the fresh job was taken
    one.requests.clear()
    one.woken()
    assert one.requests == []


def test_a_pass_after_a_failed_one_reads_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    one = Pass(monkeypatch)
    one.entry.failed_passes = 1
    assert states(one.woken()) == ["w-0 Failed"]
    assert sorted(one.requests) == ["GET job", "LIST pods"]


def test_until_the_pod_index_is_synced_every_pass_reads_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = Pass(monkeypatch, synced=False)
    assert states(one.woken()) == ["w-0 Failed"]
    assert sorted(one.requests) == ["GET job", "LIST pods"]


def test_a_job_being_deleted_is_read_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    deleting = {**RAW, "metadata": {**RAW["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    one = Pass(monkeypatch, raw=deleting)
    one.answer = {**FRESH, "metadata": {**deleting["metadata"], "resourceVersion": "9"}}
    assert states(one.woken()) == ["w-0 Failed"]
    assert sorted(one.requests) == ["GET job", "LIST pods"]


def test_a_job_a_read_found_gone_or_replaced_is_read_afresh_until_its_entry_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = Pass(monkeypatch)
    one.answer = {**FRESH, "metadata": {**FRESH["metadata"], "uid": "u1-namesake"}}
    assert one.woken(routine=True) is None  # the namesake is not this job: nothing decided
    one.requests.clear()
    one.answer = None
    assert one.woken() is None  # woken by a change, it still reads (and finds it gone)
    assert "GET job" in one.requests
    one.requests.clear()
    assert one.woken() is None
    assert "GET job" in one.requests


def test_our_own_creates_and_deletes_go_into_the_index_before_their_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = Pass(monkeypatch)
    one.rec.pods.apply("ADDED", pod("w-1", 8))

    async def create(namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        return pod("w-2", 11, phase="Pending")

    async def delete(namespace: str, name: str, **_: Any) -> dict[str, Any] | None:
        if name == "w-1":
            return None  # no such pod any more
        return pod(name, 12, deletionTimestamp="2026-01-01T00:00:30Z")

    monkeypatch.setattr(one.rec.pod_verbs, "create", create)
    monkeypatch.setattr(one.rec.pod_verbs, "delete", delete)
    woken: list[str] = []
    monkeypatch.setattr(one.rec, "trigger", lambda uid, *_, **__: woken.append(uid))
    now = module.utcnow()
    manifest = {"metadata": {"name": "w-2"}}

    async def act() -> None:
        for action in (CreatePod(manifest=manifest), DeletePod(name="w-0"), DeletePod("w-1")):
            await one.rec._perform(one.entry, action, now)

    asyncio.run(act())
    pods = {p.name: p for p in one.rec.pods.of("u1", "ml")}
    assert sorted(pods) == ["w-0", "w-2"]
    assert pods["w-0"].stop_by is not None and pods["w-2"].phase == "Pending"
    assert woken == []  # the pass that sent them decided with them in mind
