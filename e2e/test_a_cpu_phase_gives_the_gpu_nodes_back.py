"""A four-phase job whose last phase is CPU-only, on the real cluster: at the boundary every
GPU node is given back, the CPU phase runs on CPU nodes only (none of them has a GPU), says
so, and is billed at the CPU price with no GPU-hours."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import apply, events, get_job, live_workers, status

GPU_RESOURCES = (lib.NVIDIA_GPU, lib.ASCEND_NPU)
CPU_PRICE = 0.8  # e2e/settings.yaml: cpu.pricePerNodeHour


def _phase(name: str, lo: int, hi: int, gpus: bool, seconds: int) -> dict[str, Any]:
    phase: dict[str, Any] = {
        "name": name,
        "nodes": {"min": lo, "max": hi},
        "template": {"annotations": {"sim.phased.dev/succeed-after": f"{seconds}s"}},
    }
    if gpus:
        phase.update(gpuTypes=["H100"], gpusPerNode=8)
    return phase


def _is_gpu_node(core: Any, name: str) -> bool:
    """Capacity of a GPU resource, or a GPU vendor's labels (as the settings define them)."""
    node = core.read_node(name)
    capacity = node.status.capacity or {}
    labels = node.metadata.labels or {}
    return (
        any(int(capacity.get(r, "0")) > 0 for r in GPU_RESOURCES)
        or "nvidia.com/gpu.product" in labels
        or "accelerator" in labels
    )


def test_the_gpu_nodes_go_back_when_the_last_phase_runs_on_cpu(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    job = {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "ends-on-cpu"},
        "spec": {
            "template": {"image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"]},
            "phases": [
                _phase("preprocess", 2, 2, True, 8),
                _phase("initialize", 3, 3, True, 8),
                _phase("train", 4, 4, True, 10),
                _phase("export", 2, 2, False, 25),
            ],
            "spares": {"count": 1},
        },
    }
    apply(kubectl, namespace, job)
    uid = get_job(kubectl, namespace, "ends-on-cpu")["metadata"]["uid"]

    gpu_held_in_train: set[str] = set()
    export_pools: list[set[str]] = []
    st: dict[str, Any] = {}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        st = status(kubectl, namespace, "ends-on-cpu")
        # The pool as the status has it, written together with its phase: nodes read from the
        # API a moment later may already be the next phase's (or given back at the end).
        pool = st.get("pool") or {}
        held = set(pool.get("active") or []) | set(pool.get("spares") or [])
        if st.get("phase") == "train" and st.get("state") == "Running":
            gpu_held_in_train |= held
        if st.get("phase") == "export" and st.get("state") == "Running":
            export_pools.append(held)
        if st.get("state") in ("Succeeded", "Failed"):
            break
        time.sleep(1)
    assert st.get("state") == "Succeeded", f"{st}\n{operator.tail(60)}"
    assert gpu_held_in_train and all(_is_gpu_node(core, n) for n in gpu_held_in_train)

    # While the CPU phase ran, the job held CPU nodes only: every GPU node had gone back.
    assert export_pools, "the CPU phase was never seen running"
    for pool in export_pools:
        assert pool and not [n for n in pool if _is_gpu_node(core, n)], pool
        assert not set(pool) & gpu_held_in_train
    workers = live_workers(core, namespace, uid)
    export_workers = [p for p in workers if p.metadata.labels["phased.dev/phase"] == "export"]
    assert len(export_workers) == 2
    assert not [p.spec.node_name for p in export_workers if _is_gpu_node(core, p.spec.node_name)]

    said = events(kubectl, namespace, "involvedObject.name=ends-on-cpu,reason=PhaseStarted")
    assert any(e["message"] == "phase export started on 2 CPU nodes" for e in said), [
        e["message"] for e in said
    ]

    # Billed as CPU nodes: no GPU-hours, a cost at the CPU price per node-hour.
    record = next(p for p in st["phases"] if p["name"] == "export")
    assert record["gpuHours"] == 0 and record.get("gpuType") is None
    assert record["cost"] > 0
    # Charged from the end of train to the end of export, on at most 3 nodes (2 active and a
    # spare) with a few seconds of slack: a GPU node billed here would cost 25 times more.
    train = next(p for p in st["phases"] if p["name"] == "train")
    seconds = (_time(record["endTime"]) - _time(train["endTime"])).total_seconds()
    assert record["cost"] <= 3 * (seconds + 10) / 3600 * CPU_PRICE, (record, seconds)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)
