"""The line a job reads holds a running job short of spares at its place, for the spares its
status says it is short of (``status.sparesWanted``), marked as a spare need (it takes what
it can of it, and waits for nothing): the jobs behind keep free nodes for it (see
``tests/core/test_a_running_job_short_of_spares_is_in_line_for_them_at_its_place.py``). A
job waiting to start is in line for its ``waitingFor`` as before, and a job with neither is
not in line. A change of the need wakes the line, as one of ``waitingFor`` does."""

from __future__ import annotations

from typing import Any

import pytest

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.handlers.line import looked_at
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

SPEC = {
    "priority": 5,
    "phases": [
        {"name": "train", "nodes": {"min": 2, "max": 2}, "gpuTypes": ["H100"], "gpusPerNode": 8}
    ],
    "template": {"image": "registry.example/llm:1", "command": ["python", "train.py"]},
}


def job(uid: str, status: dict[str, Any], rv: int = 1) -> dict[str, Any]:
    meta = {"name": uid, "namespace": "ml", "uid": uid, "resourceVersion": str(rv)}
    return {"metadata": meta, "spec": SPEC, "status": status}


def _line(*raws: dict[str, Any]) -> dict[str, Any]:
    rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
    for raw in raws:
        rec.jobs[raw["metadata"]["uid"]] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
    return {c.uid: c for c in rec._claimants("me")}


def test_a_running_job_short_of_spares_is_in_line_for_them() -> None:
    line = _line(job("short", {"state": "Running", "sparesWanted": {"H100": 1}}))
    assert line["short"].wants == {"H100": 1}
    assert line["short"].spares
    assert line["short"].priority == 5
    assert line["short"].gpus_per_node == 8


def test_a_waiting_job_is_in_line_as_before_and_a_full_one_not_at_all() -> None:
    line = _line(
        job("waiting", {"state": "Waiting", "waitingFor": {"H100": 2}}),
        job("full", {"state": "Running"}),
    )
    assert set(line) == {"waiting"}
    assert line["waiting"].wants == {"H100": 2} and not line["waiting"].spares


def test_a_running_job_whose_spares_are_full_again_wakes_the_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short = job("short", {"state": "Running", "sparesWanted": {"H100": 1}})
    behind = job("behind", {"state": "Waiting", "waitingFor": {"H100": 2}})
    full = job("short", {"state": "Running"}, rv=2)
    assert "behind" in looked_at(monkeypatch, [short, behind], "MODIFIED", full)
