"""The line a job reads names, for each job waiting ahead, the shape of the phase it waits to
start — its ``gpusPerNode`` and its workers' tolerations, read from its spec and its
``status.phaseIndex`` — so that only free nodes it could take are kept for it (see
``tests/core/test_a_job_keeps_for_the_jobs_ahead_only_free_nodes_they_could_take.py``). A
spec that cannot be read leaves the shape unknown: any node of the type is kept for it."""

from __future__ import annotations

from typing import Any

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

TOLERATION = {"key": "dedicated", "operator": "Exists"}


def _phase(name: str, gpus: int) -> dict[str, Any]:
    return {"name": name, "nodes": {"min": 2, "max": 2}, "gpuTypes": ["H100"], "gpusPerNode": gpus}


def job(uid: str, spec: dict[str, Any], phase_index: int, generation: int = 1) -> dict[str, Any]:
    meta = {"name": uid, "namespace": "ml", "uid": uid, "resourceVersion": "1"}
    meta["generation"] = generation
    status = {"state": "Waiting", "waitingFor": {"H100": 2}, "phaseIndex": phase_index}
    return {"metadata": meta, "spec": spec, "status": status}


SPEC = {
    "phases": [_phase("prep", 8), _phase("train", 4)],
    "template": {
        "image": "registry.example/llm:1",
        "command": ["python", "train.py"],
        "spec": {"tolerations": [TOLERATION]},
    },
}


def _line(*raws: dict[str, Any]) -> dict[str, Any]:
    rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
    for raw in raws:
        rec.jobs[raw["metadata"]["uid"]] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
    return {c.uid: c for c in rec._claimants("me")}


def test_each_job_ahead_is_named_with_the_shape_of_the_phase_it_waits_to_start() -> None:
    line = _line(job("ahead", SPEC, 1))
    assert line["ahead"].gpus_per_node == 4
    assert line["ahead"].tolerations == (TOLERATION,)
    line = _line(job("ahead", SPEC, 0))
    assert line["ahead"].gpus_per_node == 8


def test_a_spec_that_cannot_be_read_leaves_the_shape_unknown() -> None:
    line = _line(job("ahead", {"phases": "not a list"}, 0))
    assert line["ahead"].gpus_per_node is None and line["ahead"].tolerations is None
    assert line["ahead"].wants == {"H100": 2}


def test_each_job_ahead_is_named_with_its_gpu_fault_conditions() -> None:
    faults = {**SPEC, "failurePolicy": {"gpuFaultConditions": ["ThermalThrottle"]}}
    assert _line(job("ahead", faults, 1))["ahead"].fault_conditions == ("ThermalThrottle",)
    assert _line(job("ahead", SPEC, 1))["ahead"].fault_conditions == ("GPUXidError", "GPUUnhealthy")
    assert _line(job("ahead", {"phases": "not a list"}, 0))["ahead"].fault_conditions == ()


def test_each_job_ahead_is_named_with_the_types_it_accepts_in_its_order_of_preference() -> None:
    either = {**SPEC, "phases": [{**_phase("train", 8), "gpuTypes": ["H200", "H100"]}]}
    assert _line(job("ahead", either, 0))["ahead"].types == ("H200", "H100")
    assert _line(job("ahead", SPEC, 1))["ahead"].types == ("H100",)
    assert _line(job("ahead", {"phases": "not a list"}, 0))["ahead"].types is None
