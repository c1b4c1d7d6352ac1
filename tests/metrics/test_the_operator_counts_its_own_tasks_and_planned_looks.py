"""A long run must not leak: every resync sets ``phased_operator_tasks`` (asyncio tasks alive)
and ``phased_operator_timers`` (planned looks still to come; a fired or cancelled one is
gone), so a soak can watch both stay flat."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.kube.convert import job_ref_from_raw
from phased.metrics import Metrics
from phased.reconcile import JobEntry, Reconciler
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def _job(uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": uid, "namespace": "ml", "uid": uid, "resourceVersion": "1"},
        "spec": {},
    }


def _gauges(registry: CollectorRegistry) -> tuple[float | None, float | None]:
    return (
        registry.get_sample_value("phased_operator_tasks"),
        registry.get_sample_value("phased_operator_timers"),
    )


async def _no_pass(uid: str) -> None:
    return None


def test_tasks_and_pending_timers_are_counted_and_fired_ones_are_not() -> None:
    async def scenario() -> list[tuple[float | None, float | None]]:
        registry = CollectorRegistry()
        rec = Reconciler(  # type: ignore[arg-type]
            KubeClient(FakeApi([]), retries=0), Settings(), Metrics.create(registry)
        )
        rec._run = _no_pass  # type: ignore[method-assign]
        for uid in ("a", "b", "c"):
            rec.jobs[uid] = JobEntry(ref=job_ref_from_raw(_job(uid)), raw=_job(uid))
        rec._schedule("a", 3600)
        rec._schedule("b", 3600)
        rec._schedule("c", 0.01)
        extra = [asyncio.create_task(asyncio.sleep(3600)) for _ in range(4)]
        seen = []
        rec.survey()
        seen.append(_gauges(registry))
        await asyncio.sleep(0.05)  # c's timer fires: its pass runs and ends
        rec.jobs["b"].timer.cancel()  # type: ignore[union-attr]
        for task in extra:
            task.cancel()
        await asyncio.gather(*extra, return_exceptions=True)
        await asyncio.gather(*list(rec._tasks), return_exceptions=True)
        rec.survey()
        seen.append(_gauges(registry))
        return seen

    first, second = asyncio.run(scenario())
    # The scenario's own task plus the four sleepers; a and b and c all planned.
    assert first == (5.0, 3.0)
    # Only a's look is still to come; the sleepers and c's finished pass are gone.
    assert second == (1.0, 1.0)
