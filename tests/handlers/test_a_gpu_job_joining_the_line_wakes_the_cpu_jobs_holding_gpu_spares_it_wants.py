"""A GPU job that joins the line (or asks for more) wakes at once the running CPU phases that
hold GPU nodes of its type as spares (``cpu.allowGpuNodes``): they give back the spares it
wants beyond the free nodes (see ``tests/core/test_a_running_cpu_phase_gives_back_the_gpu_
spares_a_waiting_gpu_job_wants.py``), and nothing else would wake them — the waiting job's
status changed, no node did — so before, they gave them back only at their next resync,
with the GPU job waiting and the GPU-hours paid for CPU insurance meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phased.core import labels
from phased.core.settings import CPUSettings, Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

ALLOWED = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
TEMPLATE = {"image": "registry.example/llm:1", "command": ["python", "train.py"]}
CPU_SPEC = {
    "phases": [{"name": "prep", "nodes": {"min": 1, "max": 1}, "gpuTypes": []}],
    "template": TEMPLATE,
}
GPU_SPEC = {
    "phases": [{"name": "train", "nodes": {"min": 4, "max": 4}, "gpuTypes": ["H100"]}],
    "template": TEMPLATE,
}


def job(uid: str, rv: int, spec: dict[str, Any], state: str, wants: dict[str, int]) -> Any:
    meta = {"name": uid, "namespace": "ml", "uid": uid, "resourceVersion": str(rv)}
    status: dict[str, Any] = {"state": state, "phaseIndex": 0}
    if wants:
        status["waitingFor"] = wants
    return {"metadata": meta, "spec": spec, "status": status}


def gpu_node(name: str, owner: str, role: str, settings: Settings) -> dict[str, Any]:
    node_labels = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        labels.LABEL_JOB_UID: owner,
        labels.LABEL_JOB: owner,
        labels.LABEL_JOB_NAMESPACE: "ml",
        labels.LABEL_ROLE: role,
        labels.LABEL_INSTALLATION: settings.installation,
    }
    return {
        "metadata": {"name": name, "resourceVersion": "1", "labels": node_labels},
        "spec": {"taints": [{"key": labels.TAINT_POOL, "value": owner, "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "capacity": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def looked_at(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, joined: dict[str, Any]
) -> set[str]:
    """The jobs looked at once the watch delivers ``joined`` (the GPU job, running before),
    with ``cpu`` running a CPU phase with an H100 spare and ``gpu-run`` running with one."""

    async def scenario() -> set[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), settings)  # type: ignore[arg-type]
        seen: set[str] = set()

        async def guarded(uid: str) -> bool:
            seen.add(uid)
            return True

        monkeypatch.setattr(rec, "_guarded", guarded)
        rec.nodes.replace_all(
            [gpu_node("g0", "cpu", "spare", settings), gpu_node("g1", "gpu-run", "spare", settings)]
        )
        for raw in (
            job("gpu", 10, GPU_SPEC, "Running", {}),
            job("cpu", 11, CPU_SPEC, "Running", {}),
            job("gpu-run", 12, GPU_SPEC, "Running", {}),
        ):
            rec.jobs[raw["metadata"]["uid"]] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
        rec.job_event("MODIFIED", joined)
        await asyncio.gather(*rec._tasks)
        return seen

    return asyncio.run(scenario())


WAITING = job("gpu", 20, GPU_SPEC, "Waiting", {"H100": 4})


def test_the_cpu_phase_holding_a_gpu_spare_of_its_type_is_looked_at_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = looked_at(monkeypatch, ALLOWED, WAITING)
    assert "cpu" in seen
    assert "gpu-run" not in seen  # a GPU phase's spares are its own: never given back so


def test_nobody_else_is_woken_when_cpu_phases_may_not_hold_gpu_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert looked_at(monkeypatch, Settings(), WAITING) == {"gpu"}


def test_nobody_else_is_woken_when_it_asks_for_nothing_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fewer = job("gpu", 20, GPU_SPEC, "Waiting", {})
    assert looked_at(monkeypatch, ALLOWED, fewer) == {"gpu"}
