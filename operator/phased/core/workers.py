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

The pod is the phase's template merged over the job's (``TrainingJobSpec.worker_pod``), with
what Phased owns laid over it: the pool's tolerations and required node affinity, the phase's
GPUs on the ``worker`` container, ``restartPolicy: Never``, hostname and subdomain, its labels,
and the environment of the ``worker`` container: ``PHASED_JOB``, ``PHASED_NAMESPACE``,
``PHASED_PHASE``, ``PHASED_RANK``, ``PHASED_WORLD_SIZE``, ``PHASED_PROCS_PER_NODE``,
``PHASED_MASTER_ADDR``, ``PHASED_MASTER_PORT``, ``PHASED_RESTART_GENERATION``,
``PHASED_RESUME`` ("true" from the first restart of a phase on), ``PHASED_CHECKPOINT_ROOT``
(``<checkpoint.path>/<job>``, shared by all phases, so a phase can find the one before),
``PHASED_CHECKPOINT_DIR`` (``<root>/<phase>``: where this phase writes and resumes from),
``PHASED_CHECKPOINT_INTERVAL_SECONDS``, and the launcher's (``LAUNCHER_ENV``): ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` (Plain); ``PET_*`` (Torchrun); ``MS_*`` and
``RANK_SIZE`` (MindSpore). A template may not set these names (see phased.api.podtemplate).

Checkpoints (see :mod:`phased.core.checkpoints`): ``PHASED_ATTEMPT`` (the replacement number
of the rank within its generation); with ``checkpoint.volume`` the claim is mounted at
``checkpoint.path`` (volume ``phased-checkpoints``); with ``checkpoint.report`` the
report-token Secret is mounted read-only at ``REPORT_MOUNT`` (volume ``phased-report``),
``PHASED_REPORT_URL`` / ``PHASED_REPORT_TOKEN_FILE`` tell the worker helper
(``phased_worker``) where to report, and the label ``phased.dev/reporting`` says whether the
worker was made so (``true``/``false``: reports are judged only for workers that can make
them), the label ``phased.dev/checkpoint-interval`` the interval it was told (in seconds:
its generation is judged stale by it), and the label ``phased.dev/worker-spec`` is a digest
of what the spec made it from (:func:`worker_spec`); when the phase has a reported checkpoint,
``PHASED_RESUME_FROM`` (its path) and ``PHASED_RESUME_STEP`` say what to resume from, and
the label ``phased.dev/resume-step`` keeps the step (the ledger reads it back). A
template may not use these volume names nor mount anything at ``REPORT_MOUNT``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from phased.api.durations import parse_duration
from phased.api.podtemplate import CHECKPOINT_VOLUME, REPORT_MOUNT, REPORT_VOLUME, WORKER_CONTAINER
from phased.api.v1alpha1 import (
    API_VERSION,
    KIND,
    CheckpointRecord,
    Launcher,
    LauncherType,
    NodeRole,
    Phase,
    Rendezvous,
    TrainingJobSpec,
)
from phased.core import labels
from phased.core.model import JobRef

MASTER_PORT = 29500  # the Service's port; the launcher's port is what workers use
MAX_NAME = 63
PORT_NAME = "rendezvous"
TOKEN_KEY = "token"  # noqa: S105 - the key inside the Secret, not a token


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


def worker_spec(spec: TrainingJobSpec, phase: Phase) -> str:
    """A digest of what ``spec`` makes every worker of ``phase`` from, whatever its rank,
    generation or attempt: the merged template (image, env, volumes, resources, tolerations,
    affinity terms, labels, annotations...), the launcher, the GPUs per node and what the
    checkpoint settings put in it (:func:`_checkpoint_made`). ``checkpoint.report`` is left
    out: whether a worker can report has its own label and rule
    (:mod:`phased.core.checkpoints`), and ``checkpoint.finalTimeout`` is the operator's
    alone."""
    return _digest(_made(spec, phase, _checkpoint_made(spec)))


def worker_specs(spec: TrainingJobSpec, phase: Phase) -> frozenset[str]:
    """The ``phased.dev/worker-spec`` labels a worker made from ``spec`` may carry: the one
    :func:`worker_spec` writes, and the one an operator from before it wrote, which took
    the whole ``checkpoint`` section (the claim's size, storage class and access mode too)
    — so an upgrade does not take every running worker for one made before an edit."""
    whole = spec.checkpoint.model_dump(
        mode="json", by_alias=True, exclude={"report", "final_timeout"}
    )
    return frozenset({worker_spec(spec, phase), _digest(_made(spec, phase, whole))})


def _checkpoint_made(spec: TrainingJobSpec) -> dict[str, Any]:
    """What the checkpoint settings put in a worker: the interval it is told (in seconds,
    as it is told it), the path the claim is mounted at, and which claim — the one named
    (``claimName``), or the job's own (``<job>-checkpoints``), whatever its ``size``,
    ``storageClassName`` and ``accessMode``: that claim is made once and never remade, so an
    edit of them makes no worker otherwise."""
    volume = spec.checkpoint.volume
    return {
        "intervalSeconds": parse_duration(spec.checkpoint.interval),
        "path": spec.checkpoint.path,
        "volume": None if volume is None else {"claimName": volume.claim_name},
    }


def _made(spec: TrainingJobSpec, phase: Phase, checkpoint: dict[str, Any]) -> dict[str, Any]:
    pod = spec.worker_pod(phase)
    return {
        "labels": pod.labels,
        "annotations": pod.annotations,
        "spec": pod.spec,
        "launcher": spec.launcher_of(phase).model_dump(mode="json", by_alias=True),
        "gpusPerNode": phase.gpus_per_node,
        "checkpoint": checkpoint,
    }


def _digest(made: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()[:16]


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
    claim: str | None = None  # the checkpoint claim, mounted at checkpoint.path
    report_url: str | None = None  # set when the job's workers report checkpoints
    report_secret: str | None = None  # the Secret holding the report token
    # settings.installation: the workers land only on nodes carrying it, or on one of
    # legacy_nodes: the active nodes the job holds that a Phased from before installations
    # claimed (no installation label, the claim's claimed-at: Draft.legacy_active)
    installation: str = ""
    legacy_nodes: tuple[str, ...] = ()
    resume: CheckpointRecord | None = None  # the checkpoint a new worker resumes from

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
            labels.LABEL_REPORTING: "true" if self.reporting else "false",
            labels.LABEL_WORKER_SPEC: worker_spec(self.spec, self.phase),
            labels.LABEL_CHECKPOINT_INTERVAL: str(parse_duration(self.spec.checkpoint.interval)),
            labels.LABEL_GPUS_PER_NODE: str(self.phase.gpus_per_node),
            labels.LABEL_GPU_TYPES: labels.GPU_TYPES_SEPARATOR.join(
                t.value for t in self.phase.gpu_types
            ),
            labels.LABEL_MANAGED_BY: labels.MANAGED_BY,
        } | ({labels.LABEL_RESUME_STEP: str(self.resume.step)} if self.resume is not None else {})

    @property
    def reporting(self) -> bool:
        """The worker gets the report endpoint and the token file: it can report."""
        return self.report_url is not None and self.report_secret is not None

    @property
    def launcher(self) -> Launcher:
        return self.spec.launcher_of(self.phase)

    @property
    def procs_per_node(self) -> int:
        return self.launcher.procs_per_node or self.phase.gpus_per_node or 1

    def env(self) -> dict[str, str]:
        """What Phased sets on the worker container (see the module docstring)."""
        root = f"{self.spec.checkpoint.path.rstrip('/')}/{self.job.name}"
        port = str(self.launcher.port)
        ours = {
            "PHASED_JOB": self.job.name,
            "PHASED_NAMESPACE": self.job.namespace,
            "PHASED_PHASE": self.phase.name,
            "PHASED_RANK": str(self.rank),
            "PHASED_WORLD_SIZE": str(self.world_size),
            "PHASED_PROCS_PER_NODE": str(self.procs_per_node),
            "PHASED_MASTER_ADDR": self.master_addr,
            "PHASED_MASTER_PORT": port,
            "PHASED_RESTART_GENERATION": str(self.generation),
            "PHASED_RESUME": "true" if self.generation > 0 or self.attempt > 0 else "false",
            "PHASED_CHECKPOINT_ROOT": root,
            "PHASED_CHECKPOINT_DIR": f"{root}/{self.phase.name}",
            "PHASED_CHECKPOINT_INTERVAL_SECONDS": str(
                parse_duration(self.spec.checkpoint.interval)
            ),
            "PHASED_ATTEMPT": str(self.attempt),
        }
        if self.resume is not None:
            ours["PHASED_RESUME_FROM"] = self.resume.path
            ours["PHASED_RESUME_STEP"] = str(self.resume.step)
        if self.report_url is not None and self.report_secret is not None:
            ours["PHASED_REPORT_URL"] = self.report_url
            ours["PHASED_REPORT_TOKEN_FILE"] = f"{REPORT_MOUNT}/{TOKEN_KEY}"
        return ours | LAUNCHER_ENV[self.launcher.type](self)

    def container(self, worker: dict[str, Any]) -> dict[str, Any]:
        """The template's worker container with Phased's env, GPUs and rendezvous port."""
        container = copy.deepcopy(worker)
        ours = self.env()
        theirs = [e for e in container.get("env") or [] if e.get("name") not in ours]
        container["env"] = theirs + [{"name": k, "value": v} for k, v in ours.items()]
        if self.resource is not None:
            resources = container.setdefault("resources", {})
            for kind in ("requests", "limits"):
                resources[kind] = {
                    **resources.get(kind, {}),
                    self.resource: str(self.phase.gpus_per_node),
                }
        port = self.launcher.port
        ports = container.get("ports") or []
        if not any(p.get("containerPort") == port or p.get("name") == PORT_NAME for p in ports):
            container["ports"] = [*ports, {"name": PORT_NAME, "containerPort": port}]
        mounts = [{"name": v["name"], **m} for v, m in self._volumes()]
        if mounts:
            container["volumeMounts"] = [*(container.get("volumeMounts") or []), *mounts]
        return container

    def _volumes(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(volume, mount) pairs for the checkpoint claim and the report token."""
        out: list[tuple[dict[str, Any], dict[str, Any]]] = []
        if self.claim is not None:
            out.append(
                (
                    {"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": self.claim}},
                    {"mountPath": self.spec.checkpoint.path},
                )
            )
        if self.report_url is not None and self.report_secret is not None:
            secret = {
                "secretName": self.report_secret,
                "defaultMode": 0o444,
                "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}],
            }
            out.append(
                (
                    {"name": REPORT_VOLUME, "secret": secret},
                    {"mountPath": REPORT_MOUNT, "readOnly": True},
                )
            )
        return out

    def _node_terms(self) -> list[dict[str, Any]]:
        """The nodes a worker may land on: those its job holds as active
        (:func:`phased.core.ownership.holds`) — the job's UID, the active role, and this
        installation's name. A node with the job's UID and role under another installation's
        name is not the job's: the job moves its worker off it, and the scheduler must not put
        the next one back (a gang restart on every pass).

        A node claimed by a Phased from before installations has no installation label; its
        job holds it because it also carries ``claimed-at``, which the scheduler cannot read.
        Such nodes are named (``matchFields`` on ``metadata.name``, :attr:`legacy_nodes`), so
        a node a person gave the job's labels by hand, without the installation label, never
        takes a worker. With none, there is no such term."""
        held: list[dict[str, Any]] = [
            {"key": labels.LABEL_JOB_UID, "operator": "In", "values": [self.job.uid]},
            {"key": labels.LABEL_ROLE, "operator": "In", "values": [NodeRole.ACTIVE.value]},
        ]
        ours: dict[str, Any] = {
            "matchExpressions": [
                *held,
                {"key": labels.LABEL_INSTALLATION, "operator": "In", "values": [self.installation]},
            ]
        }
        if not self.legacy_nodes:
            return [ours]
        legacy: dict[str, Any] = {
            "matchExpressions": [
                *held,
                {"key": labels.LABEL_INSTALLATION, "operator": "DoesNotExist"},
            ],
            "matchFields": [
                {"key": "metadata.name", "operator": "In", "values": list(self.legacy_nodes)}
            ],
        }
        return [ours, legacy]

    def affinity(self, theirs: dict[str, Any] | None = None) -> dict[str, Any]:
        """Phased's placement on the pool, with the template's own terms added to it.

        Required node affinity is Phased's alone (the template cannot set it); preferred node
        terms, pod affinity and pod anti-affinity of the template are kept beside Phased's.
        """
        affinity = copy.deepcopy(theirs or {})
        node_affinity = affinity.setdefault("nodeAffinity", {})
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": self._node_terms()
        }
        if self.resource is None:  # CPU phase: nothing else keeps two workers apart
            anti = affinity.setdefault("podAntiAffinity", {})
            anti["requiredDuringSchedulingIgnoredDuringExecution"] = [
                {
                    "labelSelector": {"matchLabels": {labels.LABEL_JOB_UID: self.job.uid}},
                    "topologyKey": "kubernetes.io/hostname",
                },
                *anti.get("requiredDuringSchedulingIgnoredDuringExecution", []),
            ]
        return affinity

    def manifest(self) -> dict[str, Any]:
        pod = self.spec.worker_pod(self.phase)
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.job.namespace,
            "labels": {**pod.labels, **self.labels()},
            "ownerReferences": [owner_reference(self.job)],
        }
        if pod.annotations:
            metadata["annotations"] = dict(pod.annotations)
        spec = copy.deepcopy(pod.spec)
        spec["containers"] = [
            self.container(c) if c.get("name") == WORKER_CONTAINER else c
            for c in spec["containers"]
        ]
        spec.update(
            restartPolicy="Never",
            hostname=self.hostname,
            subdomain=service_name(self.job),
            tolerations=[
                {
                    "key": labels.TAINT_POOL,
                    "operator": "Equal",
                    "value": self.job.uid,
                    "effect": "NoSchedule",
                },
                {"key": labels.TAINT_SPARE, "operator": "Exists", "effect": "NoSchedule"},
                *spec.get("tolerations", []),
            ],
            affinity=self.affinity(spec.get("affinity") or {}),
        )
        volumes = [v for v, _ in self._volumes()]
        if volumes:
            spec["volumes"] = [*(spec.get("volumes") or []), *volumes]
        if self.service_account and "serviceAccountName" not in spec:
            spec["serviceAccountName"] = self.service_account
        spec.setdefault("automountServiceAccountToken", "serviceAccountName" in spec)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _plain_env(worker: Worker) -> dict[str, str]:
    return {
        "RANK": str(worker.rank),
        "WORLD_SIZE": str(worker.world_size),
        "MASTER_ADDR": worker.master_addr,
        "MASTER_PORT": str(worker.launcher.port),
    }


def _torchrun_env(worker: Worker) -> dict[str, str]:
    """The variables torchrun reads for its flags (``PET_<FLAG>``)."""
    env = {
        "PET_NNODES": str(worker.world_size),
        "PET_NPROC_PER_NODE": str(worker.procs_per_node),
    }
    if worker.launcher.rendezvous == Rendezvous.C10D:
        return env | {
            "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ENDPOINT": f"{worker.master_addr}:{worker.launcher.port}",
            "PET_RDZV_ID": f"{worker.job.uid}-g{worker.generation}",
        }
    return env | {
        "PET_NODE_RANK": str(worker.rank),
        "PET_MASTER_ADDR": worker.master_addr,
        "PET_MASTER_PORT": str(worker.launcher.port),
    }


def _mindspore_env(worker: Worker) -> dict[str, str]:
    """MindSpore's dynamic cluster, as ``msrun`` on each node uses it.

    Per node: ``msrun --worker_num=$MS_WORKER_NUM --local_worker_num=$PHASED_PROCS_PER_NODE
    --master_addr=$MS_SCHED_HOST --master_port=$MS_SCHED_PORT --node_rank=$PHASED_RANK``;
    msrun starts the scheduler on node 0 and sets MS_ROLE, RANK_ID and DEVICE_ID for each
    process itself, so Phased sets only what is per job and per node.
    """
    processes = str(worker.world_size * worker.procs_per_node)
    return {
        "MS_SCHED_HOST": worker.master_addr,
        "MS_SCHED_PORT": str(worker.launcher.port),
        "MS_WORKER_NUM": processes,
        "RANK_SIZE": processes,
    }


LAUNCHER_ENV: dict[LauncherType, Callable[[Worker], dict[str, str]]] = {
    LauncherType.PLAIN: _plain_env,
    LauncherType.TORCHRUN: _torchrun_env,
    LauncherType.MINDSPORE: _mindspore_env,
}
