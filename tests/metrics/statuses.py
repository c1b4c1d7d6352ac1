"""Realistic TrainingJob statuses to feed the metrics, and helpers to read an exposition."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from phased.api.v1alpha1 import TrainingJobStatus, parse_status
from phased.metrics import Metrics

T0 = "2025-03-01T00:00:00+00:00"


def at(seconds: int) -> str:
    """An ISO instant ``seconds`` after T0."""
    from datetime import datetime, timedelta

    return (datetime.fromisoformat(T0) + timedelta(seconds=seconds)).isoformat()


def failure(
    ident: int,
    *,
    reason: str = "GPUFault",
    phase: str = "train",
    detected: int = 0,
    cordoned: int | None = 4,
    replaced: int | None = 60,
    resumed: int | None = 300,
) -> dict[str, Any]:
    """A ledger entry; times are seconds after ``detected``'s base, None when not reached."""
    entry: dict[str, Any] = {
        "id": ident,
        "node": f"gpu-node-{ident:05d}",
        "reason": reason,
        "phase": phase,
        "detected": at(detected),
    }
    for key, value in (("cordoned", cordoned), ("replaced", replaced), ("resumed", resumed)):
        if value is not None:
            entry[key] = at(detected + value)
    if replaced is not None:
        entry["replacedBy"] = f"gpu-node-spare-{ident:05d}"
    return entry


def training_status(
    failures: list[dict[str, Any]] | None = None,
    *,
    restarts: int = 0,
    state: str = "Running",
    active: int = 110,
    spares: int = 12,
    quarantined: int = 0,
) -> TrainingJobStatus:
    """A 120-day run in its training phase, after preprocessing and initialization."""
    day = 86400
    return parse_status(
        {
            "state": state,
            "phase": "train",
            "phaseIndex": 2,
            "startTime": T0,
            "restarts": restarts,
            "restartGeneration": restarts,
            "worldSize": active,
            "activeNodes": active,
            "spareNodes": spares,
            "quarantinedNodes": quarantined,
            "utilizationPercent": 92.4,
            "phases": [
                {
                    "name": "preprocess",
                    "state": "Succeeded",
                    "gpuType": "H100",
                    "startTime": T0,
                    "endTime": at(12 * day),
                    "nodes": 35,
                    "gpuHours": 92_160.0,
                    "activeGpuHours": 80_640.0,
                    "spareGpuHours": 11_520.0,
                    "busyGpuHours": 78_000.0,
                    "cost": 230_400.0,
                },
                {
                    "name": "initialize",
                    "state": "Succeeded",
                    "gpuType": "H100",
                    "startTime": at(12 * day),
                    "endTime": at(20 * day),
                    "nodes": 90,
                    "gpuHours": 176_640.0,
                    "activeGpuHours": 158_208.0,
                    "spareGpuHours": 18_432.0,
                    "busyGpuHours": 150_000.0,
                    "cost": 441_600.0,
                    "waitingSeconds": 1800.0,
                },
                {
                    "name": "train",
                    "state": "Running",
                    "gpuType": "H200",
                    "startTime": at(20 * day),
                    "nodes": active,
                    "restarts": restarts,
                    "gpuHours": 200_000.0,
                    "activeGpuHours": 180_000.0,
                    "spareGpuHours": 20_000.0,
                    "busyGpuHours": 170_000.0,
                    "cost": 700_000.0,
                    "waitingSeconds": 600.0,
                    "lastCheckpoint": {
                        "step": 120_000,
                        "time": at(30 * day - 1200),
                        "path": "/checkpoints/llm/train/step-120000",
                        "generation": restarts,
                    },
                },
            ],
            "pool": {
                "active": [f"gpu-node-{i:05d}" for i in range(active)],
                "spares": [f"gpu-node-spare-{i:05d}" for i in range(spares)],
            },
            "failures": failures or [],
            "interruption": {"usedSeconds": 1500.0, "budgetSeconds": 7200.0, "used": "25m"},
            "utilization": {"allocation": 92.4, "active": 96.1, "current": 98.0},
            "accounting": {
                "gpuHours": 468_800.0,
                "cost": 1_372_000.0,
                "currency": "USD",
                "estimatedRemainingCost": 4_100_000.0,
                "accountedAt": at(30 * day),
            },
        }
    )


def exposition(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def samples(registry: CollectorRegistry) -> list[Sample]:
    return [s for f in text_string_to_metric_families(exposition(registry)) for s in f.samples]


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """The one sample called ``name`` whose labels include ``labels``."""
    found = [
        s.value
        for s in samples(registry)
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, f"{len(found)} samples {name}{labels}"
    return found[0]


def fresh() -> tuple[CollectorRegistry, Metrics]:
    registry = CollectorRegistry()
    return registry, Metrics.create(registry)
