"""The watch event of the operator's own status write can come back before the write's
answer. Taken then for someone else's change, it woke the job: its pass ran once more for
nothing (a GET of the job, a LIST of its pods, often a status write of its own), which at
idle is a large share of all passes. Events that come while a status write is on its way are
judged by the version the answer names: that version is ours and wakes nothing; any other
(a person's edit landing meanwhile) is a change, and the job is looked at again."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

from phased.api.v1alpha1 import JobState, TrainingJobStatus
from phased.core.model import Plan
from phased.core.settings import Settings
from phased.kube.client import KubeClient, KubeError
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def _raw(rv: str, generation: int = 1, state: str | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {
            "name": "llm",
            "namespace": "ml",
            "uid": "u1",
            "resourceVersion": rv,
            "generation": generation,
        },
        "spec": {},
    }
    if state is not None:
        raw["status"] = {"state": state}
    return raw


def _write(meanwhile: list[dict[str, Any]], answer: str | None) -> list[str]:
    """One status write during which the watch brings ``meanwhile``; its answer names
    version ``answer`` (``None``: the write fails). The jobs woken."""

    async def scenario() -> list[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        entry = JobEntry(ref=job_ref_from_raw(_raw("5")), raw=_raw("5"))
        rec.jobs["u1"] = entry
        woken: list[str] = []
        rec.trigger = lambda uid, delay=0.0, **_: woken.append(uid)  # type: ignore[method-assign]

        async def patch_status(namespace: str, name: str, patch: dict[str, Any]) -> Any:
            for raw in meanwhile:
                rec.job_event("MODIFIED", raw)
            if answer is None:
                raise KubeError(
                    503,
                    "ServiceUnavailable",
                    "the API server went away",
                    "PATCH",
                    "trainingjobs/status",
                )
            return _raw(answer, state="Running")

        rec.job_verbs.patch_status = patch_status  # type: ignore[method-assign]
        snapshot = SimpleNamespace(status=TrainingJobStatus(), unreadable_status=())
        plan = Plan(actions=(), status=TrainingJobStatus(state=JobState.RUNNING))
        with contextlib.suppress(KubeError):
            await rec._write_status(entry, snapshot, plan)  # type: ignore[arg-type]
        assert not entry.writing_status and entry.unsettled == []
        return woken

    return asyncio.run(scenario())


def test_our_write_come_back_before_its_answer_wakes_nothing() -> None:
    assert _write([_raw("6", state="Running")], answer="6") == []


def test_an_edit_landing_while_our_write_was_on_its_way_wakes_the_job() -> None:
    edit = _raw("6", generation=2)
    ours = _raw("7", generation=2, state="Running")
    assert _write([edit, ours], answer="7") == ["u1"]


def test_events_during_a_write_that_failed_wake_the_job() -> None:
    assert _write([_raw("6", generation=2)], answer=None) == ["u1"]


def test_events_with_no_write_on_its_way_are_judged_as_before() -> None:
    async def scenario() -> list[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        entry = JobEntry(ref=job_ref_from_raw(_raw("5")), raw=_raw("5"))
        entry.own_resource_version = "5"
        rec.jobs["u1"] = entry
        woken: list[str] = []
        rec.trigger = lambda uid, delay=0.0, **_: woken.append(uid)  # type: ignore[method-assign]
        rec.job_event("MODIFIED", _raw("6", generation=2))  # a person's edit: no write on its way
        rec.job_event("MODIFIED", _raw("5"))  # an older version than the one held: look again
        return woken

    assert asyncio.run(scenario()) == ["u1", "u1"]
