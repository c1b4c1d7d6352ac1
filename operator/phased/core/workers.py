"""Worker pods and the headless Service, as plain manifests (dicts) for the kube layer.

Names are deterministic (a handler may run twice; ``generateName`` would duplicate workers):

* pod ``<job>-<phase>-g<generation>-<rank>``; a replacement of one rank inside a generation
  (restart scope ``Worker``) appends ``-a<attempt>`` so it never collides with the pod it
  replaces while that one is still terminating. The job part is shortened (with a hash) when
  the name would exceed 63 characters.
* the pod's ``hostname`` is always the attempt-free name and its ``subdomain`` the Service,
  so ``<job>-<phase>-g<generation>-0.<service>.<namespace>.svc`` (``PHASED_MASTER_ADDR``)
  keeps pointing at rank 0 even after rank 0 was replaced.
* the Service is named after the job.

Environment of every worker: ``PHASED_JOB``, ``PHASED_NAMESPACE``, ``PHASED_PHASE``,
``PHASED_RANK``, ``PHASED_WORLD_SIZE``, ``PHASED_MASTER_ADDR``, ``PHASED_MASTER_PORT``,
``PHASED_RESTART_GENERATION``, ``PHASED_RESUME`` ("true" from the first restart of a phase
on), ``PHASED_CHECKPOINT_ROOT`` (``<checkpoint.path>/<job>``, shared by all phases, so a
phase can find the one before), ``PHASED_CHECKPOINT_DIR`` (``<root>/<phase>``: where this
phase writes and resumes from), ``PHASED_CHECKPOINT_INTERVAL_SECONDS``, and the torch-style
``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``. A template may not set any of
these names (nor any other ``PHASED_*``): the job becomes InvalidSpec.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import API_VERSION, KIND, NodeRole, Phase, TrainingJobSpec, WorkerTemplate
from phased.core import labels
from phased.core.model import JobRef

MASTER_PORT = 29500
MAX_NAME = 63
CONTAINER_NAME = "worker"
TORCH_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RESERVED_PREFIX = "PHASED_"


def reserved_env_names(template: WorkerTemplate) -> list[str]:
    """Env names in ``template`` that Phased sets itself (must not be overridden)."""
    return sorted(
        e.name
        for e in template.env or []
        if e.name.startswith(RESERVED_PREFIX) or e.name in TORCH_ENV
    )


def _shorten(prefix: str, suffix: str) -> str:
    """``prefix + suffix`` within 63 characters, hashing the prefix when it must be cut."""
    if len(prefix) + len(suffix) <= MAX_NAME:
        return prefix + suffix
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:6]
    keep = MAX_NAME - len(suffix) - len(digest) - 1
    return f"{prefix[:keep].rstrip('-')}-{digest}{suffix}"


def service_name(job: JobRef) -> str:
    """The headless Service (DNS-1035: a letter first, at most 63 characters)."""
    name = job.name if job.name[:1].isalpha() else f"tj-{job.name}"
    return _shorten(name, "")


def pod_name(job: JobRef, phase: str, generation: int, rank: int, attempt: int = 0) -> str:
    suffix = f"-{phase}-g{generation}-{rank}" + (f"-a{attempt}" if attempt else "")
    return _shorten(job.name, suffix)


def owner_reference(job: JobRef) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def service_manifest(job: JobRef) -> dict[str, Any]:
    """Headless, publishing not-ready addresses: rendezvous works before readiness."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(job),
            "namespace": job.namespace,
            "labels": {
                labels.LABEL_JOB_UID: job.uid,
                labels.LABEL_JOB: job.name,
                labels.LABEL_MANAGED_BY: labels.MANAGED_BY,
            },
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {labels.LABEL_JOB_UID: job.uid},
            "ports": [{"name": "rendezvous", "port": MASTER_PORT, "targetPort": MASTER_PORT}],
        },
    }


@dataclass(frozen=True)
class Worker:
    """Everything that makes one worker pod."""

    job: JobRef
    spec: TrainingJobSpec
    phase: Phase
    generation: int
    rank: int
    world_size: int
    attempt: int = 0
    resource: str | None = None  # the GPU resource; None for a CPU phase
    service_account: str = ""
    restarts: int = 0  # the job's restarts so far, all causes (status.restarts)
    worker_restarts: int = 0  # of which workers failing on healthy nodes (the budget's)

    @property
    def name(self) -> str:
        return pod_name(self.job, self.phase.name, self.generation, self.rank, self.attempt)

    @property
    def hostname(self) -> str:
        return pod_name(self.job, self.phase.name, self.generation, self.rank)

    @property
    def master_addr(self) -> str:
        rank0 = pod_name(self.job, self.phase.name, self.generation, 0)
        return f"{rank0}.{service_name(self.job)}.{self.job.namespace}.svc"

    def labels(self) -> dict[str, str]:
        return {
            labels.LABEL_JOB_UID: self.job.uid,
            labels.LABEL_JOB: self.job.name,
            labels.LABEL_PHASE: self.phase.name,
            labels.LABEL_RANK: str(self.rank),
            labels.LABEL_GENERATION: str(self.generation),
            labels.LABEL_WORLD_SIZE: str(self.world_size),
            labels.LABEL_ATTEMPT: str(self.attempt),
            labels.LABEL_RESTARTS: str(self.restarts),
            labels.LABEL_WORKER_RESTARTS: str(self.worker_restarts),
            labels.LABEL_MANAGED_BY: labels.MANAGED_BY,
        }

    def env(self) -> list[dict[str, str]]:
        root = f"{self.spec.checkpoint.path.rstrip('/')}/{self.job.name}"
        ours = {
            "PHASED_JOB": self.job.name,
            "PHASED_NAMESPACE": self.job.namespace,
            "PHASED_PHASE": self.phase.name,
            "PHASED_RANK": str(self.rank),
            "PHASED_WORLD_SIZE": str(self.world_size),
            "PHASED_MASTER_ADDR": self.master_addr,
            "PHASED_MASTER_PORT": str(MASTER_PORT),
            "PHASED_RESTART_GENERATION": str(self.generation),
            "PHASED_RESUME": "true" if self.generation > 0 or self.attempt > 0 else "false",
            "PHASED_CHECKPOINT_ROOT": root,
            "PHASED_CHECKPOINT_DIR": f"{root}/{self.phase.name}",
            "PHASED_CHECKPOINT_INTERVAL_SECONDS": str(
                parse_duration(self.spec.checkpoint.interval)
            ),
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(MASTER_PORT),
        }
        template = self.spec.worker_template(self.phase)
        theirs = [
            {"name": e.name, "value": e.value} for e in template.env or [] if e.name not in ours
        ]
        return theirs + [{"name": k, "value": v} for k, v in ours.items()]

    def resources(self) -> dict[str, dict[str, str]]:
        template = self.spec.worker_template(self.phase)
        requests = dict(template.resources.requests) if template.resources else {}
        limits = dict(template.resources.limits) if template.resources else {}
        if self.resource is not None:
            requests[self.resource] = str(self.phase.gpus_per_node)
            limits[self.resource] = str(self.phase.gpus_per_node)
        out: dict[str, dict[str, str]] = {}
        if requests:
            out["requests"] = requests
        if limits:
            out["limits"] = limits
        return out

    def container(self) -> dict[str, Any]:
        template = self.spec.worker_template(self.phase)
        container: dict[str, Any] = {
            "name": CONTAINER_NAME,
            "image": template.image,
            "env": self.env(),
            "ports": [{"name": "rendezvous", "containerPort": MASTER_PORT}],
        }
        if template.command is not None:
            container["command"] = list(template.command)
        if template.args is not None:
            container["args"] = list(template.args)
        resources = self.resources()
        if resources:
            container["resources"] = resources
        return container

    def affinity(self) -> dict[str, Any]:
        node_affinity = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": labels.LABEL_JOB_UID,
                                "operator": "In",
                                "values": [self.job.uid],
                            },
                            {
                                "key": labels.LABEL_ROLE,
                                "operator": "In",
                                "values": [NodeRole.ACTIVE.value],
                            },
                        ]
                    }
                ]
            }
        }
        affinity: dict[str, Any] = {"nodeAffinity": node_affinity}
        if self.resource is None:  # CPU phase: nothing else keeps two workers apart
            affinity["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {labels.LABEL_JOB_UID: self.job.uid}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        return affinity

    def manifest(self) -> dict[str, Any]:
        template = self.spec.worker_template(self.phase)
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.job.namespace,
            "labels": self.labels(),
            "ownerReferences": [owner_reference(self.job)],
        }
        if template.annotations:
            metadata["annotations"] = dict(template.annotations)
        spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "automountServiceAccountToken": bool(self.service_account),
            "hostname": self.hostname,
            "subdomain": service_name(self.job),
            "tolerations": [
                {
                    "key": labels.TAINT_POOL,
                    "operator": "Equal",
                    "value": self.job.uid,
                    "effect": "NoSchedule",
                },
                {"key": labels.TAINT_SPARE, "operator": "Exists", "effect": "NoSchedule"},
            ],
            "affinity": self.affinity(),
            "containers": [self.container()],
        }
        if self.service_account:
            spec["serviceAccountName"] = self.service_account
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
