"""A job being deleted (its ``deletionTimestamp`` set: deleted by a person, or with its
namespace) leaves the line at once, whatever its status still says: it will claim nothing.
Its last pass writes no status (the object is about to go), so ``waitingFor`` stays as it
was for as long as the object lingers — behind another finalizer, a foreground deletion —
and before, the jobs behind it kept free nodes idle for it all that while, and were not even
woken when the deletion began."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def job(uid: str, rv: int, state: str, waiting_for: dict[str, int] | None, **meta: Any) -> Any:
    status: dict[str, Any] = {"state": state}
    if waiting_for is not None:
        status["waitingFor"] = waiting_for
    metadata = {"name": uid, "namespace": "ml", "uid": uid, "resourceVersion": str(rv), **meta}
    return {"metadata": metadata, "spec": {}, "status": status}


DELETING = job(
    "ahead",
    20,
    "Waiting",
    {"H100": 8},
    deletionTimestamp="2026-03-01T12:00:00Z",
    finalizers=["example.com/keep"],
)


def after(monkeypatch: pytest.MonkeyPatch, event: str, ahead_now: dict[str, Any]) -> Any:
    """The jobs looked at once the watch delivers ``event`` of ``ahead`` (waiting for 8
    H100 nodes, older than ``behind``, which waits too), and the line ``behind`` reads."""

    async def scenario() -> tuple[set[str], set[str]]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        seen: set[str] = set()

        async def guarded(uid: str) -> bool:
            seen.add(uid)
            return True

        monkeypatch.setattr(rec, "_guarded", guarded)
        for raw in (
            job("ahead", 10, "Waiting", {"H100": 8}, creationTimestamp="2026-03-01T10:00:00Z"),
            job("behind", 11, "Waiting", {"H100": 2}, creationTimestamp="2026-03-01T11:00:00Z"),
            job("running", 12, "Running", None),
        ):
            rec.jobs[raw["metadata"]["uid"]] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
        rec.job_event(event, ahead_now)
        await asyncio.gather(*rec._tasks)
        return seen, {c.uid for c in rec._claimants("behind")}

    return asyncio.run(scenario())


def test_the_line_the_jobs_behind_read_leaves_it_out(monkeypatch: pytest.MonkeyPatch) -> None:
    _, line = after(monkeypatch, "MODIFIED", DELETING)
    assert line == set()


def test_the_jobs_behind_are_woken_when_its_deletion_begins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen, _ = after(monkeypatch, "MODIFIED", DELETING)
    assert "behind" in seen
    assert "running" not in seen


def test_a_job_still_waiting_stays_in_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    still = job("ahead", 20, "Waiting", {"H100": 8}, creationTimestamp="2026-03-01T10:00:00Z")
    seen, line = after(monkeypatch, "MODIFIED", still)
    assert line == {"ahead"}
    assert seen == {"ahead"}
