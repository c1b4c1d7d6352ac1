"""The watch lags the responses to the operator's own writes: an event for a version older
than the one held must not replace it (the next status write is a diff against the view held,
and would leave out a field set back to its older value), yet the job is decided again, since
the pass that wrote the newer version may not have seen the older change."""

from __future__ import annotations

import asyncio
from typing import Any

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.kube.convert import job_ref_from_raw
from phased.reconcile import JobEntry, Reconciler
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

UID = "uid-llm"


def raw_job(rv: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "llm", "namespace": "ml", "uid": UID, "resourceVersion": rv},
        "spec": {},
        "status": status or {},
    }


def _after(held: dict[str, Any], event: dict[str, Any], own: str = "") -> tuple[str, bool]:
    """The status' startTime held after ``event`` arrives, and whether a pass was asked for."""

    async def scenario() -> tuple[str, bool]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        rec._run = _no_pass  # type: ignore[method-assign]
        entry = JobEntry(ref=job_ref_from_raw(held), raw=held, own_resource_version=own)
        rec.jobs[UID] = entry
        rec.job_event("MODIFIED", event)
        asked = UID in rec._queue.pending
        await asyncio.sleep(0)
        return str((rec.jobs[UID].raw.get("status") or {}).get("startTime")), asked

    return asyncio.run(scenario())


async def _no_pass(uid: str, urgent: bool = True) -> None:
    return None


WRITTEN = raw_job("100", {"startTime": "2026-12-01T08:00:00Z"})


def test_an_older_event_keeps_the_newer_view_and_asks_for_a_pass() -> None:
    assert _after(WRITTEN, raw_job("99"), own="100") == ("2026-12-01T08:00:00Z", True)


def test_a_newer_event_replaces_the_view() -> None:
    newer = raw_job("101", {"startTime": "2026-12-01T09:00:00Z"})
    assert _after(WRITTEN, newer, own="100") == ("2026-12-01T09:00:00Z", True)


def test_the_echo_of_our_own_write_asks_for_nothing() -> None:
    assert _after(raw_job("99"), WRITTEN, own="100") == ("2026-12-01T08:00:00Z", False)


def test_versions_that_are_not_numbers_are_never_taken_as_older() -> None:
    held = raw_job("b", {"startTime": "2026-12-01T08:00:00Z"})
    assert _after(held, raw_job("a"))[0] == "None"
