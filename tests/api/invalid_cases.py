"""TrainingJobs that must be rejected, and a few edge cases that must be accepted.

Each invalid case is ``(id, manifest, model_error, api_error)``:

- ``model_error`` is a substring of what the models report, as
  :func:`phased.api.errors.explain` formats it (``<field path>: <message>`` lines);
- ``api_error`` is a substring of the API server's rejection when the manifest is applied with
  the CRD in ``crds/`` installed: a schema error as kube-apiserver phrases it, or the CRD's
  CEL message verbatim.

Every case is one small change to :func:`valid_job`, so each fails for exactly one reason.
The ``api_error`` texts were checked against kube-apiserver v1.36.3 with ``kubectl create
--dry-run=server`` (every invalid case rejected with its text, every valid case accepted).
The table is plain data: the end-to-end suite applies the same cases to a real API server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

Manifest = dict[str, Any]


class InvalidCase(NamedTuple):
    id: str
    manifest: Manifest
    model_error: str
    api_error: str


class ValidCase(NamedTuple):
    id: str
    manifest: Manifest


def valid_job() -> Manifest:
    """A small valid job: a CPU-only phase, then a GPU phase; the image on the job template."""
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "llm", "namespace": "default"},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "phases": [
                {"name": "preprocess", "nodes": {"min": 2, "max": 3}},
                {
                    "name": "train",
                    "nodes": {"min": 8, "max": 10},
                    "gpuTypes": ["H100", "H200"],
                    "gpusPerNode": 8,
                },
            ],
        },
    }


def full_pod_spec() -> Manifest:
    """A pod spec with most of what a training run asks for (all of it Phased lets through)."""
    return {
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
            {"name": "config", "configMap": {"name": "trainer-config"}},
        ],
        "initContainers": [
            {"name": "fetch", "image": "busybox:1.36", "command": ["true"]},
            {"name": "logs", "image": "fluent-bit:3", "restartPolicy": "Always"},
        ],
        "containers": [
            {
                "name": "worker",
                "envFrom": [{"configMapRef": {"name": "nccl"}}, {"secretRef": {"name": "s3"}}],
                "volumeMounts": [
                    {"name": "data", "mountPath": "/data"},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
                "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                "resources": {"limits": {"rdma/hca": 1, "memory": "1800Gi"}},
                "ports": [{"containerPort": 8080, "name": "metrics"}],
            },
            {"name": "exporter", "image": "exporter:2"},
        ],
        "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
        "tolerations": [{"key": "rdma", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                        },
                    }
                ]
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
                ]
            },
        },
        "imagePullSecrets": [{"name": "registry"}],
        "hostNetwork": True,
        "dnsPolicy": "ClusterFirstWithHostNet",
        "priorityClassName": "training",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 120,
    }


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _steps(path: str) -> list[str | int]:
    return [name if name else int(index) for name, index in _STEP.findall(path)]


def _set(path: str, value: Any) -> Callable[[Manifest], None]:
    def edit(doc: Manifest) -> None:
        *parents, last = _steps(path)
        node: Any = doc
        for step in parents:
            if isinstance(step, str) and step not in node:
                node[step] = {}
            node = node[step]
        node[last] = value

    return edit


def _drop(path: str) -> Callable[[Manifest], None]:
    def edit(doc: Manifest) -> None:
        *parents, last = _steps(path)
        node: Any = doc
        for step in parents:
            node = node[step]
        del node[last]

    return edit


def job(*edits: Callable[[Manifest], None]) -> Manifest:
    """:func:`valid_job` with ``edits`` applied in order."""
    doc = valid_job()
    for edit in edits:
        edit(doc)
    return doc


def _phase(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "nodes": {"min": 1, "max": 1}, **fields}


PHASE_PATTERN = "'^[a-z]([-a-z0-9]{0,18}[a-z0-9])?$'"
GPU_TYPES = '"H100", "H200", "Ascend910B"'

INVALID_CASES: list[InvalidCase] = [
    # --- node counts -------------------------------------------------------------------------
    InvalidCase(
        "a phase cannot run on zero nodes",
        job(_set("spec.phases[0].nodes.min", 0)),
        "spec.phases[0].nodes.min: Input should be greater than or equal to 1",
        "spec.phases[0].nodes.min in body should be greater than or equal to 1",
    ),
    InvalidCase(
        "a negative node count is refused",
        job(_set("spec.phases[0].nodes.min", -1)),
        "spec.phases[0].nodes.min: Input should be greater than or equal to 1",
        "spec.phases[0].nodes.min in body should be greater than or equal to 1",
    ),
    InvalidCase(
        "a pool larger than 5000 nodes is refused",
        job(_set("spec.phases[1].nodes.max", 5001)),
        "spec.phases[1].nodes.max: Input should be less than or equal to 5000",
        "spec.phases[1].nodes.max in body should be less than or equal to 5000",
    ),
    InvalidCase(
        "the minimum node count may not exceed the maximum",
        job(_set("spec.phases[1].nodes", {"min": 12, "max": 10})),
        "spec.phases[1].nodes: nodes.min (12) must not exceed nodes.max (10)",
        "nodes.min must not exceed nodes.max",
    ),
    InvalidCase(
        "a phase must say how many nodes it needs",
        job(_drop("spec.phases[0].nodes")),
        "spec.phases[0].nodes: Field required",
        "spec.phases[0].nodes: Required value",
    ),
    InvalidCase(
        "a node range needs a maximum",
        job(_drop("spec.phases[1].nodes.max")),
        "spec.phases[1].nodes.max: Field required",
        "spec.phases[1].nodes.max: Required value",
    ),
    InvalidCase(
        "a node count is a number, not a word",
        job(_set("spec.phases[1].nodes.max", "ten")),
        "spec.phases[1].nodes.max: Input should be a valid integer",
        "spec.phases[1].nodes.max in body must be of type integer",
    ),
    # --- the list of phases ------------------------------------------------------------------
    InvalidCase(
        "a job needs phases",
        job(_drop("spec.phases")),
        "spec.phases: Field required",
        "spec.phases: Required value",
    ),
    InvalidCase(
        "a job needs at least one phase",
        job(_set("spec.phases", [])),
        "spec.phases: List should have at least 1 item",
        "spec.phases in body should have at least 1 items",
    ),
    InvalidCase(
        "a job has at most eight phases",
        job(_set("spec.phases", [_phase(f"p{i}") for i in range(9)])),
        "spec.phases: List should have at most 8 items",
        "spec.phases: Too many: 9: must have at most 8 items",
    ),
    InvalidCase(
        "two phases cannot share a name",
        job(_set("spec.phases[0].name", "train")),
        "spec: phase names must be unique; repeated: train",
        "phase names must be unique",
    ),
    InvalidCase(
        "a phase needs a name",
        job(_drop("spec.phases[0].name")),
        "spec.phases[0].name: Field required",
        "spec.phases[0].name: Required value",
    ),
    InvalidCase(
        "a phase name is lowercase",
        job(_set("spec.phases[1].name", "Train")),
        "spec.phases[1].name: String should match pattern",
        f"spec.phases[1].name in body should match {PHASE_PATTERN}",
    ),
    InvalidCase(
        "a phase name cannot end with a hyphen",
        job(_set("spec.phases[1].name", "train-")),
        "spec.phases[1].name: String should match pattern",
        f"spec.phases[1].name in body should match {PHASE_PATTERN}",
    ),
    InvalidCase(
        "a phase name has at most 20 characters",
        job(_set("spec.phases[1].name", "train-for-a-long-time")),
        "spec.phases[1].name: String should have at most 20 characters",
        "spec.phases[1].name: Too long",
    ),
    # --- accelerators ------------------------------------------------------------------------
    InvalidCase(
        "an unknown GPU type is refused",
        job(_set("spec.phases[1].gpuTypes", ["H300"])),
        "spec.phases[1].gpuTypes[0]: Input should be 'H100', 'H200' or 'Ascend910B'",
        f'spec.phases[1].gpuTypes[0]: Unsupported value: "H300": supported values: {GPU_TYPES}',
    ),
    InvalidCase(
        "GPU types are spelled exactly",
        job(_set("spec.phases[1].gpuTypes", ["H100", "h200"])),
        "spec.phases[1].gpuTypes[1]: Input should be 'H100', 'H200' or 'Ascend910B'",
        f'spec.phases[1].gpuTypes[1]: Unsupported value: "h200": supported values: {GPU_TYPES}',
    ),
    InvalidCase(
        "a GPU type is listed once",
        job(_set("spec.phases[1].gpuTypes", ["H100", "H100"])),
        "spec.phases[1].gpuTypes: gpuTypes must not repeat a type",
        'spec.phases[1].gpuTypes[1]: Duplicate value: "H100"',
    ),
    InvalidCase(
        "a GPU phase must ask for GPUs",
        job(_drop("spec.phases[1].gpusPerNode")),
        "but asks for gpusPerNode 0: set gpusPerNode (e.g. 8)",
        "a phase with gpuTypes must set gpusPerNode to at least 1",
    ),
    InvalidCase(
        "a CPU-only phase cannot ask for GPUs",
        job(_set("spec.phases[0].gpusPerNode", 8)),
        "phase 'preprocess' is CPU-only (no gpuTypes) but asks for gpusPerNode 8",
        "a CPU-only phase (no gpuTypes) must have gpusPerNode 0",
    ),
    InvalidCase(
        "no node has more than 16 GPUs",
        job(_set("spec.phases[1].gpusPerNode", 17)),
        "spec.phases[1].gpusPerNode: Input should be less than or equal to 16",
        "spec.phases[1].gpusPerNode in body should be less than or equal to 16",
    ),
    InvalidCase(
        "a negative GPU count is refused",
        job(_set("spec.phases[1].gpusPerNode", -8)),
        "spec.phases[1].gpusPerNode: Input should be greater than or equal to 0",
        "spec.phases[1].gpusPerNode in body should be greater than or equal to 0",
    ),
    # --- worker template ---------------------------------------------------------------------
    InvalidCase(
        "every phase needs an image",
        job(_drop("spec.template")),
        "phase 'preprocess' has no worker image",
        "every phase needs a worker image",
    ),
    InvalidCase(
        "an image on one phase does not cover the others",
        job(_drop("spec.template"), _set("spec.phases[1].template", {"image": "trainer:1"})),
        "phase 'preprocess' has no worker image",
        "every phase needs a worker image",
    ),
    InvalidCase(
        "an image reference has no spaces",
        job(_set("spec.template.image", "busybox 1.36")),
        "spec.template.image: String should match pattern",
        "spec.template.image in body should match",
    ),
    InvalidCase(
        "an environment variable name cannot start with a digit",
        job(_set("spec.template.env", [{"name": "1WORLD", "value": "x"}])),
        "spec.template.env[0].name: String should match pattern",
        "spec.template.env[0].name in body should match",
    ),
    InvalidCase(
        "an environment variable is set once",
        job(_set("spec.template.env", [{"name": "NCCL_DEBUG"}, {"name": "NCCL_DEBUG"}])),
        "spec.template.env: env names must be unique; repeated: NCCL_DEBUG",
        "spec.template.env[1]: Duplicate value",
    ),
    InvalidCase(
        "a resource amount is a quantity",
        job(_set("spec.phases[1].template", {"resources": {"requests": {"memory": "lots"}}})),
        "spec.phases[1].template.resources.requests.memory: String should match pattern",
        "spec.phases[1].template.resources.requests.memory in body should match",
    ),
    InvalidCase(
        "an annotation key is a qualified name",
        job(_set("spec.template.annotations", {"not a key": "v"})),
        "spec.template.annotations: annotation keys must be qualified names",
        "annotation keys must be qualified names",
    ),
    InvalidCase(
        "an annotation key's prefix has at most 253 characters",
        job(_set("spec.phases[0].template", {"annotations": {"a" * 254 + "/x": "v"}})),
        "spec.phases[0].template.annotations: annotation keys must be qualified names",
        "annotation keys must be qualified names",
    ),
    InvalidCase(
        "a resource name is a qualified name",
        job(_set("spec.phases[1].template", {"resources": {"limits": {"a/b/c": "1"}}})),
        "spec.phases[1].template.resources.limits: resource names must be qualified names",
        "resource names must be qualified names",
    ),
    # --- worker pod spec: what Phased owns ----------------------------------------------------
    InvalidCase(
        "a template cannot pin a node",
        job(_set("spec.template.spec", {"nodeName": "gpu-17"})),
        "spec.template.spec: nodeName cannot be set: Phased places each worker on a node",
        "nodeName cannot be set: Phased places each worker on a node of the job's pool",
    ),
    InvalidCase(
        "a template cannot select nodes",
        job(_set("spec.phases[1].template", {"spec": {"nodeSelector": {"zone": "a"}}})),
        "spec.phases[1].template.spec: nodeSelector cannot be set",
        "nodeSelector cannot be set: Phased places each worker on a node of the job's pool",
    ),
    InvalidCase(
        "a template cannot require node affinity",
        job(
            _set(
                "spec.template.spec",
                {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "zone", "operator": "In", "values": ["a"]}
                                        ]
                                    }
                                ]
                            }
                        }
                    }
                },
            )
        ),
        "spec.template.spec: required node affinity cannot be set",
        "required node affinity cannot be set: Phased places each worker",
    ),
    InvalidCase(
        "a template cannot choose the restart policy",
        job(_set("spec.template.spec", {"restartPolicy": "Always"})),
        "spec.template.spec: restartPolicy cannot be set",
        "restartPolicy cannot be set: workers run with Never and Phased restarts them",
    ),
    InvalidCase(
        "a template cannot name the pod's host",
        job(_set("spec.phases[0].template", {"spec": {"subdomain": "mine"}})),
        "spec.phases[0].template.spec: hostname, hostnameOverride and subdomain cannot be set",
        "hostname, hostnameOverride and subdomain cannot be set",
    ),
    InvalidCase(
        "the worker container cannot set the rank environment",
        job(
            _set(
                "spec.phases[1].template",
                {"spec": {"containers": [{"name": "worker", "env": [{"name": "PET_NNODES"}]}]}},
            )
        ),
        "spec.phases[1].template.spec: the worker's env may not set PHASED_*, PET_*",
        "the worker's env may not set PHASED_*, PET_* nor RANK, WORLD_SIZE",
    ),
    InvalidCase(
        "the template's env cannot set the rank environment",
        job(_set("spec.template.env", [{"name": "WORLD_SIZE", "value": "3"}])),
        "spec.template.env: the worker's env may not set PHASED_*, PET_*",
        "the worker's env may not set PHASED_*, PET_* nor RANK, WORLD_SIZE",
    ),
    InvalidCase(
        "the template's env cannot set Phased's own variables",
        job(_set("spec.phases[0].template", {"env": [{"name": "PHASED_RANK", "value": "3"}]})),
        "spec.phases[0].template.env: the worker's env may not set PHASED_*, PET_*",
        "the worker's env may not set PHASED_*, PET_* nor RANK, WORLD_SIZE",
    ),
    InvalidCase(
        "phased.dev labels are Phased's",
        job(_set("spec.template.labels", {"phased.dev/rank": "0"})),
        "spec.template.labels: labels under phased.dev/ are Phased's own and cannot be set",
        "labels under phased.dev/ are Phased's own and cannot be set",
    ),
    InvalidCase(
        "a label key is a qualified name",
        job(_set("spec.phases[1].template", {"labels": {"team name": "x"}})),
        "spec.phases[1].template.labels: label keys must be qualified names",
        "label keys must be qualified names",
    ),
    InvalidCase(
        "a label value is a label value",
        job(_set("spec.template.labels", {"team": "-x"})),
        "spec.template.labels.team: String should match pattern",
        "spec.template.labels.team in body should match",
    ),
    InvalidCase(
        "a pod spec field has the API server's type",
        job(_set("spec.template.spec", {"hostNetwork": "yes"})),
        "spec.template.spec: hostNetwork: must be of type boolean",
        "spec.template.spec.hostNetwork: Invalid value",
    ),
    InvalidCase(
        "a pod spec has no made-up fields",
        job(_set("spec.template.spec", {"volumes": [{"name": "d", "emptyDri": {}}]})),
        "spec.template.spec: volumes[0]: unknown field 'emptyDri'",
        'unknown field "spec.template.spec.volumes[0].emptyDri"',
    ),
    InvalidCase(
        "containers are merged by name, so a name is required",
        job(_set("spec.template.spec", {"containers": [{"image": "sidecar:1"}]})),
        "spec.template.spec: containers[0].name: required",
        "spec.template.spec.containers[0].name: Required value",
    ),
    InvalidCase(
        "volumes are merged by name, so a name appears once",
        job(
            _set(
                "spec.template.spec",
                {"volumes": [{"name": "d", "emptyDir": {}}, {"name": "d", "emptyDir": {}}]},
            )
        ),
        "spec.template.spec: volumes: repeated name",
        "spec.template.spec.volumes[1]: Duplicate value",
    ),
    InvalidCase(
        "an env var's source has the API server's shape",
        job(
            _set(
                "spec.template.env",
                [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": 3}}}],
            )
        ),
        "spec.template.env[0].valueFrom: secretKeyRef.key: must be of type string",
        "spec.template.env[0].valueFrom.secretKeyRef.key: Invalid value",
    ),
    # --- launcher ------------------------------------------------------------------------------
    InvalidCase(
        "a c10d rendezvous is torchrun's",
        job(_set("spec.launcher", {"type": "MindSpore", "rendezvous": "C10d"})),
        "spec.launcher: launcher.rendezvous C10d needs launcher.type Torchrun",
        "launcher.rendezvous C10d needs launcher.type Torchrun",
    ),
    InvalidCase(
        "the launcher is one of the known ones",
        job(_set("spec.phases[1].launcher", {"type": "deepspeed"})),
        "spec.phases[1].launcher.type: Input should be 'Plain', 'Torchrun' or 'MindSpore'",
        "spec.phases[1].launcher.type: Unsupported value",
    ),
    # --- durations ---------------------------------------------------------------------------
    InvalidCase(
        "a duration is written with units, not words",
        job(_set("spec.phases[1].maxDuration", "80 days")),
        "spec.phases[1].maxDuration: String should match pattern",
        "spec.phases[1].maxDuration in body should match",
    ),
    InvalidCase(
        "weeks are not a duration unit",
        job(_set("spec.phases[1].expectedDuration", "10w")),
        "spec.phases[1].expectedDuration: String should match pattern",
        "spec.phases[1].expectedDuration in body should match",
    ),
    InvalidCase(
        "a phase is not expected to outlast its limit",
        job(
            _set("spec.phases[1].maxDuration", "70d"),
            _set("spec.phases[1].expectedDuration", "1680h1m"),
        ),
        "expectedDuration (1680h1m) must not exceed maxDuration (70d)",
        "a phase's expectedDuration must not exceed its maxDuration",
    ),
    InvalidCase(
        "a completion mode is one of the known ones",
        job(_set("spec.phases[1].completion", {"mode": "AnySucceeded"})),
        "spec.phases[1].completion.mode: Input should be 'AllSucceeded' or 'RankZeroSucceeded'",
        'spec.phases[1].completion.mode: Unsupported value: "AnySucceeded"',
    ),
    # --- spares ------------------------------------------------------------------------------
    InvalidCase(
        "at most 200 spares",
        job(_set("spec.spares", {"count": 201})),
        "spec.spares.count: Input should be less than or equal to 200",
        "spec.spares.count in body should be less than or equal to 200",
    ),
    InvalidCase(
        "a negative spare count is refused",
        job(_set("spec.spares", {"count": -1})),
        "spec.spares.count: Input should be greater than or equal to 0",
        "spec.spares.count in body should be greater than or equal to 0",
    ),
    InvalidCase(
        "spares are reserved or preemptible",
        job(_set("spec.spares", {"count": 2, "whileIdle": "Shared"})),
        "spec.spares.whileIdle: Input should be 'Reserved' or 'Preemptible'",
        'spec.spares.whileIdle: Unsupported value: "Shared"',
    ),
    # --- failure policy ----------------------------------------------------------------------
    InvalidCase(
        "a NotReady grace longer than a day is refused",
        job(_set("spec.failurePolicy", {"notReadyGrace": "2d"})),
        "failurePolicy.notReadyGrace must be at most 1d, got 2d",
        "failurePolicy.notReadyGrace must be at most 1d",
    ),
    InvalidCase(
        "a GPU-drop grace longer than a day is refused",
        job(_set("spec.failurePolicy", {"gpuDropGrace": "24h1s"})),
        "failurePolicy.gpuDropGrace must be at most 1d, got 24h1s",
        "failurePolicy.gpuDropGrace must be at most 1d",
    ),
    InvalidCase(
        "a pending grace longer than a day is refused",
        job(_set("spec.failurePolicy", {"pendingGrace": "25h"})),
        "failurePolicy.pendingGrace must be at most 1d, got 25h",
        "failurePolicy.pendingGrace must be at most 1d",
    ),
    InvalidCase(
        "the admission timeout action is Wait or Fail",
        job(_set("spec.admission", {"onTimeout": "Retry"})),
        "spec.admission.onTimeout: Input should be 'Wait' or 'Fail'",
        'spec.admission.onTimeout: Unsupported value: "Retry"',
    ),
    InvalidCase(
        "the restart scope is Gang or Worker",
        job(_set("spec.failurePolicy", {"restartScope": "Node"})),
        "spec.failurePolicy.restartScope: Input should be 'Gang' or 'Worker'",
        'spec.failurePolicy.restartScope: Unsupported value: "Node"',
    ),
    InvalidCase(
        "a worker-scope restart needs a launcher a lost rank can rejoin",
        job(_set("spec.failurePolicy", {"restartScope": "Worker"})),
        "failurePolicy.restartScope Worker needs a launcher a lost rank can rejoin",
        "failurePolicy.restartScope Worker needs a launcher a lost rank can rejoin",
    ),
    InvalidCase(
        "a worker-scope restart under torchrun needs its c10d rendezvous",
        job(
            _set("spec.failurePolicy", {"restartScope": "Worker"}),
            _set("spec.launcher", {"type": "Torchrun"}),
        ),
        "launcher.type Torchrun with launcher.rendezvous C10d",
        "launcher.type Torchrun with launcher.rendezvous C10d",
    ),
    InvalidCase(
        "a worker-scope restart needs every phase's own launcher to rejoin too",
        job(
            _set("spec.failurePolicy", {"restartScope": "Worker"}),
            _set("spec.launcher", {"type": "Torchrun", "rendezvous": "C10d"}),
            _set("spec.phases[1].launcher", {"type": "Torchrun"}),
        ),
        "in spec.launcher and in every phase's own launcher",
        "in spec.launcher and in every phase's own launcher",
    ),
    InvalidCase(
        "the checkpoint and report volume names are Phased's",
        job(_set("spec.template.spec", {"volumes": [{"name": "phased-report", "emptyDir": {}}]})),
        "spec.template.spec: volumes named phased-checkpoints or phased-report cannot be set",
        "volumes named phased-checkpoints or phased-report cannot be set",
    ),
    InvalidCase(
        "the worker cannot mount anything where the report token goes",
        job(
            _set(
                "spec.phases[1].template.spec",
                {
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                    "containers": [
                        {
                            "name": "worker",
                            "volumeMounts": [
                                {"name": "scratch", "mountPath": "/var/run/phased/report"}
                            ],
                        }
                    ],
                },
            )
        ),
        "spec.phases[1].template.spec: the worker may not mount anything at /var/run/phased/report",
        "the worker may not mount anything at /var/run/phased/report",
    ),
    InvalidCase(
        "survivors get at most an hour to stop",
        job(_set("spec.failurePolicy", {"survivorGracePeriod": "2h"})),
        "failurePolicy.survivorGracePeriod must be at most 1h",
        "failurePolicy.survivorGracePeriod must be at most 1h",
    ),
    InvalidCase(
        "the launcher is one Phased knows",
        job(_set("spec.launcher", {"type": "mpirun"})),
        "spec.launcher.type: Input should be 'Plain', 'Torchrun' or 'MindSpore'",
        'spec.launcher.type: Unsupported value: "mpirun"',
    ),
    # --- checkpoints ---------------------------------------------------------------------------
    InvalidCase(
        "a checkpoint volume is an existing claim or a new one, not both",
        job(_set("spec.checkpoint", {"volume": {"claimName": "ckpt", "size": "1Ti"}})),
        "checkpoint.volume needs exactly one of claimName",
        "checkpoint.volume needs exactly one of claimName",
    ),
    InvalidCase(
        "a checkpoint volume names its claim or its size",
        job(_set("spec.checkpoint", {"volume": {"accessMode": "ReadWriteOnce"}})),
        "checkpoint.volume needs exactly one of claimName",
        "checkpoint.volume needs exactly one of claimName",
    ),
    InvalidCase(
        "a storage class is only for a claim Phased creates",
        job(_set("spec.checkpoint", {"volume": {"claimName": "ckpt", "storageClassName": "fast"}})),
        "checkpoint.volume.storageClassName is only for a claim Phased creates",
        "checkpoint.volume.storageClassName is only for a claim Phased creates",
    ),
    InvalidCase(
        "the final checkpoint is awaited at most a day",
        job(_set("spec.checkpoint", {"report": True, "finalTimeout": "2d"})),
        "checkpoint.finalTimeout must be at most 1d",
        "checkpoint.finalTimeout must be at most 1d",
    ),
    InvalidCase(
        "the checkpoint claim is named as Kubernetes names claims",
        job(_set("spec.checkpoint", {"volume": {"claimName": "Ckpt_1"}})),
        "spec.checkpoint.volume.claimName: String should match pattern",
        "spec.checkpoint.volume.claimName in body should match",
    ),
    InvalidCase(
        "the restart budget is bounded",
        job(_set("spec.failurePolicy", {"restartBudget": 10001})),
        "spec.failurePolicy.restartBudget: Input should be less than or equal to 10000",
        "spec.failurePolicy.restartBudget in body should be less than or equal to 10000",
    ),
    InvalidCase(
        "the mass-failure breaker cannot trip at zero percent",
        job(_set("spec.failurePolicy", {"massFailure": {"maxFailedPercent": 0}})),
        "spec.failurePolicy.massFailure.maxFailedPercent: Input should be greater than or equal"
        " to 1",
        "spec.failurePolicy.massFailure.maxFailedPercent in body should be greater than or "
        "equal to 1",
    ),
    InvalidCase(
        "a share of the pool is at most 100 percent",
        job(_set("spec.failurePolicy", {"massFailure": {"maxFailedPercent": 101}})),
        "spec.failurePolicy.massFailure.maxFailedPercent: Input should be less than or equal to"
        " 100",
        "spec.failurePolicy.massFailure.maxFailedPercent in body should be less than or equal "
        "to 100",
    ),
    InvalidCase(
        "one trouble is a blip, never flapping",
        job(_set("spec.failurePolicy", {"flapping": {"troubles": 1}})),
        "spec.failurePolicy.flapping.troubles: Input should be greater than or equal to 2",
        "spec.failurePolicy.flapping.troubles in body should be greater than or equal to 2",
    ),
    InvalidCase(
        "flap detection remembers at most ten troubles a node",
        job(_set("spec.failurePolicy", {"flapping": {"troubles": 11}})),
        "spec.failurePolicy.flapping.troubles: Input should be less than or equal to 10",
        "spec.failurePolicy.flapping.troubles in body should be less than or equal to 10",
    ),
    InvalidCase(
        "a returning node is quarantined or returned to the spares",
        job(_set("spec.failurePolicy", {"nodeReturn": "Release"})),
        "spec.failurePolicy.nodeReturn: Input should be 'Quarantine' or 'ReturnToSpares'",
        'spec.failurePolicy.nodeReturn: Unsupported value: "Release"',
    ),
    InvalidCase(
        "a GPU-fault condition is a condition type",
        job(_set("spec.failurePolicy", {"gpuFaultConditions": ["GPU Xid"]})),
        "spec.failurePolicy.gpuFaultConditions[0]: String should match pattern",
        "spec.failurePolicy.gpuFaultConditions[0] in body should match",
    ),
    # --- checkpoints, priority, name ---------------------------------------------------------
    InvalidCase(
        "checkpoints at most every minute",
        job(_set("spec.checkpoint", {"interval": "30s"})),
        "spec: checkpoint.interval must be at least 1m",
        "checkpoint.interval must be at least 1m",
    ),
    InvalidCase(
        "the checkpoint path is absolute",
        job(_set("spec.checkpoint", {"path": "checkpoints"})),
        "spec.checkpoint.path: String should match pattern '^/'",
        "spec.checkpoint.path in body should match '^/'",
    ),
    InvalidCase(
        "priority is bounded",
        job(_set("spec.priority", 1001)),
        "spec.priority: Input should be less than or equal to 1000",
        "spec.priority in body should be less than or equal to 1000",
    ),
    InvalidCase(
        "priority is a number",
        job(_set("spec.priority", "high")),
        "spec.priority: Input should be a valid integer",
        "spec.priority in body must be of type integer",
    ),
    InvalidCase(
        "a job name leaves room for phase and rank in pod names",
        job(_set("metadata.name", "a-very-long-training-job-name-x")),
        "metadata.name: String should have at most 30 characters",
        "metadata.name must be a DNS label of at most 30 characters",
    ),
]


VALID_CASES: list[ValidCase] = [
    ValidCase("the small valid job", valid_job()),
    ValidCase(
        "one phase on one node",
        job(_set("spec.phases", [_phase("train")])),
    ),
    ValidCase(
        "eight phases",
        job(_set("spec.phases", [_phase(f"p{i}") for i in range(8)])),
    ),
    ValidCase(
        "the largest pool, 16 GPUs a node",
        job(
            _set("spec.phases[1].nodes", {"min": 5000, "max": 5000}),
            _set("spec.phases[1].gpusPerNode", 16),
        ),
    ),
    ValidCase(
        "names at their limits",
        job(
            _set("metadata.name", "a" * 30),
            _set("spec.phases[0].name", "p"),
            _set("spec.phases[1].name", "a" * 19 + "z"),
        ),
    ),
    ValidCase(
        "the image only on each phase",
        job(
            _drop("spec.template"),
            _set("spec.phases[0].template", {"image": "prep:1"}),
            _set("spec.phases[1].template", {"image": "trainer:1"}),
        ),
    ),
    ValidCase(
        "durations at their limits",
        job(
            _set("spec.phases[1].maxDuration", "70d"),
            _set("spec.phases[1].expectedDuration", "1680h"),
            _set("spec.failurePolicy", {"notReadyGrace": "1d", "gpuDropGrace": "23h59m60s"}),
            _set("spec.checkpoint", {"interval": "60s"}),
        ),
    ),
    ValidCase(
        "every GPU type, every knob set",
        job(
            _set("spec.phases[1].gpuTypes", ["Ascend910B", "H200", "H100"]),
            _set("spec.phases[1].completion", {"mode": "RankZeroSucceeded"}),
            _set("spec.spares", {"count": 200, "whileIdle": "Preemptible"}),
            _set(
                "spec.failurePolicy",
                {
                    "restartScope": "Worker",
                    "restartBudget": 0,
                    "nodeReturn": "ReturnToSpares",
                    "massFailure": {"maxFailedPercent": 100, "window": "1m"},
                    "flapping": {"troubles": 10, "window": "0s"},
                    "gpuFaultConditions": [],
                    "survivorGracePeriod": "1h",
                },
            ),
            _set("spec.launcher", {"type": "Torchrun", "rendezvous": "C10d"}),
            _set(
                "spec.checkpoint",
                {
                    "interval": "30m",
                    "report": True,
                    "finalTimeout": "1d",
                    "volume": {
                        "size": "2Ti",
                        "storageClassName": "fast.nfs",
                        "accessMode": "ReadWriteOnce",
                    },
                },
            ),
            _set("spec.priority", -1000),
            _set(
                "spec.template.resources",
                {"requests": {"cpu": "96", "memory": "1500Gi"}, "limits": {"cpu": "500m"}},
            ),
        ),
    ),
    ValidCase(
        "an existing checkpoint claim",
        job(_set("spec.checkpoint", {"volume": {"claimName": "team-a.checkpoints"}})),
    ),
    ValidCase(
        "a full pod spec: volumes, shm, secrets, sidecars, RDMA, tolerations, affinity terms",
        job(
            _set("spec.launcher", {"type": "Torchrun", "rendezvous": "C10d", "port": 29400}),
            _set("spec.phases[1].launcher", {"type": "Torchrun", "procsPerNode": 4}),
            _set("spec.template.labels", {"team": "llm", "example.com/cost-center": "42"}),
            _set(
                "spec.template.env",
                [
                    {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                ],
            ),
            _set("spec.template.spec", full_pod_spec()),
            _set(
                "spec.phases[1].template.spec",
                {"containers": [{"name": "worker", "resources": {"limits": {"rdma/hca": "1"}}}]},
            ),
        ),
    ),
    ValidCase(
        "the image only in the worker container of the pod spec",
        job(
            _drop("spec.template"),
            _set(
                "spec.template.spec",
                {"containers": [{"name": "worker", "image": "trainer:1"}]},
            ),
        ),
    ),
    ValidCase(
        "annotation keys and resource names at their limits",
        job(
            _set(
                "spec.template.annotations",
                {"a" * 253 + "/" + "x" * 63: "v", "example.com/Run_1.2": "v", "Z": ""},
            ),
            _set(
                "spec.template.resources",
                {"requests": {"hugepages-2Mi": "1Gi", "example.com/fpga": "1"}},
            ),
        ),
    ),
]


# --- edits of a job that has started ---------------------------------------------------------
#
# Each edit case is ``(id, status, after, model_error, api_error)``: the job is created as
# :func:`running_job`, its status is written as ``status`` (through the status subresource,
# as the operator would), then ``after`` is applied over it. ``api_error`` is a substring of
# the API server's refusal (a transition rule's message), ``model_error`` of what the
# operator's re-check (:func:`phased.core.edits.edit_problems`) says about ``after`` given
# ``status``; both are ``None`` for an edit that must be accepted.

PHASES_MESSAGE = "a phase that has started or run cannot be removed, renamed or reordered"
SHAPE_MESSAGE = "the running phase's GPU shape (gpusPerNode, gpuTypes) cannot change"
PLACE_MESSAGE = "where checkpoints are (checkpoint.volume's claim, checkpoint.path) cannot move"


class EditCase(NamedTuple):
    id: str
    status: Manifest
    after: Manifest
    model_error: str | None
    api_error: str | None
    field: str = "spec.phases"  # the field the API server's refusal names (the rule's fieldPath)


def running_job() -> Manifest:
    """Three phases: preprocess (CPU) ran, train runs on H100, validate is still to come."""
    doc = valid_job()
    doc["metadata"]["name"] = "edited"
    doc["spec"]["spares"] = {"count": 2}
    doc["spec"]["phases"].append(
        {"name": "validate", "nodes": {"min": 2, "max": 4}, "gpuTypes": ["H100"], "gpusPerNode": 8}
    )
    return doc


def _record(name: str, state: str, **fields: Any) -> Manifest:
    return {"name": name, "state": state, **fields}


STARTED = "2026-03-01T12:00:00Z"
# Where running_job's checkpoints are, as a record says it: no claim, the default path.
PLACE: Manifest = {"checkpointClaim": "", "checkpointPath": "/checkpoints"}
TRAINING: Manifest = {
    "state": "Running",
    "phase": "train",
    "phaseIndex": 1,
    "worldSize": 8,
    "phases": [
        _record(
            "preprocess",
            "Succeeded",
            startTime=STARTED,
            endTime=STARTED,
            gpusPerNode=0,
            **PLACE,
        ),
        _record(
            "train",
            "Running",
            startTime=STARTED,
            gpuType="H100",
            gpusPerNode=8,
            gpuTypes=["H100", "H200"],
            **PLACE,
        ),
        _record("validate", "Pending"),
    ],
}
# Still waiting for capacity in its first phase: nothing has started, nothing is frozen.
WAITING: Manifest = {
    "state": "Waiting",
    "phase": "preprocess",
    "phaseIndex": 0,
    "phases": [_record("preprocess", "Waiting"), _record("train", "Pending")],
}


# Train completed; the job waits for capacity for validate, which has not started.
WAITING_NEXT: Manifest = {
    "state": "Waiting",
    "phase": "validate",
    "phaseIndex": 2,
    "phases": [
        _record("preprocess", "Succeeded", startTime=STARTED, endTime=STARTED, gpusPerNode=0),
        _record(
            "train",
            "Succeeded",
            startTime=STARTED,
            endTime=STARTED,
            gpuType="H100",
            gpusPerNode=8,
            gpuTypes=["H100", "H200"],
            **PLACE,
        ),
        _record("validate", "Waiting"),
    ],
}
# The record of the running phase has its start but not its Running state (a status written
# between the two): the start alone says it started.
STARTED_ONLY: Manifest = {
    **TRAINING,
    "phases": [
        TRAINING["phases"][0],
        {**TRAINING["phases"][1], "state": "Pending"},
        TRAINING["phases"][2],
    ],
}


def edited(*edits: Callable[[Manifest], None]) -> Manifest:
    """:func:`running_job` with ``edits`` applied in order."""
    doc = running_job()
    for edit in edits:
        edit(doc)
    return doc


def _phases(*order: int) -> Callable[[Manifest], None]:
    def edit(doc: Manifest) -> None:
        phases = doc["spec"]["phases"]
        doc["spec"]["phases"] = [phases[i] for i in order]

    return edit


def _insert(index: int, phase: Manifest) -> Callable[[Manifest], None]:
    def edit(doc: Manifest) -> None:
        doc["spec"]["phases"].insert(index, phase)

    return edit


EDIT_CASES: list[EditCase] = [
    # --- refused: what already ran or runs cannot be rewritten ---------------------------------
    EditCase(
        "a phase that ran cannot be removed",
        TRAINING,
        edited(_phases(1, 2)),
        "phase 'preprocess' has already started",
        PHASES_MESSAGE,
    ),
    EditCase(
        "the running phase cannot be renamed",
        TRAINING,
        edited(_set("spec.phases[1].name", "pretrain")),
        "phase 'train' has already started",
        PHASES_MESSAGE,
    ),
    EditCase(
        "the running phase cannot be moved after a later one",
        TRAINING,
        edited(_phases(0, 2, 1)),
        "moved from phase 2 to phase 3",
        PHASES_MESSAGE,
    ),
    EditCase(
        "the running phase cannot be removed",
        TRAINING,
        edited(_phases(0, 2)),
        "phase 'train' has already started",
        PHASES_MESSAGE,
    ),
    EditCase(
        "no phase can be inserted before the running one",
        TRAINING,
        edited(_insert(1, _phase("warmup"))),
        "phase 'train' has already started",
        PHASES_MESSAGE,
    ),
    EditCase(
        "the running phase keeps its gpusPerNode",
        TRAINING,
        edited(_set("spec.phases[1].gpusPerNode", 16)),
        "gpusPerNode 8 (now 16)",
        SHAPE_MESSAGE,
    ),
    EditCase(
        "the running phase keeps its gpuTypes",
        TRAINING,
        edited(_set("spec.phases[1].gpuTypes", ["H100"])),
        "gpuTypes ['H100', 'H200'] (now ['H100'])",
        SHAPE_MESSAGE,
    ),
    EditCase(
        "the running phase keeps the order of its gpuTypes",
        TRAINING,
        edited(_set("spec.phases[1].gpuTypes", ["H200", "H100"])),
        "gpuTypes ['H100', 'H200'] (now ['H200', 'H100'])",
        SHAPE_MESSAGE,
    ),
    EditCase(
        "the running phase cannot become a CPU phase",
        TRAINING,
        edited(_drop("spec.phases[1].gpuTypes"), _set("spec.phases[1].gpusPerNode", 0)),
        "gpusPerNode 8 (now 0)",
        SHAPE_MESSAGE,
    ),
    EditCase(
        "a phase whose record has a start time keeps its name, whatever its state says",
        STARTED_ONLY,
        edited(_set("spec.phases[1].name", "pretrain")),
        "phase 'train' has already started",
        PHASES_MESSAGE,
    ),
    EditCase(
        "the phase that completed last cannot be renamed while the next waits",
        WAITING_NEXT,
        edited(_set("spec.phases[1].name", "pretrain")),
        "phase 'train' has already started",
        PHASES_MESSAGE,
    ),
    EditCase(
        "a started job keeps its checkpoint.path",
        TRAINING,
        edited(_set("spec.checkpoint", {"path": "/elsewhere"})),
        "path '/checkpoints' (now '/elsewhere')",
        PLACE_MESSAGE,
        "spec.checkpoint",
    ),
    EditCase(
        "a started job cannot mount a checkpoint claim it did not start with",
        TRAINING,
        edited(_set("spec.checkpoint", {"volume": {"claimName": "ckpt"}})),
        "claim none (now 'ckpt')",
        PLACE_MESSAGE,
        "spec.checkpoint",
    ),
    EditCase(
        "a job whose last phase completed keeps its checkpoint place while the next waits",
        WAITING_NEXT,
        edited(_set("spec.checkpoint", {"volume": {"size": "1Ti"}})),
        "claim none (now 'edited-checkpoints')",
        PLACE_MESSAGE,
        "spec.checkpoint",
    ),
    # --- accepted: what is still to come, and what the running phase can absorb -------------
    EditCase(
        "a started job may change its checkpoint interval and final timeout",
        TRAINING,
        edited(_set("spec.checkpoint", {"interval": "15m", "finalTimeout": "30m"})),
        None,
        None,
    ),
    EditCase(
        "a job still waiting for its first phase may move its checkpoints",
        WAITING,
        job(
            _set("metadata.name", "edited"),
            _set("spec.checkpoint", {"volume": {"claimName": "ckpt"}, "path": "/ckpt"}),
        ),
        None,
        None,
    ),
    EditCase(
        "a phase may be inserted right after the running one",
        TRAINING,
        edited(_insert(2, _phase("evaluate"))),
        None,
        None,
    ),
    EditCase(
        "the running phase may raise its nodes.min above its world",
        TRAINING,
        edited(_set("spec.phases[1].nodes", {"min": 10, "max": 10})),
        None,
        None,
    ),
    EditCase(
        "the phase a job waits to start may change its GPU shape",
        WAITING_NEXT,
        edited(_set("spec.phases[2].gpusPerNode", 4), _set("spec.phases[2].gpuTypes", ["H200"])),
        None,
        None,
    ),
    EditCase(
        "the phase a job waits to start may be dropped (the job then succeeds)",
        WAITING_NEXT,
        edited(_phases(0, 1)),
        None,
        None,
    ),
    EditCase(
        "the running phase may shrink its nodes.max",
        TRAINING,
        edited(_set("spec.phases[1].nodes", {"min": 4, "max": 6})),
        None,
        None,
    ),
    EditCase(
        "the running phase may grow its nodes.max",
        TRAINING,
        edited(_set("spec.phases[1].nodes.max", 20)),
        None,
        None,
    ),
    EditCase(
        "spares, budgets and priority may change",
        TRAINING,
        edited(
            _set("spec.spares", {"count": 5}),
            _set("spec.failurePolicy", {"restartBudget": 3, "interruptionBudget": "4h"}),
            _set("spec.priority", 10),
        ),
        None,
        None,
    ),
    EditCase(
        "a later phase may change its shape, be removed, or be added",
        TRAINING,
        edited(
            _set("spec.phases[2].gpusPerNode", 4),
            _set("spec.phases[2].name", "evaluate"),
            _insert(3, _phase("export")),
        ),
        None,
        None,
    ),
    EditCase(
        "the phases after the running one may be dropped",
        TRAINING,
        edited(_phases(0, 1)),
        None,
        None,
    ),
    EditCase(
        "the running phase's image may change (its next generation uses it)",
        TRAINING,
        edited(_set("spec.phases[1].template", {"image": "trainer:2"})),
        None,
        None,
    ),
    EditCase(
        "a job still waiting for its first phase may change anything",
        WAITING,
        job(
            _set("metadata.name", "edited"),
            _set("spec.phases[0].name", "tokenize"),
            _set("spec.phases[1].gpusPerNode", 4),
        ),
        None,
        None,
    ),
]
