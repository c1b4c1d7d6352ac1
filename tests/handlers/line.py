"""The waiting line as the reconciler holds it, for the handler tests of what wakes it: jobs
as the watch delivers them, and the jobs looked at after one more event."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def job(
    uid: str, rv: int, state: str, waiting_for: dict[str, int] | None, priority: int | None = None
) -> dict[str, Any]:
    """A TrainingJob named and identified ``uid``, at resourceVersion ``rv``."""
    status: dict[str, Any] = {"state": state}
    if waiting_for is not None:
        status["waitingFor"] = waiting_for
    meta = {"name": uid, "namespace": "ml", "uid": uid, "resourceVersion": str(rv)}
    spec: dict[str, Any] = {} if priority is None else {"priority": priority}
    return {"metadata": meta, "spec": spec, "status": status}


def looked_at(
    monkeypatch: pytest.MonkeyPatch,
    known: Sequence[dict[str, Any]],
    event: str,
    raw: dict[str, Any],
    then: Callable[[Reconciler], None] | None = None,
) -> set[str]:
    """The jobs a pass looked at after the watch delivers ``event`` of ``raw``, the
    reconciler knowing the jobs ``known`` before it; ``then`` reads the reconciler after."""

    async def scenario() -> set[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        seen: set[str] = set()

        async def guarded(uid: str) -> bool:
            seen.add(uid)
            return True

        monkeypatch.setattr(rec, "_guarded", guarded)
        for known_raw in known:
            entry = JobEntry(ref=job_ref_from_raw(known_raw), raw=known_raw)
            rec.jobs[known_raw["metadata"]["uid"]] = entry
        rec.job_event(event, raw)
        await asyncio.gather(*rec._tasks)
        if then is not None:
            then(rec)
        return seen

    return asyncio.run(scenario())
