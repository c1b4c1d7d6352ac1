"""Worker pods carry the whole template; Phased adds placement, GPUs and the rank environment.

The template's volumes, shm, envFrom, init containers, sidecars, security context,
tolerations, affinity terms, imagePullSecrets, hostNetwork, DNS policy, priority class and
extra resources reach the pod as written. Phased's tolerations, required node affinity, GPUs,
restartPolicy, hostname and labels are added beside them, and the worker container gets the
environment of the phase's launcher (Plain, Torchrun static or c10d, MindSpore) and no other.
"""

from __future__ import annotations

from typing import Any

import pytest

from phased.core import labels
from phased.core.workers import Worker
from tests.api.invalid_cases import full_pod_spec
from tests.core.builders import JOB, phase, spec


def _worker(the_spec: Any, index: int = 0, rank: int = 1, **kw: Any) -> Worker:
    the_phase = the_spec.phases[index]
    args: dict[str, Any] = dict(
        job=JOB,
        spec=the_spec,
        phase=the_phase,
        generation=2,
        rank=rank,
        world_size=4,
        resource="nvidia.com/gpu" if the_phase.gpu_types else None,
    )
    args.update(kw)
    return Worker(**args)


def _full() -> Any:
    return spec(
        phase("prep", 2, 2, gpu_types=[]),
        phase("train", 4, 4, gpus=8),
        template={
            "image": "registry.example/llm:1",
            "labels": {"team": "llm"},
            "env": [
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}
            ],
            "spec": full_pod_spec(),
        },
    )


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_template_reaches_the_pod_as_written() -> None:
    pod = _worker(_full(), index=1).manifest()
    spec, wanted = pod["spec"], full_pod_spec()
    for key in (
        "volumes",
        "initContainers",
        "securityContext",
        "imagePullSecrets",
        "hostNetwork",
        "dnsPolicy",
        "priorityClassName",
        "schedulerName",
        "terminationGracePeriodSeconds",
    ):
        assert spec[key] == wanted[key], key
    worker, exporter = spec["containers"]
    assert exporter == {"name": "exporter", "image": "exporter:2"}
    assert worker["name"] == "worker" and worker["image"] == "registry.example/llm:1"
    assert worker["envFrom"] == wanted["containers"][0]["envFrom"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in worker["volumeMounts"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in spec[
        "volumes"
    ]
    assert worker["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert _env(worker)["HF_TOKEN"] == {"secretKeyRef": {"name": "hf", "key": "t"}}
    assert pod["metadata"]["labels"]["team"] == "llm"


def test_phased_adds_gpus_to_the_worker_only_and_keeps_extra_resources() -> None:
    spec = _worker(_full(), index=1).manifest()["spec"]
    worker, exporter = spec["containers"]
    assert worker["resources"]["limits"] == {
        "rdma/hca": 1,
        "memory": "1800Gi",
        "nvidia.com/gpu": "8",
    }
    assert worker["resources"]["requests"] == {"nvidia.com/gpu": "8"}
    assert "resources" not in exporter
    assert all("resources" not in c for c in spec["initContainers"])


def test_phased_tolerations_and_placement_come_first_and_the_templates_are_kept() -> None:
    spec = _worker(_full(), index=0).manifest()["spec"]  # a CPU phase: anti-affinity too
    assert [t["key"] for t in spec["tolerations"]] == [
        labels.TAINT_POOL,
        labels.TAINT_SPARE,
        "rdma",
    ]
    node = spec["affinity"]["nodeAffinity"]
    for term in node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
        assert [e["key"] for e in term["matchExpressions"]] == [
            labels.LABEL_JOB_UID,
            labels.LABEL_ROLE,
            labels.LABEL_INSTALLATION,
        ]
    assert node["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 10
    anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [a["topologyKey"] for a in anti] == ["kubernetes.io/hostname", "zone"]
    assert spec["restartPolicy"] == "Never"
    assert spec["hostname"] == "llm-prep-g2-1" and spec["subdomain"] == "llm"


def test_the_templates_service_account_wins_over_the_settings_default() -> None:
    the_spec = spec(
        phase("train", 1, 1), template={"image": "i:1", "spec": {"serviceAccountName": "data"}}
    )
    spec_ = _worker(the_spec, service_account="phased-workers").manifest()["spec"]
    assert spec_["serviceAccountName"] == "data" and spec_["automountServiceAccountToken"] is True
    plain = spec(phase("train", 1, 1))
    spec_ = _worker(plain, service_account="phased-workers").manifest()["spec"]
    assert spec_["serviceAccountName"] == "phased-workers"


def test_the_rendezvous_port_is_added_beside_the_templates_ports() -> None:
    worker = _worker(_full(), index=1).manifest()["spec"]["containers"][0]
    assert worker["ports"] == [
        {"containerPort": 8080, "name": "metrics"},
        {"name": "rendezvous", "containerPort": 29500},
    ]


MASTER = "llm-train-g2-0.llm.ml.svc"
PLAIN = {"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": MASTER, "MASTER_PORT": "29500"}
LAUNCHERS: list[tuple[str, dict[str, Any], int, dict[str, str]]] = [
    ("no launcher: plain", {}, 8, PLAIN),
    ("plain", {"type": "Plain"}, 8, PLAIN),
    (
        "torchrun, static: nproc per node is the GPUs per node",
        {"type": "Torchrun"},
        8,
        {
            "PET_NNODES": "4",
            "PET_NODE_RANK": "1",
            "PET_NPROC_PER_NODE": "8",
            "PET_MASTER_ADDR": MASTER,
            "PET_MASTER_PORT": "29500",
        },
    ),
    (
        "torchrun, c10d: an endpoint on rank 0 and one rendezvous id per generation",
        {"type": "Torchrun", "rendezvous": "C10d", "port": 29400, "procsPerNode": 2},
        8,
        {
            "PET_NNODES": "4",
            "PET_NPROC_PER_NODE": "2",
            "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ENDPOINT": f"{MASTER}:29400",
            "PET_RDZV_ID": f"{JOB.uid}-g2",
        },
    ),
    (
        "torchrun on a CPU phase: one process per node",
        {"type": "Torchrun"},
        0,
        {
            "PET_NNODES": "4",
            "PET_NODE_RANK": "1",
            "PET_NPROC_PER_NODE": "1",
            "PET_MASTER_ADDR": MASTER,
            "PET_MASTER_PORT": "29500",
        },
    ),
    (
        "mindspore: msrun's scheduler on rank 0, every process counted",
        {"type": "MindSpore", "port": 8118},
        8,
        {
            "MS_SCHED_HOST": MASTER,
            "MS_SCHED_PORT": "8118",
            "MS_WORKER_NUM": "32",
            "RANK_SIZE": "32",
        },
    ),
]
LAUNCHER_NAMES = {n for _, _, _, env in LAUNCHERS for n in env}


@pytest.mark.parametrize(
    ("case", "launcher", "gpus", "expected"), LAUNCHERS, ids=[c[0] for c in LAUNCHERS]
)
def test_the_worker_gets_its_launchers_environment_and_no_other(
    case: str, launcher: dict[str, Any], gpus: int, expected: dict[str, str]
) -> None:
    types = ["H100"] if gpus else []
    the_spec = spec(phase("train", 4, 4, gpu_types=types, gpus=gpus), launcher=launcher)
    worker = _worker(the_spec)
    env = _env(worker.manifest()["spec"]["containers"][0])
    assert {k: v for k, v in env.items() if k in LAUNCHER_NAMES} == expected
    assert env["PHASED_RANK"] == "1" and env["PHASED_WORLD_SIZE"] == "4"
    assert env["PHASED_PROCS_PER_NODE"] == expected.get("PET_NPROC_PER_NODE", str(gpus or 1))
    assert env["PHASED_MASTER_ADDR"] == MASTER


def test_a_phase_launcher_replaces_the_jobs() -> None:
    the_spec = spec(
        phase("prep", 1, 1, gpu_types=[]),
        phase("train", 4, 4, launcher={"type": "Torchrun"}),
        launcher={"type": "Plain"},
    )
    prep = _env(_worker(the_spec, index=0).manifest()["spec"]["containers"][0])
    train = _env(_worker(the_spec, index=1).manifest()["spec"]["containers"][0])
    assert "RANK" in prep and "PET_NNODES" not in prep
    assert "PET_NNODES" in train and "RANK" not in train
