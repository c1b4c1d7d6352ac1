"""Worker pods built from a full pod template, on the real API server and scheduler.

A job whose template has a dataset volume, /dev/shm as a memory emptyDir, env from a
ConfigMap and a Secret, a sidecar, an init container, a toleration, labels and the torchrun
launcher gets worker pods (KWOK runs them) that carry all of it, with Phased's placement,
GPUs and rank environment beside it: the API server accepted the merged pods as written.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from e2e import lib
from e2e.harness import REPO, Operator
from e2e.operator_fixtures import JOB_UID, apply, get_job, live_workers, status, wait_state
from tests.api.invalid_cases import VALID_CASES

from phased.api.v1alpha1 import parse_manifest
from phased.core.model import JobRef
from phased.core.workers import Worker


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "templated"},
        "spec": {
            "launcher": {"type": "Torchrun"},
            "template": {
                "image": "busybox:1.36",
                "command": ["torchrun", "--module", "trainer"],
                "labels": {"team": "llm"},
                "env": [
                    {
                        "name": "HF_TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
                    }
                ],
                "spec": {
                    "volumes": [
                        {"name": "datasets", "configMap": {"name": "datasets"}},
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
                    ],
                    "initContainers": [
                        {"name": "fetch", "image": "busybox:1.36", "command": ["true"]},
                    ],
                    "containers": [
                        {
                            "name": "worker",
                            "envFrom": [{"configMapRef": {"name": "nccl-env"}}],
                            "volumeMounts": [
                                {"name": "datasets", "mountPath": "/data", "readOnly": True},
                                {"name": "dshm", "mountPath": "/dev/shm"},
                            ],
                        },
                        {"name": "exporter", "image": "busybox:1.36", "command": ["sleep", "1d"]},
                    ],
                    "tolerations": [{"key": "rdma", "operator": "Exists", "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 5,
                },
            },
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 2, "max": 2},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "template": {
                        "annotations": {"sim.phased.dev/succeed-after": "600s"},
                        "spec": {
                            "containers": [
                                {"name": "worker", "resources": {"limits": {"memory": "1Gi"}}}
                            ]
                        },
                    },
                }
            ],
        },
    }


def test_worker_pods_carry_volumes_shm_env_sources_and_sidecars(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    kubectl("create", "configmap", "nccl-env", "-n", namespace, "--from-literal=NCCL_DEBUG=INFO")
    kubectl("create", "configmap", "datasets", "-n", namespace, "--from-literal=a=b")
    kubectl("create", "secret", "generic", "hf-token", "-n", namespace, "--from-literal=token=x")
    apply(kubectl, namespace, _job())
    uid = get_job(kubectl, namespace, "templated")["metadata"]["uid"]
    wait_state(kubectl, namespace, "templated", {"Running"}, 120, operator)
    lib.wait_until(lambda: len(live_workers(core, namespace, uid)) == 2, 60, message="2 workers")

    for pod in live_workers(core, namespace, uid):
        spec = pod.spec
        assert pod.metadata.labels["team"] == "llm" and pod.metadata.labels[JOB_UID] == uid
        volumes = {v.name: v for v in spec.volumes}
        assert volumes["dshm"].empty_dir.medium == "Memory"
        assert volumes["datasets"].config_map.name == "datasets"
        assert [c.name for c in spec.init_containers] == ["fetch"]
        worker, exporter = spec.containers
        assert (worker.name, exporter.name) == ("worker", "exporter")
        mounts = {m.mount_path: m.name for m in worker.volume_mounts}
        assert mounts["/dev/shm"] == "dshm" and mounts["/data"] == "datasets"
        assert worker.env_from[0].config_map_ref.name == "nccl-env"
        env = {e.name: e for e in worker.env}
        assert env["HF_TOKEN"].value_from.secret_key_ref.name == "hf-token"
        assert env["PET_NNODES"].value == "2" and env["PET_NPROC_PER_NODE"].value == "8"
        assert env["PET_NODE_RANK"].value == pod.metadata.labels["phased.dev/rank"]
        assert "RANK" not in env
        assert worker.resources.limits["nvidia.com/gpu"] == "8"
        assert worker.resources.limits["memory"] == "1Gi"
        assert exporter.resources.limits is None
        # Phased's two, then the template's (the API server appends its own after them).
        assert [t.key for t in spec.tolerations][:3] == [
            "phased.dev/pool",
            "phased.dev/spare",
            "rdma",
        ]
        assert spec.restart_policy == "Never"
        assert spec.node_name  # placed by the scheduler on the job's pool
        node = core.read_node(spec.node_name)
        assert node.metadata.labels[JOB_UID] == uid
    kubectl("delete", "trainingjob", "templated", "-n", namespace, "--timeout=90s")


def test_a_pod_the_api_server_refuses_makes_the_job_invalid_with_its_message(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    """What no schema can tell (a mount naming no volume) is the API server's to refuse when
    the pod is created; the job becomes Invalid with its message instead of retrying."""
    job = _job()
    job["metadata"]["name"] = "dangling"
    job["spec"]["template"]["spec"]["volumes"] = [
        v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] != "dshm"
    ]
    apply(kubectl, namespace, job)
    st = wait_state(kubectl, namespace, "dangling", {"Invalid"}, 120, operator)
    condition = next(c for c in st["conditions"] if c["type"] == "InvalidSpec")
    assert "dshm" in condition["message"], condition["message"]
    uid = get_job(kubectl, namespace, "dangling")["metadata"]["uid"]
    assert not live_workers(core, namespace, uid)
    assert operator.alive
    kubectl("delete", "trainingjob", "dangling", "-n", namespace, "--timeout=90s")


def test_every_examples_worker_pods_are_pods_the_api_server_accepts(
    kubectl: lib.Kubectl, namespace: str
) -> None:
    """The merged pods, Phased's parts laid over the templates, pass the API server's own pod
    validation (server-side dry run), for every example and the full pod spec of the table."""
    kubectl.run("create", "priorityclass", "training", "--value=1000", check=False)
    manifests = [c.manifest for c in VALID_CASES if c.id.startswith("a full pod spec")]
    manifests += [yaml.safe_load(p.read_text()) for p in sorted((REPO / "examples").glob("*.yaml"))]
    checked = 0
    for manifest in manifests:
        job = parse_manifest(manifest)
        ref = JobRef(namespace=namespace, name=str(job.metadata.name or "llm"), uid="u-e2e")
        for phase in job.spec.phases:
            resource = "nvidia.com/gpu" if phase.gpu_types else None
            pod = Worker(ref, job.spec, phase, 1, 0, 3, resource=resource).manifest()
            del pod["metadata"]["ownerReferences"]  # no such job: only the pod is judged
            result = kubectl.run(
                "create", "--dry-run=server", "-n", namespace, "-f", "-",
                input=json.dumps(pod), check=False,
            )  # fmt: skip
            assert result.returncode == 0, (job.metadata.name, phase.name, result.stderr)
            checked += 1
    assert checked >= 10


def test_a_namespace_quota_that_refuses_workers_is_said_on_the_job_until_it_is_raised(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    """A ResourceQuota the workers would exceed is the namespace's to mend, not the spec's:
    the job says so (``WorkersRefused`` with the API server's message, a Warning event) and
    starts once the quota is raised, without a new spec."""
    quota: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "pods", "namespace": namespace},
        "spec": {"hard": {"pods": "1"}},
    }
    kubectl("apply", "-f", "-", input=json.dumps(quota))
    lib.wait_until(
        lambda: core.read_namespaced_resource_quota("pods", namespace).status.hard or {},
        60,
        message="the quota controller to publish the quota",
    )
    job = {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "quota"},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "phases": [
                {"name": "train", "nodes": {"min": 2, "max": 2}, "gpuTypes": ["H100"],
                 "gpusPerNode": 8},
            ],
        },
    }  # fmt: skip
    apply(kubectl, namespace, job)

    def refused() -> dict[str, Any] | None:
        st = status(kubectl, namespace, "quota")
        cond = next((c for c in st.get("conditions", []) if c["type"] == "WorkersRefused"), {})
        return st if cond.get("status") == "True" else None

    st = lib.wait_until(refused, 120, message="WorkersRefused on the job")
    cond = next(c for c in st["conditions"] if c["type"] == "WorkersRefused")
    assert "exceeded quota" in cond["message"], cond["message"]
    assert "exceeded quota" in st["message"] and st["state"] == "Pending", st
    reasons = kubectl(
        "get", "events", "-n", namespace, "--field-selector", "involvedObject.name=quota",
        "-o", "jsonpath={range .items[*]}{.reason}{'\\n'}{end}",
    ).split()  # fmt: skip
    assert "WorkersRefused" in reasons, reasons

    quota["spec"]["hard"]["pods"] = "10"
    kubectl("apply", "-f", "-", input=json.dumps(quota))
    st = wait_state(kubectl, namespace, "quota", {"Running"}, 120, operator)
    cond = next(c for c in st["conditions"] if c["type"] == "WorkersRefused")
    assert cond["status"] == "False", cond
    uid = get_job(kubectl, namespace, "quota")["metadata"]["uid"]
    assert len(live_workers(core, namespace, uid)) == 2
    assert operator.alive
    kubectl("delete", "trainingjob", "quota", "-n", namespace, "--timeout=90s")
