"""One pass of the reconciler, its kube layer stubbed: what it plans and what it writes.

A pass whose decision asks for no later look plans none: the periodic resync looks at every
job once an interval, and a timer of the pass's own as well looked at an idle job twice (a
GET of the job and a LIST of its pods each time: measured at 4 passes/s for 50 idle jobs,
twice what the resync alone makes). A decision that asks to look again (a grace running
out) still gets its timer, at the time it asked. A pass whose claim was refused writes no
status (it would list a node the job did not get)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from phased import reconcile as module
from phased.api.v1alpha1 import NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.model import ClaimNode, EmitEvent, NodeSet, Plan
from phased.core.settings import Settings
from phased.kube.client import KubeClient, KubeError
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.core.builders import JOB, node, owned
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

RAW = {
    "apiVersion": "phased.dev/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"name": "llm", "namespace": "ml", "uid": "u1", "resourceVersion": "5"},
    "spec": {},
}


def _stub(
    monkeypatch: pytest.MonkeyPatch,
    rec: Reconciler,
    plan: Plan,
    got: Callable[..., Awaitable[Any]],
    listed: Callable[..., Awaitable[list[Any]]],
    act: Callable[..., Awaitable[None]],
    write: Callable[..., Awaitable[None]],
) -> None:
    """The pass's kube side stubbed: the job's GET, its pods' LIST, acting, the status write;
    observing stands still and decide returns ``plan``."""

    async def finalized(raw: dict[str, Any], present: bool) -> bool:
        return True

    async def nothing(*_: Any) -> Any:
        return None

    monkeypatch.setattr(rec.job_verbs, "get", got)
    monkeypatch.setattr(rec.pod_verbs, "select", listed)
    monkeypatch.setattr(rec.job_verbs, "set_finalizer", finalized)
    monkeypatch.setattr(rec, "_observe", nothing)
    monkeypatch.setattr(rec, "_act", act)
    monkeypatch.setattr(rec, "_write_status", write)
    monkeypatch.setattr(rec, "_observe_metrics", lambda *_: None)
    monkeypatch.setattr(module, "decide", lambda *_: plan)


def _reconciler() -> Reconciler:
    rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
    rec.jobs["u1"] = JobEntry(ref=job_ref_from_raw(RAW), raw=RAW)
    return rec


def _one_pass(
    monkeypatch: pytest.MonkeyPatch,
    requeue_after: float | None,
    lose_a_claim: bool = False,
    written: list[Any] | None = None,
    posted: list[str] | None = None,
) -> JobEntry:
    """One reconcile of a job whose decision asks ``requeue_after``; its actions do nothing
    or (``lose_a_claim``) lose a claim; status writes are appended to ``written``."""

    async def scenario() -> JobEntry:
        rec = _reconciler()

        async def got(namespace: str, name: str) -> dict[str, Any]:
            return RAW

        async def no_pods(*_: Any) -> list[Any]:
            return []

        async def act(entry: JobEntry, *_: Any) -> None:
            if lose_a_claim:
                rec._lost_claim(entry, "h1", None)

        async def write(*args: Any) -> None:
            if written is not None:
                written.append(args)

        async def post(job: Any, type_: str, reason: str, *_: Any) -> None:
            if posted is not None:
                posted.append(reason)

        said = (EmitEvent("Normal", "SparePromoted", "s0 promoted"),)
        plan = Plan(actions=said, status=TrainingJobStatus(), requeue_after=requeue_after)
        _stub(monkeypatch, rec, plan, got, no_pods, act, write)
        monkeypatch.setattr(rec.event_verbs, "post", post)
        await rec.reconcile("u1")
        return rec.jobs["u1"]

    return asyncio.run(scenario())


def test_a_pass_that_asks_for_no_later_look_plans_none(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[Any] = []
    posted: list[str] = []
    entry = _one_pass(monkeypatch, None, written=written, posted=posted)
    assert not entry.look_planned(time.monotonic())
    assert len(written) == 1
    assert posted == ["SparePromoted"]


def test_a_pass_that_asks_to_look_again_gets_its_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    start = time.monotonic()
    entry = _one_pass(monkeypatch, 7.0)
    assert entry.timer is not None
    assert 6.5 < entry.timer_due - start <= 7.5


def test_a_pass_whose_claim_was_refused_writes_no_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's status would list a node the job did not get: it is not written, and the
    refusal has planned the next look."""
    written: list[Any] = []
    posted: list[str] = []
    entry = _one_pass(monkeypatch, None, lose_a_claim=True, written=written, posted=posted)
    assert written == []
    assert posted == []  # what still holds is said by the pass that decides again
    assert entry.timer is not None  # the lost claim's backoff


def _reads(monkeypatch: pytest.MonkeyPatch, job: dict[str, Any] | None) -> list[str]:
    """One reconcile whose job GET and pod LIST each take a while; the order in which they
    began and ended."""
    timeline: list[str] = []

    async def scenario() -> None:
        rec = _reconciler()

        async def got(namespace: str, name: str) -> dict[str, Any] | None:
            timeline.append("get job")
            await asyncio.sleep(0.05)
            timeline.append("job got")
            return job

        async def listed(namespace: str, selector: str) -> list[Any]:
            assert selector == "phased.dev/job-uid=u1"
            timeline.append("list pods")
            await asyncio.sleep(0.1)
            timeline.append("pods listed")
            return []

        async def on_node(name: str) -> list[Any]:
            timeline.append(f"list {name}")
            await asyncio.sleep(0.1)
            timeline.append(f"{name} listed")
            return []

        async def nothing(*_: Any) -> None:
            return None

        # Two nodes of the job being cleared, one of another job's, one of the job not.
        ours = replace(JOB, uid="u1")
        clearing = {labels.ANNOTATION_CLEARING: "2026-03-01T12:00:00Z"}
        held = [
            replace(owned(node("c0"), NodeRole.ACTIVE, ours), annotations=clearing),
            replace(owned(node("c1"), NodeRole.SPARE, ours), annotations=clearing),
            replace(owned(node("x0"), NodeRole.ACTIVE), annotations=clearing),
            owned(node("a0"), NodeRole.ACTIVE, ours),
        ]
        monkeypatch.setattr(rec.nodes, "snapshot", lambda: NodeSet.of(held))
        monkeypatch.setattr(rec.pod_verbs, "on_node", on_node)
        plan = Plan(actions=(), status=TrainingJobStatus())
        _stub(monkeypatch, rec, plan, got, listed, nothing, nothing)
        await rec.reconcile("u1")
        await asyncio.sleep(0.2)  # a listing left behind would end here

    asyncio.run(scenario())
    return timeline


def test_a_pass_reads_its_job_its_pods_and_its_cleared_nodes_pods_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeline = _reads(monkeypatch, RAW)
    asked = {"get job", "list pods", "list c0", "list c1"}
    assert set(timeline[:4]) == asked  # all asked before any answered
    assert set(timeline[4:]) == {"job got", "pods listed", "c0 listed", "c1 listed"}


def test_a_pass_whose_job_is_gone_leaves_no_listing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeline = _reads(monkeypatch, None)
    assert "job got" in timeline
    assert "pods listed" not in timeline  # cancelled when the job was found gone
    assert "c0 listed" not in timeline


def test_the_nodes_a_plan_would_claim_are_looked_at_at_once_and_an_error_waits_for_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pool formed of many free nodes looks at each before claiming it: the lists go
    together (at most 16 in flight), and one that fails is raised once every other is
    back, none left in flight."""
    timeline: list[str] = []
    most = [0]

    async def scenario(broken: str | None) -> dict[str, Any]:
        rec = _reconciler()
        flying = [0]

        async def on_node(name: str) -> list[Any]:
            flying[0] += 1
            most[0] = max(most[0], flying[0])
            timeline.append(f"list {name}")
            await asyncio.sleep(0.01)
            timeline.append(f"{name} listed")
            flying[0] -= 1
            if name == broken:
                raise KubeError(500, "InternalError", "etcd timeout", "list", "pods")
            return []

        monkeypatch.setattr(rec.pod_verbs, "on_node", on_node)
        claims = tuple(ClaimNode(f"f{i:02d}", "1", NodeRole.ACTIVE) for i in range(40))
        return await rec._look_at_claims(Plan(actions=claims, status=TrainingJobStatus()))

    assert asyncio.run(scenario(None)) == {}  # nothing runs there: none is busy
    assert set(timeline[:16]) == {f"list f{i:02d}" for i in range(16)}
    assert most[0] == 16
    timeline.clear()
    with pytest.raises(KubeError):
        asyncio.run(scenario("f03"))
    assert len(timeline) == 80  # every list came back before the error was raised
