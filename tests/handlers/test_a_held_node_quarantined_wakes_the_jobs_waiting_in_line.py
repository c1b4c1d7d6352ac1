"""A node a job holds going into quarantine wakes the jobs in line at once: the nodes a phase
could ever be given are fewer (quarantined ones do not count), so a waiting job whose
``nodes.min`` can no longer be met leaves the line for that type, and the jobs behind it take
the free nodes they kept for it. Before, only the holder was woken: the waiting job kept its
need published, and the jobs behind kept nodes for it, until its next resync. A held node
going NotReady wakes only its holder (it comes and goes, and counts still)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.handlers.test_a_gpu_job_joining_the_line_wakes_the_cpu_jobs_holding_gpu_spares_it_wants import (  # noqa: E501
    ALLOWED,
    GPU_SPEC,
    gpu_node,
    job,
)
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def looked_at(monkeypatch: pytest.MonkeyPatch, changed: dict[str, Any]) -> set[str]:
    """The jobs looked at once the watch delivers ``changed`` (g1, held active by
    ``gpu-run``), with ``gpu`` waiting in line for four H100 nodes."""

    async def scenario() -> set[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), ALLOWED)  # type: ignore[arg-type]
        seen: set[str] = set()

        async def guarded(uid: str) -> bool:
            seen.add(uid)
            return True

        monkeypatch.setattr(rec, "_guarded", guarded)
        rec.nodes.replace_all([gpu_node("g1", "gpu-run", "active", ALLOWED)])
        for raw in (
            job("gpu", 10, GPU_SPEC, "Waiting", {"H100": 4}),
            job("gpu-run", 12, GPU_SPEC, "Running", {}),
        ):
            rec.jobs[raw["metadata"]["uid"]] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
        rec.node_event("MODIFIED", changed)
        await asyncio.gather(*rec._tasks)
        return seen

    return asyncio.run(scenario())


def test_a_held_node_quarantined_wakes_the_waiting_job(monkeypatch: pytest.MonkeyPatch) -> None:
    quarantined = gpu_node("g1", "gpu-run", "quarantined", ALLOWED)
    quarantined["metadata"]["resourceVersion"] = "2"
    assert looked_at(monkeypatch, quarantined) == {"gpu", "gpu-run"}


def test_a_held_node_going_not_ready_wakes_only_its_holder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dark = gpu_node("g1", "gpu-run", "active", ALLOWED)
    dark["metadata"]["resourceVersion"] = "2"
    dark["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert looked_at(monkeypatch, dark) == {"gpu-run"}
