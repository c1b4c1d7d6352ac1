"""A waiting job whose ``spec.priority`` is edited changes its place in the line at once,
and wakes the other jobs waiting for capacity: the ones it now falls behind may take the
free nodes they kept for it. Its ``waitingFor`` stays the same (it still needs its
``nodes.min``), so no status change and no node event woke them: before, they noticed only
at the next resync (30 s by default) with free nodes kept idle meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def job(uid: str, rv: int, state: str, waiting_for: dict[str, int] | None, priority: int) -> Any:
    status: dict[str, Any] = {"state": state}
    if waiting_for is not None:
        status["waitingFor"] = waiting_for
    meta = {"name": uid, "namespace": "ml", "uid": uid, "resourceVersion": str(rv)}
    return {"metadata": meta, "spec": {"priority": priority}, "status": status}


def looked_at(monkeypatch: pytest.MonkeyPatch, edited: dict[str, Any]) -> set[str]:
    """The jobs a pass looked at after the watch delivers ``edited`` (job ``ahead``, of
    priority 10, waiting for 8 H100 nodes), with ``behind`` waiting and ``running`` running."""

    async def scenario() -> set[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        seen: set[str] = set()

        async def guarded(uid: str) -> bool:
            seen.add(uid)
            return True

        monkeypatch.setattr(rec, "_guarded", guarded)
        for raw in (
            job("ahead", 10, "Waiting", {"H100": 8}, 10),
            job("behind", 11, "Waiting", {"H100": 2}, 5),
            job("running", 12, "Running", None, 0),
        ):
            rec.jobs[raw["metadata"]["uid"]] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
        rec.job_event("MODIFIED", edited)
        await asyncio.gather(*rec._tasks)
        # The line each job's next pass reads: the edit is in it.
        priorities = {c.uid: c.priority for c in rec._claimants("behind")}
        assert priorities == {"ahead": edited["spec"]["priority"]}
        return seen

    return asyncio.run(scenario())


@pytest.mark.parametrize("priority", [0, 20], ids=["lowered", "raised"])
def test_the_waiting_jobs_are_looked_at_at_once(
    monkeypatch: pytest.MonkeyPatch, priority: int
) -> None:
    seen = looked_at(monkeypatch, job("ahead", 20, "Waiting", {"H100": 8}, priority))
    assert seen == {"ahead", "behind"}  # a running job never waits in line: nothing for it


def test_an_edit_leaving_its_place_as_it_was_wakes_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = looked_at(monkeypatch, job("ahead", 20, "Waiting", {"H100": 8}, 10))
    assert seen == {"ahead"}


def test_a_job_not_in_line_edited_wakes_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> set[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        seen: set[str] = set()

        async def guarded(uid: str) -> bool:
            seen.add(uid)
            return True

        monkeypatch.setattr(rec, "_guarded", guarded)
        for raw in (
            job("behind", 11, "Waiting", {"H100": 2}, 5),
            job("running", 12, "Running", None, 0),
        ):
            rec.jobs[raw["metadata"]["uid"]] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
        rec.job_event("MODIFIED", job("running", 20, "Running", None, 50))
        await asyncio.gather(*rec._tasks)
        return seen

    assert asyncio.run(scenario()) == {"running"}
