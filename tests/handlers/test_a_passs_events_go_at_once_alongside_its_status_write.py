"""A pass's events are posted at once, alongside its status write, once its actions are done.

They used to be posted one after another before the status write: a swap's four events
(the failure, the quarantine, the promotion, the restart) held the end of the pass by four
round trips, and the job's next pass — the one that creates the new generation once the
survivors are gone — waited for it. Events are best effort and none needs another's answer.
Every request is still awaited before the pass ends, an error included: none is left in
flight."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phased import reconcile as module
from phased.api.v1alpha1 import TrainingJobStatus
from phased.core.model import DeletePod, EmitEvent, Plan
from phased.kube.client import KubeError
from tests.core.builders import T0
from tests.handlers.test_a_worker_the_namespace_refuses_is_said_on_the_job_and_tried_again import (
    _Pass,
    _ready_to_create,
)

EVENTS = tuple(
    EmitEvent("Normal", reason, f"{reason} message")
    for reason in ("NodeFailed", "NodeQuarantined", "SparePromoted", "WorkersRestarted")
)


class _Wire:
    """Requests recorded as they are sent, with how many were out at once."""

    def __init__(self) -> None:
        self.out = 0
        self.most = 0
        self.sent: list[str] = []
        self.status_error: KubeError | None = None

    async def _request(self, what: str) -> None:
        self.out += 1
        self.most = max(self.most, self.out)
        self.sent.append(what)
        try:
            for _ in range(3):  # stay out long enough for the others to be sent
                await asyncio.sleep(0)
        finally:
            self.out -= 1

    async def delete(self, namespace: str, name: str, **_: Any) -> None:
        await self._request(f"delete {name}")

    async def post(self, job: Any, type_: str, reason: str, message: str, now: Any) -> None:
        await self._request(f"event {reason}")

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self._request("status")
        if self.status_error is not None:
            raise self.status_error


def _pass(monkeypatch: pytest.MonkeyPatch, wire: _Wire) -> bool:
    one = _Pass(monkeypatch, _ready_to_create())
    plan = Plan(
        actions=(DeletePod("llm-train-g0-r1"), DeletePod("llm-train-g0-r2"), *EVENTS),
        status=TrainingJobStatus(message="restarting the gang"),
    )
    monkeypatch.setattr(module, "decide", lambda snap, settings, now: plan)
    monkeypatch.setattr(one.rec, "clock", lambda: T0)
    monkeypatch.setattr(one.rec.pod_verbs, "delete", wire.delete)
    monkeypatch.setattr(one.rec.event_verbs, "post", wire.post)
    monkeypatch.setattr(one.rec.job_verbs, "patch_status", wire.patch_status)
    return one.run()


def test_the_events_and_the_status_write_go_at_once_after_the_actions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wire = _Wire()
    assert _pass(monkeypatch, wire) is True
    deletes = ["delete llm-train-g0-r1", "delete llm-train-g0-r2"]
    assert wire.sent[:2] == deletes  # the actions first
    assert sorted(wire.sent[2:]) == sorted([f"event {e.reason}" for e in EVENTS] + ["status"])
    # Two deletions together, then four events and the status write together: one round trip
    # after the last action, not five.
    assert wire.most == 5
    assert wire.out == 0


def test_a_failed_status_write_fails_the_pass_once_every_event_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wire = _Wire()
    wire.status_error = KubeError(500, "InternalError", "etcd timeout", "patch", "trainingjobs")
    assert _pass(monkeypatch, wire) is False
    assert sum(s.startswith("event ") for s in wire.sent) == len(EVENTS)
    assert wire.out == 0
