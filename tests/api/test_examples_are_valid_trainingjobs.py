"""Every manifest in examples/ is a valid TrainingJob, for the models and the CRD schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from phased.api.v1alpha1 import TrainingJob, parse_manifest
from phased.core.model import JobRef
from phased.core.settings import Settings
from phased.core.validate import spec_problems
from phased.core.workers import Worker
from tests.api.schema_walk import REPO

EXAMPLES = sorted((REPO / "examples").rglob("*.yaml"))
IDS = [str(p.relative_to(REPO / "examples")) for p in EXAMPLES]


def _load(path: Path) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(docs) == 1, f"{path.name} holds one TrainingJob"
    doc: dict[str, Any] = docs[0]
    return doc


def test_the_documented_examples_exist() -> None:
    assert set(IDS) >= {
        "training-100b.yaml",
        "small.yaml",
        "cpu-preprocess.yaml",
        "ascend-910b.yaml",
        "checkpointed.yaml",
        "torchrun.yaml",
        "ascend-mindspore.yaml",
        "jax-data-parallel/trainingjob.yaml",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_the_example_validates(path: Path) -> None:
    job = parse_manifest(_load(path))
    assert job.metadata.name
    assert all(p.expected_duration for p in job.spec.phases), "plan needs expected durations"


def _phase_nodes(job: TrainingJob, name: str) -> tuple[int, int]:
    phase = next(p for p in job.spec.phases if p.name == name)
    return phase.nodes.min, phase.nodes.max


def test_the_100b_example_has_the_fields_numbers() -> None:
    job = parse_manifest(_load(REPO / "examples" / "training-100b.yaml"))
    assert [p.name for p in job.spec.phases] == ["preprocess", "initialize", "train", "validate"]
    assert _phase_nodes(job, "preprocess") == (30, 40)
    assert _phase_nodes(job, "initialize") == (80, 100)
    assert _phase_nodes(job, "train") == (100, 120)
    assert _phase_nodes(job, "validate") == (50, 80)
    assert [p.expected_duration for p in job.spec.phases] == ["12d", "7d", "70d", "12d"]
    assert job.spec.spares.count == 10


def test_the_small_example_fits_the_local_cluster() -> None:
    job = parse_manifest(_load(REPO / "examples" / "small.yaml"))
    spares = job.spec.spares.count
    assert max(p.nodes.max for p in job.spec.phases) + spares <= 16  # 16 H100 nodes
    for phase in job.spec.phases:
        annotations = job.spec.worker_pod(phase).annotations
        assert "sim.phased.dev/succeed-after" in annotations


def _worker_container(name: str, gpu: str) -> dict[str, Any]:
    job = parse_manifest(_load(REPO / "examples" / name))
    assert spec_problems(job.spec, Settings()) == []
    ref = JobRef(namespace="ml", name=str(job.metadata.name), uid="u-1")
    worker = Worker(ref, job.spec, job.spec.phases[0], 0, 1, 4, resource=gpu)
    pod = worker.manifest()
    container: dict[str, Any] = pod["spec"]["containers"][0]
    assert {v["name"] for v in pod["spec"]["volumes"]} >= {"dshm", "checkpoints"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    return container


def test_the_torchrun_example_gives_torchrun_its_variables() -> None:
    container = _worker_container("torchrun.yaml", "nvidia.com/gpu")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["PET_NNODES"], env["PET_NODE_RANK"], env["PET_NPROC_PER_NODE"]) == ("4", "1", "8")
    assert env["PET_MASTER_ADDR"] == "llama-ft-train-g0-0.llama-ft.ml.svc"
    assert container["command"][0] == "torchrun" and "RANK" not in env
    assert container["resources"]["limits"]["rdma/hca"] == "1"
    assert container["envFrom"] == [{"configMapRef": {"name": "nccl-env"}}]


def test_the_ascend_example_gives_msrun_its_variables() -> None:
    container = _worker_container("ascend-mindspore.yaml", "huawei.com/Ascend910")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["MS_WORKER_NUM"], env["RANK_SIZE"], env["MS_SCHED_PORT"]) == ("32", "32", "8118")
    assert env["MS_SCHED_HOST"] == "pangu-ms-train-g0-0.pangu-ms.ml.svc"
    referenced = {a.split("$(")[1].rstrip(")") for a in container["args"] if "$(" in a}
    assert referenced <= set(env), "every $(VAR) in args is set"
