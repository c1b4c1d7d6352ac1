"""A TrainingJob as the API returns it, mid-run and after one node failure, and its nodes."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

NOW = datetime(2026, 3, 1, 2, 0, 0, tzinfo=UTC)

FAILURE = {
    "id": 1,
    "node": "h100-003",
    "reason": "NodeNotReady",
    "message": "node h100-003 NotReady (KubeletNotReady) for 30s",
    "phase": "train",
    "detected": "2026-03-01T01:10:00Z",
    "cordoned": "2026-03-01T01:10:00.250000Z",
    "replacedBy": "h100-010",
    "replaced": "2026-03-01T01:10:00.600000Z",
    "resumed": "2026-03-01T01:10:04.100000Z",
    "interruptionSeconds": 4.1,
}

JOB: dict[str, Any] = {
    "apiVersion": "phased.dev/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"name": "llm", "namespace": "ml", "uid": "u-1"},
    "spec": {
        "spares": {"count": 2},
        "checkpoint": {"interval": "30m", "path": "/ckpt/llm"},
        "phases": [
            {"name": "preprocess", "nodes": {"min": 2, "max": 3}, "gpuTypes": []},
            {"name": "train", "nodes": {"min": 8, "max": 10}, "gpuTypes": ["H100"]},
            {"name": "validate", "nodes": {"min": 4, "max": 6}, "gpuTypes": ["H100"]},
        ],
    },
    "status": {
        "state": "Running",
        "phase": "train",
        "phaseIndex": 1,
        "startTime": "2026-03-01T00:00:00Z",
        "restarts": 1,
        "restartGeneration": 1,
        "worldSize": 10,
        "phases": [
            {
                "name": "preprocess",
                "state": "Succeeded",
                "startTime": "2026-03-01T00:00:00Z",
                "endTime": "2026-03-01T00:30:00Z",
                "nodes": 3,
                "maxNodesSeen": 3,
                "gpuHours": 0.0,
                "cost": 1.2,
            },
            {
                "name": "train",
                "state": "Running",
                "gpuType": "H100",
                "startTime": "2026-03-01T00:30:00Z",
                "nodes": 10,
                "maxNodesSeen": 10,
                "restarts": 1,
                "gpuHours": 120.0,
                "activeGpuHours": 100.0,
                "spareGpuHours": 20.0,
                "busyGpuHours": 99.0,
                "cost": 300.0,
            },
        ],
        "pool": {
            "active": [f"h100-{i:03d}" for i in (0, 1, 2, 4, 5, 6, 7, 8, 9, 10)],
            "spares": ["h100-011"],
            "quarantined": ["h100-003"],
        },
        "failures": [FAILURE],
        "interruption": {"usedSeconds": 4.1, "budgetSeconds": 7200, "used": "4s"},
        "utilization": {"allocation": 82.5, "active": 99.0, "current": 90.9},
        "accounting": {
            "gpuHours": 120.0,
            "busyGpuHours": 99.0,
            "cost": 301.2,
            "currency": "USD",
            "estimatedRemainingCost": 4500.0,
            "accountedAt": "2026-03-01T01:59:50Z",
        },
        "conditions": [
            {
                "type": "SparesExhausted",
                "status": "True",
                "reason": "NoSpare",
                "message": "1 of 2 spares held: no free H100 node",
                "lastTransitionTime": "2026-03-01T01:10:00Z",
            },
            {"type": "MassFailure", "status": "False", "reason": "BelowLimit"},
        ],
    },
}


def job(**status: Any) -> dict[str, Any]:
    """A copy of JOB with top-level status fields replaced."""
    copied = copy.deepcopy(JOB)
    copied["status"].update(status)
    return copied


def event(reason: str, message: str, at: str, type_: str = "Normal", uid: str = "u-1") -> Any:
    return {
        "reason": reason,
        "message": message,
        "type": type_,
        "count": 1,
        "lastTimestamp": at,
        "involvedObject": {"kind": "TrainingJob", "name": "llm", "uid": uid},
    }


def node(name: str, role: str, *, ready: str = "True", note: dict[str, Any] | None = None) -> Any:
    annotations = {"phased.dev/claimed-at": "2026-03-01T00:29:58Z"}
    if note is not None:
        annotations["phased.dev/quarantine"] = json.dumps(note)
    return {
        "metadata": {
            "name": name,
            "labels": {
                "phased.dev/job-uid": "u-1",
                "phased.dev/job": "llm",
                "phased.dev/job-namespace": "ml",
                "phased.dev/role": role,
            },
            "annotations": annotations,
        },
        "spec": {"unschedulable": role == "quarantined"},
        "status": {
            "allocatable": {"cpu": "96", "nvidia.com/gpu": "8", "hugepages-2Mi": "0"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }
