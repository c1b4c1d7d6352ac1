"""A waiting job whose spec is edited so that the phase it waits to start has another shape —
its ``gpusPerNode``, its workers' tolerations, its ``gpuFaultConditions`` — wakes the other
jobs waiting for capacity at once: the line keeps for a job ahead only the free nodes it
could take, read from that shape, so the jobs behind it may now take nodes they kept for it.
Its ``waitingFor`` and its priority stay the same (it still needs its ``nodes.min``), so no
status change and no node event woke them: before, they noticed only at the next resync
(30 s by default) with free nodes kept idle for a job that could no longer run on them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from phased.reconcile import Reconciler
from tests.handlers import line

TOLERATION = {"key": "dedicated", "operator": "Exists"}


def job(uid: str, rv: int, generation: int, gpus: int, tolerations: list[Any]) -> dict[str, Any]:
    """Job ``uid`` waiting for 2 H100 nodes for its phase ``train`` (``gpus`` per node)."""
    raw = line.job(uid, rv, "Waiting", {"H100": 2})
    raw["metadata"]["generation"] = generation
    raw["spec"] = {
        "phases": [
            {
                "name": "train",
                "nodes": {"min": 2, "max": 2},
                "gpuTypes": ["H100"],
                "gpusPerNode": gpus,
            }
        ],
        "template": {
            "image": "registry.example/llm:1",
            "command": ["python", "train.py"],
            "spec": {"tolerations": tolerations},
        },
    }
    raw["status"]["phaseIndex"] = 0
    return raw


AHEAD = job("ahead", 10, 1, 4, [])
KNOWN = [
    AHEAD,
    line.job("behind", 11, "Waiting", {"H100": 2}),
    line.job("run", 12, "Running", None),
]


def looked_at(monkeypatch: pytest.MonkeyPatch, edited: dict[str, Any]) -> set[str]:
    def edit_in_line(rec: Reconciler) -> None:
        # The line the next pass of the job behind reads: the edit is in it.
        ahead = {c.uid: c for c in rec._claimants("behind")}["ahead"]
        assert ahead.gpus_per_node == edited["spec"]["phases"][0]["gpusPerNode"]

    return line.looked_at(monkeypatch, KNOWN, "MODIFIED", edited, edit_in_line)


def _faults(raw: dict[str, Any]) -> dict[str, Any]:
    raw["spec"]["failurePolicy"] = {"gpuFaultConditions": ["ThermalThrottle"]}
    return raw


@pytest.mark.parametrize(
    "edited",
    [
        pytest.param(job("ahead", 20, 2, 8, []), id="gpus-per-node"),
        pytest.param(job("ahead", 20, 2, 4, [TOLERATION]), id="tolerations"),
        pytest.param(_faults(job("ahead", 20, 2, 4, [])), id="gpu-fault-conditions"),
    ],
)
def test_the_waiting_jobs_are_looked_at_at_once(
    monkeypatch: pytest.MonkeyPatch, edited: dict[str, Any]
) -> None:
    seen = looked_at(monkeypatch, edited)
    assert seen == {"ahead", "behind"}  # a running job never waits in line: nothing for it


def test_an_edit_leaving_the_shape_as_it_was_wakes_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    edited = copy.deepcopy(AHEAD)
    edited["metadata"].update(resourceVersion="20", generation=2)
    edited["spec"]["phases"][0]["nodes"]["max"] = 4  # its place and what it could take alike
    assert looked_at(monkeypatch, edited) == {"ahead"}
