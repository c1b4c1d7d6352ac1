"""A pass's events are posted in the background, as Kubernetes' own controllers record
theirs: the pass ends once its status is written, so the job's next pass (after a failure,
the one that creates the new gang) waits for the status alone. Events are best effort: the
ones recorded are all sent, a status write that fails does not hold them back, too many on
their way at once are dropped and counted, and shutdown waits for those on their way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from phased import reconcile as module
from phased.api.v1alpha1 import TrainingJobStatus
from phased.core.model import EmitEvent, Plan
from phased.kube.client import KubeError
from phased.metrics import Metrics
from tests.handlers.test_a_pass_plans_only_the_looks_it_needs_and_writes_only_what_happened import (
    RAW,
    _reconciler,
    _stub,
)

SAID = ("NodeFailed", "NodeQuarantined", "SparePromoted")
PLAN = Plan(actions=tuple(EmitEvent("Normal", r, "") for r in SAID), status=TrainingJobStatus())


class _Api:
    """The status write and the event posts, each held until released."""

    def __init__(self, status_error: KubeError | None = None) -> None:
        self.timeline: list[str] = []
        self.posts_back = asyncio.Event()
        self.status_error = status_error

    async def got(self, namespace: str, name: str) -> dict[str, Any]:
        return RAW

    async def no_pods(self, *_: Any) -> list[Any]:
        return []

    async def nothing(self, *_: Any) -> None:
        return None

    async def write(self, *_: Any) -> None:
        self.timeline.append("write status")
        await asyncio.sleep(0)
        if self.status_error is not None:
            raise self.status_error
        self.timeline.append("status written")

    async def post(self, job: Any, type_: str, reason: str, *_: Any) -> None:
        self.timeline.append(f"post {reason}")
        await self.posts_back.wait()
        self.timeline.append(f"{reason} posted")


def _pass(monkeypatch: pytest.MonkeyPatch, api: _Api) -> Any:
    rec = _reconciler()
    _stub(monkeypatch, rec, PLAN, api.got, api.no_pods, api.nothing, api.write)
    monkeypatch.setattr(rec.event_verbs, "post", api.post)
    return rec


def test_the_pass_ends_with_its_status_written_while_its_events_are_on_their_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        api = _Api()
        rec = _pass(monkeypatch, api)
        # Were the pass to wait for its events, it would wait here for good: they are
        # answered only after it ended.
        await asyncio.wait_for(rec.reconcile("u1"), 5)
        await asyncio.sleep(0)  # the posts begin
        at_the_end = list(api.timeline)
        api.posts_back.set()
        await rec.events_posted()
        return at_the_end, api.timeline

    at_the_end, timeline = asyncio.run(scenario())
    assert "status written" in at_the_end
    assert not [t for t in at_the_end if t.endswith(" posted")]  # none waited for
    assert sorted(t for t in timeline if t.endswith(" posted")) == sorted(
        f"{r} posted" for r in SAID
    )


def test_a_status_write_that_fails_fails_the_pass_and_its_events_still_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> list[str]:
        api = _Api(
            status_error=KubeError(
                500, "InternalError", "etcd timeout", "patch", "trainingjobs/status"
            )
        )
        api.posts_back.set()
        rec = _pass(monkeypatch, api)
        with pytest.raises(KubeError):
            await rec.reconcile("u1")
        await rec.events_posted()
        return api.timeline

    timeline = asyncio.run(scenario())
    assert "status written" not in timeline
    assert sorted(t for t in timeline if t.endswith(" posted")) == sorted(
        f"{r} posted" for r in SAID
    )


def test_events_beyond_those_the_api_has_not_answered_yet_are_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(module, "_EVENTS_IN_FLIGHT", 2)

    async def scenario() -> tuple[list[str], float | None, list[str]]:
        api = _Api()
        rec = _pass(monkeypatch, api)
        registry = CollectorRegistry()
        rec.metrics = Metrics.create(registry)
        await rec.reconcile("u1")
        await asyncio.sleep(0)
        sent = [t for t in api.timeline if t.startswith("post ")]
        api.posts_back.set()
        await rec.events_posted()
        dropped = registry.get_sample_value("phased_events_dropped_total")
        monkeypatch.setattr(module, "_EVENTS_IN_FLIGHT", len(SAID))
        await rec.reconcile("u1")  # room for all: the next pass's events all go
        await rec.events_posted()
        return sent, dropped, api.timeline

    sent, dropped, timeline = asyncio.run(scenario())
    assert sent == ["post NodeFailed", "post NodeQuarantined"]
    assert dropped == 1.0
    assert timeline.count("post SparePromoted") == 1  # the second pass's


def test_shutdown_waits_for_the_events_on_their_way(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> list[str]:
        api = _Api()
        rec = _pass(monkeypatch, api)
        monkeypatch.setattr(rec.node_watch, "stop", api.nothing)
        monkeypatch.setattr(rec.pod_watch, "stop", api.nothing)
        await rec.reconcile("u1")
        draining = asyncio.ensure_future(rec.drain())
        await asyncio.sleep(0.01)
        assert not draining.done()
        api.posts_back.set()
        await draining
        return api.timeline

    timeline = asyncio.run(scenario())
    assert sum(t.endswith(" posted") for t in timeline) == len(SAID)
