"""The ``TrainingJob`` resource (``phased.dev/v1alpha1``) as typed models.

These models and ``crds/trainingjobs.phased.dev.yaml`` describe the same resource; a test
compares them field by field. The CRD rejects what it can at ``kubectl apply`` time; these
models re-check everything in the operator and in ``phased plan``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from phased.api import podtemplate
from phased.api.durations import DURATION_PATTERN, parse_duration
from phased.api.podtemplate import WORKER_CONTAINER

GROUP = "phased.dev"
VERSION = "v1alpha1"
KIND = "TrainingJob"
PLURAL = "trainingjobs"
API_VERSION = f"{GROUP}/{VERSION}"

# A phase name becomes part of pod and label names: a DNS label, kept short so that
# "<job>-<phase>-<rank>" stays within 63 characters for job names up to 30 characters.
PHASE_NAME_PATTERN = r"^[a-z]([-a-z0-9]{0,18}[a-z0-9])?$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
MAX_PHASES = 8
MAX_NODES = 5000
MAX_GPUS_PER_NODE = 16
MAX_SPARES = 200
# Annotation keys and resource names are Kubernetes qualified names: an optional DNS-1123
# subdomain prefix of at most 253 characters and "/", then a name of at most 63 characters.
# The CRD checks the same with CEL on the map keys (QUALIFIED_NAME_PATTERN, PREFIX_TOO_LONG;
# "[.]", not an escaped dot, so that the text is the same in CEL and Python).
QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
PREFIX_TOO_LONG = r"^[^/]{254,}/"
QUALIFIED_NAME_RULE = (
    "an optional DNS subdomain prefix of at most 253 characters and '/', then a name of at "
    "most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
)
_QUALIFIED_NAME = re.compile(QUALIFIED_NAME_PATTERN)
_PREFIX_TOO_LONG = re.compile(PREFIX_TOO_LONG)


def _qualified_names(what: str, keys: Any) -> None:
    """Raise when a key of ``keys`` is not a Kubernetes qualified name (see above)."""
    bad = [k for k in keys if not _QUALIFIED_NAME.fullmatch(k) or _PREFIX_TOO_LONG.match(k)]
    if bad:
        shown = ", ".join(repr(k[:80]) for k in sorted(bad)[:3])
        raise ValueError(f"{what} must be qualified names ({QUALIFIED_NAME_RULE}); got {shown}")


class GPUType(StrEnum):
    """Accelerators a phase may ask for; the operator's settings map each to node labels."""

    H100 = "H100"
    H200 = "H200"
    ASCEND_910B = "Ascend910B"


class RestartScope(StrEnum):
    """What restarts after a worker or node is lost."""

    GANG = "Gang"  # every worker restarts from the last checkpoint (a new restart generation)
    WORKER = "Worker"  # only the lost rank is recreated


class NodeReturnPolicy(StrEnum):
    """What happens to a quarantined node that becomes healthy again."""

    QUARANTINE = "Quarantine"  # stays quarantined until a person releases it
    RETURN_TO_SPARES = "ReturnToSpares"  # rejoins the spares after staying healthy a while


class SpareIdlePolicy(StrEnum):
    """What a standby node may do while it waits."""

    RESERVED = "Reserved"  # tainted for the job: nothing else runs on it
    PREEMPTIBLE = "Preemptible"  # pods tolerating phased.dev/spare may run; evicted on promotion


class CompletionMode(StrEnum):
    """When a phase counts as done."""

    ALL_SUCCEEDED = "AllSucceeded"  # every worker exited 0
    RANK_ZERO_SUCCEEDED = "RankZeroSucceeded"  # rank 0 exited 0; the others are then stopped


class JobState(StrEnum):
    """The life of a TrainingJob, as shown in ``kubectl get tj``."""

    PENDING = "Pending"  # accepted, nothing claimed yet
    WAITING = "Waiting"  # waiting for capacity (see the CapacityShort condition)
    RUNNING = "Running"
    RECOVERING = "Recovering"  # a failure is being answered
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    INVALID = "Invalid"  # the spec is wrong in a way only the operator can tell


class PhaseState(StrEnum):
    PENDING = "Pending"
    WAITING = "Waiting"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class NodeRole(StrEnum):
    ACTIVE = "active"
    SPARE = "spare"
    QUARANTINED = "quarantined"


class AccessMode(StrEnum):
    """How the checkpoint claim Phased creates may be mounted."""

    READ_WRITE_MANY = "ReadWriteMany"  # every worker on its own node mounts it (the usual case)
    READ_WRITE_ONCE = "ReadWriteOnce"  # one node: only for single-node phases


class FailureReason(StrEnum):
    """Why a node was taken out of a pool (the ``reason`` of a ledger entry)."""

    NOT_READY = "NodeNotReady"
    GPU_FAULT = "GPUFault"
    GPU_DROPPED = "GPUCapacityDropped"
    NODE_DELETED = "NodeDeleted"
    NODE_FLAPPING = "NodeFlapping"  # its trouble began again and again (failurePolicy.flapping)
    WORKER_FAILED = "WorkerFailed"


DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
WORKER_SCOPE_RULE = (
    "failurePolicy.restartScope Worker needs a launcher a lost rank can rejoin: "
    "launcher.type Torchrun with launcher.rendezvous C10d, in spec.launcher and in every "
    "phase's own launcher (otherwise use Gang)"
)
Duration = Annotated[str, Field(pattern=DURATION_PATTERN, min_length=2, max_length=32)]
Quantity = Annotated[
    str, Field(pattern=r"^[0-9]+(\.[0-9]+)?([numkMGTPE]|[KMGTPE]i)?$", max_length=64)
]
# A container image reference: no spaces; the registry decides the rest.
IMAGE_PATTERN = r"^[^\s]+$"
MAX_JOB_NAME = 30
# DNS-1123 label, kept short (see PHASE_NAME_PATTERN): "<job>-<phase>-<rank>" fits in 63.
JOB_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,28}[a-z0-9])?$"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class EnvVar(_Model):
    """An environment variable of the worker container: a value, or one taken from elsewhere."""

    name: str = Field(pattern=ENV_NAME_PATTERN, max_length=128)
    value: str = Field(default="", max_length=4096)
    # A Kubernetes EnvVarSource (secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef...),
    # checked against the API server's schema; see phased.api.podtemplate.
    value_from: dict[str, Any] | None = None

    @field_validator("value_from")
    @classmethod
    def _env_source(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            problems = podtemplate.structural_problems(value, podtemplate.env_source_schema())
            if problems:
                raise ValueError("; ".join(problems))
        return value

    def to_k8s(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.value or self.value_from is None:
            out["value"] = self.value
        if self.value_from is not None:
            out["valueFrom"] = self.value_from
        return out


class Resources(_Model):
    requests: dict[str, Quantity] = Field(default_factory=dict, max_length=16)
    limits: dict[str, Quantity] = Field(default_factory=dict, max_length=16)

    @field_validator("requests", "limits")
    @classmethod
    def _resource_names(cls, value: dict[str, str]) -> dict[str, str]:
        _qualified_names("resource names", value)
        return value


# A label value: at most 63 characters, alphanumeric at both ends (empty allowed).
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
LABEL_PREFIX_MESSAGE = "labels under phased.dev/ are Phased's own and cannot be set"


class WorkerTemplate(_Model):
    """The worker pod; a phase's template is merged over the job's (see ``worker_pod``).

    ``image``, ``command``, ``args``, ``env`` and ``resources`` are short for the same fields
    of the container named ``worker`` in ``spec`` (they win over it when both are set);
    ``spec`` is a whole Kubernetes pod spec: volumes, init containers, sidecars, security
    context, tolerations, affinity terms and the rest (see phased.api.podtemplate).
    """

    image: str | None = Field(default=None, min_length=1, max_length=512, pattern=IMAGE_PATTERN)
    command: list[Annotated[str, Field(max_length=4096)]] | None = Field(
        default=None, max_length=64
    )
    args: list[Annotated[str, Field(max_length=4096)]] | None = Field(default=None, max_length=256)
    env: list[EnvVar] | None = Field(default=None, max_length=128)
    resources: Resources | None = None
    annotations: dict[str, Annotated[str, Field(max_length=1024)]] | None = Field(
        default=None, max_length=32
    )
    labels: dict[str, Annotated[str, Field(max_length=63, pattern=LABEL_VALUE_PATTERN)]] | None = (
        Field(default=None, max_length=32)
    )
    spec: dict[str, Any] | None = None

    @field_validator("annotations")
    @classmethod
    def _annotation_keys(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        _qualified_names("annotation keys", value or {})
        return value

    @field_validator("labels")
    @classmethod
    def _label_keys(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        _qualified_names("label keys", value or {})
        if any(k.startswith(podtemplate.LABEL_PREFIX) for k in value or {}):
            raise ValueError(LABEL_PREFIX_MESSAGE)
        return value

    @field_validator("env")
    @classmethod
    def _unique_env_names(cls, value: list[EnvVar] | None) -> list[EnvVar] | None:
        names = [e.name for e in value or []]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"env names must be unique; repeated: {', '.join(repeated)}")
        if any(podtemplate.reserved_env(n) for n in names):
            raise ValueError(podtemplate.RESERVED_ENV_MESSAGE)
        return value

    @field_validator("spec")
    @classmethod
    def _pod_spec(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            problems = podtemplate.structural_problems(value) or podtemplate.owned_problems(value)
            if problems:
                raise ValueError("; ".join(problems))
        return value

    def pod_spec(self) -> dict[str, Any]:
        """``spec`` with the short fields folded into its ``worker`` container."""
        spec = copy.deepcopy(self.spec or {})
        containers: list[dict[str, Any]] = spec.setdefault("containers", [])
        worker = next((c for c in containers if c.get("name") == WORKER_CONTAINER), None)
        if worker is None:
            worker = {"name": WORKER_CONTAINER}
            containers.insert(0, worker)
        if self.image is not None:
            worker["image"] = self.image
        if self.command is not None:
            worker["command"] = list(self.command)
        if self.args is not None:
            worker["args"] = list(self.args)
        if self.env:
            env = {e["name"]: e for e in worker.get("env") or []}
            env.update({e.name: e.to_k8s() for e in self.env})
            worker["env"] = list(env.values())
        if self.resources is not None:
            resources = worker.setdefault("resources", {})
            for kind in ("requests", "limits"):
                amounts = {**resources.get(kind, {}), **getattr(self.resources, kind)}
                if amounts:
                    resources[kind] = amounts
        return spec


@dataclass(frozen=True)
class WorkerPod:
    """A phase's worker pod as the templates ask for it, before Phased adds its own parts."""

    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict[str, Any]

    @property
    def worker(self) -> dict[str, Any]:
        """The ``worker`` container (always present)."""
        container: dict[str, Any] = next(
            c for c in self.spec["containers"] if c.get("name") == WORKER_CONTAINER
        )
        return container

    def all_containers(self) -> list[dict[str, Any]]:
        """Init containers (sidecars among them), then the containers."""
        return [*self.spec.get("initContainers", []), *self.spec["containers"]]


class LauncherType(StrEnum):
    """How the worker container starts the training processes: which environment it gets."""

    PLAIN = "Plain"  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (one process per node)
    TORCHRUN = "Torchrun"  # the PET_* variables torchrun reads
    MINDSPORE = "MindSpore"  # MindSpore's dynamic cluster (msrun) on Ascend: MS_*, RANK_SIZE


class Rendezvous(StrEnum):
    """How torchrun's agents find each other."""

    STATIC = "Static"  # rank 0's pod is the master; node ranks are fixed
    C10D = "C10d"  # a c10d rendezvous hosted by rank 0's pod; node ranks assigned by it


class Launcher(_Model):
    type: LauncherType = LauncherType.PLAIN
    # Processes per node (torchrun's nproc-per-node, msrun's local_worker_num); unset: the
    # phase's gpusPerNode, or 1 for a CPU phase.
    procs_per_node: int | None = Field(default=None, ge=1, le=128)
    rendezvous: Rendezvous = Rendezvous.STATIC
    port: int = Field(default=29500, ge=1024, le=65535)

    @model_validator(mode="after")
    def _rendezvous_needs_torchrun(self) -> Launcher:
        if self.rendezvous != Rendezvous.STATIC and self.type != LauncherType.TORCHRUN:
            raise ValueError(LAUNCHER_RENDEZVOUS_MESSAGE)
        return self

    @property
    def can_rejoin(self) -> bool:
        """A rank restarted on its own can rejoin the others (torchrun, c10d rendezvous)."""
        return self.type == LauncherType.TORCHRUN and self.rendezvous == Rendezvous.C10D


LAUNCHER_RENDEZVOUS_MESSAGE = "launcher.rendezvous C10d needs launcher.type Torchrun"


class NodeRange(_Model):
    min: int = Field(ge=1, le=MAX_NODES)
    max: int = Field(ge=1, le=MAX_NODES)

    @model_validator(mode="after")
    def _min_le_max(self) -> NodeRange:
        if self.min > self.max:
            raise ValueError(f"nodes.min ({self.min}) must not exceed nodes.max ({self.max})")
        return self


class Completion(_Model):
    mode: CompletionMode = CompletionMode.ALL_SUCCEEDED


class Phase(_Model):
    name: str = Field(pattern=PHASE_NAME_PATTERN, max_length=20)
    nodes: NodeRange
    gpu_types: list[GPUType] = Field(default_factory=list, max_length=3)
    gpus_per_node: int = Field(default=0, ge=0, le=MAX_GPUS_PER_NODE)
    template: WorkerTemplate = Field(default_factory=WorkerTemplate)
    launcher: Launcher | None = None  # unset: the job's
    max_duration: Duration | None = None
    expected_duration: Duration | None = None
    completion: Completion = Field(default_factory=Completion)

    @field_validator("gpu_types")
    @classmethod
    def _unique_gpu_types(cls, value: list[GPUType]) -> list[GPUType]:
        if len(set(value)) != len(value):
            raise ValueError("gpuTypes must not repeat a type")
        return value

    @model_validator(mode="after")
    def _gpus_match_types(self) -> Phase:
        if self.gpu_types and self.gpus_per_node == 0:
            raise ValueError(
                f"phase {self.name!r} accepts GPU types {[t.value for t in self.gpu_types]} "
                "but asks for gpusPerNode 0: set gpusPerNode (e.g. 8)"
            )
        if not self.gpu_types and self.gpus_per_node > 0:
            raise ValueError(
                f"phase {self.name!r} is CPU-only (no gpuTypes) but asks for "
                f"gpusPerNode {self.gpus_per_node}: list gpuTypes or set gpusPerNode 0"
            )
        if (
            self.max_duration is not None
            and self.expected_duration is not None
            and parse_duration(self.expected_duration) > parse_duration(self.max_duration)
        ):
            raise ValueError(
                f"phase {self.name!r}: expectedDuration ({self.expected_duration}) must not "
                f"exceed maxDuration ({self.max_duration})"
            )
        return self

    @property
    def is_cpu_only(self) -> bool:
        return not self.gpu_types


class Spares(_Model):
    count: int = Field(default=0, ge=0, le=MAX_SPARES)
    while_idle: SpareIdlePolicy = SpareIdlePolicy.RESERVED


class MassFailure(_Model):
    """The blast-radius breaker: stop automatic action when too much of a pool fails at once."""

    max_failed_percent: int = Field(default=20, ge=1, le=100)
    window: Duration = "5m"


class Flapping(_Model):
    """A node whose trouble begins ``troubles`` times within ``window`` has failed (0s: off)."""

    troubles: int = Field(default=3, ge=2, le=10)
    window: Duration = "24h"


class FailurePolicy(_Model):
    not_ready_grace: Duration = "30s"
    # A worker Pending this long (unschedulable, image pull errors...) is a failed start.
    pending_grace: Duration = "10m"
    # Failed starts retried in a row in a phase (a new generation, or the stuck ranks) before
    # the job fails; a start in which every rank runs gives them back.
    pending_restarts: int = Field(default=1, ge=0, le=100)
    gpu_fault_conditions: list[
        Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$", max_length=63)]
    ] = Field(default_factory=lambda: ["GPUXidError", "GPUUnhealthy"], max_length=16)
    gpu_fault_grace: Duration = "0s"
    gpu_drop_grace: Duration = "10s"
    restart_scope: RestartScope = RestartScope.GANG
    restart_budget: int = Field(default=20, ge=0, le=10000)
    interruption_budget: Duration = "2h"
    node_return: NodeReturnPolicy = NodeReturnPolicy.QUARANTINE
    healthy_before_return: Duration = "10m"
    mass_failure: MassFailure = Field(default_factory=MassFailure)
    flapping: Flapping = Field(default_factory=Flapping)
    # A gang restart stops the survivors with this grace (SIGTERM, then SIGKILL); workers on
    # a dead node are deleted at once. At most 1h.
    survivor_grace_period: Duration = "30s"


class CheckpointVolume(_Model):
    """The job's checkpoint storage: an existing claim, or a claim Phased creates."""

    claim_name: str | None = Field(
        default=None, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN
    )
    size: Quantity | None = None
    storage_class_name: str | None = Field(
        default=None, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN
    )
    access_mode: AccessMode = AccessMode.READ_WRITE_MANY

    @model_validator(mode="after")
    def _one_source(self) -> CheckpointVolume:
        if (self.claim_name is None) == (self.size is None):
            raise ValueError(
                "checkpoint.volume needs exactly one of claimName (an existing claim) or "
                "size (a claim Phased creates)"
            )
        if self.claim_name is not None and self.storage_class_name is not None:
            raise ValueError(
                "checkpoint.volume.storageClassName is only for a claim Phased creates (size)"
            )
        return self


class AdmissionTimeoutAction(StrEnum):
    """What a job does when it has waited ``admission.waitTimeout`` for its ``nodes.min``."""

    WAIT = "Wait"  # keep its place in line, with the AdmissionTimedOut condition and an event
    FAIL = "Fail"  # the job fails (reason AdmissionTimedOut)


class Admission(_Model):
    """Gang admission: how long a phase may wait for its ``nodes.min``, and what then."""

    wait_timeout: Duration = "1h"
    on_timeout: AdmissionTimeoutAction = AdmissionTimeoutAction.WAIT


class Checkpoint(_Model):
    interval: Duration = "1h"
    path: str = Field(default="/checkpoints", min_length=1, max_length=1024, pattern=r"^/")
    volume: CheckpointVolume | None = None
    # Workers report each completed checkpoint to the operator (see docs/api.md).
    report: bool = False
    # How long a phase whose workers succeeded waits for their final checkpoint report.
    final_timeout: Duration = "10m"


class TrainingJobSpec(_Model):
    phases: list[Phase] = Field(min_length=1, max_length=MAX_PHASES)
    template: WorkerTemplate = Field(default_factory=WorkerTemplate)
    launcher: Launcher = Field(default_factory=Launcher)
    spares: Spares = Field(default_factory=Spares)
    failure_policy: FailurePolicy = Field(default_factory=FailurePolicy)
    checkpoint: Checkpoint = Field(default_factory=Checkpoint)
    admission: Admission = Field(default_factory=Admission)
    priority: int = Field(default=0, ge=-1000, le=1000)

    @model_validator(mode="after")
    def _check(self) -> TrainingJobSpec:
        names = [p.name for p in self.phases]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"phase names must be unique; repeated: {', '.join(duplicates)}")
        for phase in self.phases:
            pod = self.worker_pod(phase)
            if not pod.worker.get("image"):
                raise ValueError(
                    f"phase {phase.name!r} has no worker image: set spec.template.image "
                    "or the phase's template.image"
                )
            missing = sorted(c.get("name", "") for c in pod.all_containers() if not c.get("image"))
            if missing:
                raise ValueError(
                    f"phase {phase.name!r}: containers {', '.join(missing)} have no image "
                    "(in the job's template or the phase's)"
                )
        for field in ("not_ready_grace", "gpu_fault_grace", "gpu_drop_grace", "pending_grace"):
            value = getattr(self.failure_policy, field)
            if parse_duration(value) > 86400:
                raise ValueError(f"failurePolicy.{to_camel(field)} must be at most 1d, got {value}")
        if parse_duration(self.checkpoint.interval) < 60:
            raise ValueError("checkpoint.interval must be at least 1m")
        if parse_duration(self.checkpoint.final_timeout) > 86400:
            raise ValueError("checkpoint.finalTimeout must be at most 1d")
        if parse_duration(self.failure_policy.survivor_grace_period) > 3600:
            raise ValueError("failurePolicy.survivorGracePeriod must be at most 1h")
        if self.failure_policy.restart_scope == RestartScope.WORKER and not self.can_rejoin:
            raise ValueError(WORKER_SCOPE_RULE)
        return self

    @property
    def can_rejoin(self) -> bool:
        """A rank restarted on its own can rejoin the others in every phase: the job's
        launcher and every phase's own launcher are torchrun with a c10d rendezvous."""
        return self.launcher.can_rejoin and all(
            phase.launcher is None or phase.launcher.can_rejoin for phase in self.phases
        )

    def worker_pod(self, phase: Phase) -> WorkerPod:
        """The phase's template merged over the job's (pod specs as a strategic merge does)."""
        job, own = self.template, phase.template
        return WorkerPod(
            labels={**(job.labels or {}), **(own.labels or {})},
            annotations={**(job.annotations or {}), **(own.annotations or {})},
            spec=podtemplate.merge(job.pod_spec(), own.pod_spec()),
        )

    def launcher_of(self, phase: Phase) -> Launcher:
        return phase.launcher or self.launcher


# ---------------------------------------------------------------------------------------------
# Status: everything the operator writes. The CRD declares every field (the API server drops
# undeclared ones), so a field added here must be added there; the schema test checks it.
# ---------------------------------------------------------------------------------------------


class _Status(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )


class Condition(_Status):
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class PhaseRecord(_Status):
    """One phase's history: when it ran, on what, at what cost."""

    name: str
    state: PhaseState = PhaseState.PENDING
    gpu_type: str | None = None
    gpus_per_node: int | None = None  # the GPU shape the phase started with
    gpu_types: list[str] | None = None
    # Where the phase's checkpoints are, as its workers were made at the start: the claim they
    # mount ("" when none) and checkpoint.path; the place cannot move once the job started.
    checkpoint_claim: str | None = None
    checkpoint_path: str | None = None
    # Whether that claim is one Phased creates (checkpoint.volume.size) rather than an existing
    # one the spec names (claimName): a switch between the two is a move, even to the same name.
    checkpoint_claim_created: bool | None = None
    start_time: str | None = None
    end_time: str | None = None
    nodes: int = 0  # active nodes now (or at the end)
    max_nodes_seen: int = 0
    restarts: int = 0
    gpu_hours: float = 0.0  # active + spare, over the phase
    active_gpu_hours: float = 0.0
    spare_gpu_hours: float = 0.0
    busy_gpu_hours: float = 0.0  # GPUs that ran a Running worker
    cost: float = 0.0
    waiting_seconds: float = 0.0
    # Failed starts (workers stuck Pending) retried since the phase's workers last all started.
    pending_restarts: int = 0
    # Restarts for workers nodes rejected at admission, not charged to restartBudget.
    admission_rejections: int = 0
    # Restarts for workers a node's kubelet stopped for the node's sake (evicted under
    # pressure, shut down), not charged to restartBudget.
    node_disruptions: int = 0
    last_checkpoint: CheckpointRecord | None = None
    last_progress: ProgressRecord | None = None
    # When the workers met the completion rule while the final checkpoint was still due.
    completed_workers_at: str | None = None


class CheckpointRecord(_Status):
    """A checkpoint a worker reported as complete."""

    step: int
    time: str  # when the operator received the report
    path: str = ""
    generation: int = 0  # the restart generation that wrote it
    final: bool = False  # the phase's last checkpoint (reported with final: true)


class ProgressRecord(_Status):
    """The latest training step a worker reported."""

    step: int
    time: str
    generation: int = 0


class FailureRecord(_Status):
    """A ledger entry: one node taken out of the pool, and how fast it was answered."""

    id: int
    node: str
    reason: str
    message: str = ""
    phase: str = ""
    detected: str
    cordoned: str | None = None
    replaced_by: str | None = None
    replaced: str | None = None
    resumed: str | None = None
    interruption_seconds: float = 0.0
    generation: int | None = None  # the restart generation the failure interrupted
    # With checkpoint reports: training time since the last checkpoint before detection
    # (redone after the restart), and the step the next generation resumes from.
    lost_work_seconds: float | None = None
    resume_step: int | None = None


class Suspect(_Status):
    """A node of the pool that looks broken but whose grace period has not run out yet."""

    node: str
    reason: str  # a FailureReason value
    since: str  # when the trouble began (condition transition, or first seen)
    message: str = ""


class HeldFailure(_Status):
    """A failed node the breaker holds: not cordoned, not swapped, its trouble kept as seen."""

    node: str
    role: str  # active | spare
    reason: str  # a FailureReason value
    since: str  # when the trouble began; never restarted while held
    message: str = ""


class Breaker(_Status):
    """The blast-radius breaker's memory (its state is the MassFailure condition)."""

    held: list[HeldFailure] = Field(default_factory=list)
    released_at: str | None = None  # the last release by a person
    released_by: str | None = None  # the proceed annotation's value that released it


class Healed(_Status):
    """A quarantined node a pass found healthy, and when one first did."""

    node: str
    since: str


class TroubleStart(_Status):
    """A trouble that began on a node of the job: what flap detection counts."""

    node: str
    reason: str  # a FailureReason value
    since: str  # when it began (for a trouble no pass saw: when the node was Ready again)
    # A worker of the job ended with it (on the node, or beside it): a restart it caused.
    restarted: bool = False


class Stop(_Status):
    """An interruption no ledger entry records: a restart of the workers, or the breaker
    holding active nodes, from when training stopped to when it resumed."""

    phase: str = ""
    generation: int = 0  # the restart generation it interrupted
    since: str
    resumed: str | None = None
    cause: str = ""


class Pool(_Status):
    active: list[str] = Field(default_factory=list)
    spares: list[str] = Field(default_factory=list)
    quarantined: list[str] = Field(default_factory=list)
    # name -> metadata.uid of each active and spare node, as the pass that wrote the status
    # read it: a node recreated under the same name is another object (absent in statuses
    # written before it was kept: then its creation time is read instead)
    uids: dict[str, str] = Field(default_factory=dict)
    # The spares.whileIdle the held spares' taints were last rewritten for (or found agreeing
    # with, in a status that had none): SpareTaintsChanged is said when a rewrite reaches
    # another value (None: statuses written before it was kept)
    spares_while_idle: SpareIdlePolicy | None = None


class Interruption(_Status):
    used_seconds: float = 0.0
    budget_seconds: float = 7200.0
    used: str = "0s"  # the same, for people and printer columns
    open_since: str | None = None  # the start of an interruption still going on
    # Interruptions no ledger entry records (the latest MAX_STOPS), and the seconds of older
    # ones that were folded away.
    stops: list[Stop] = Field(default_factory=list)
    folded_seconds: float = 0.0


class Utilization(_Status):
    """Shares of GPU time, in percent, over the run so far."""

    allocation: float = 0.0  # busy GPU-hours / every reserved GPU-hour (spares included)
    active: float = 0.0  # busy GPU-hours / active-pool GPU-hours
    current: float = 0.0  # GPUs running a worker now / GPUs reserved now


class BasisGPUNode(_Status):
    """A GPU node a CPU phase holds, billed as the GPU node it is."""

    gpu_type: str = ""
    gpus: int = 0
    active: bool = True


class UsageBasis(_Status):
    """The pool as the last pass left it: the next interval is charged at this."""

    phase: str = ""
    gpu_type: str = ""  # empty: CPU nodes
    active_nodes: int = 0
    spare_nodes: int = 0
    running_workers: int = 0
    gpus_per_node: int = 0
    gpu_nodes: list[BasisGPUNode] = Field(default_factory=list)  # a CPU phase's GPU nodes


class Accounting(_Status):
    gpu_hours: float = 0.0
    active_gpu_hours: float = 0.0
    spare_gpu_hours: float = 0.0
    busy_gpu_hours: float = 0.0
    cost: float = 0.0
    currency: str = "USD"
    estimated_remaining_cost: float = 0.0
    accounted_at: str | None = None  # the instant the figures above run up to
    unobserved_seconds: float = 0.0  # charged while no operator watched (AccountingGap)
    basis: UsageBasis | None = None


class TrainingJobStatus(_Status):
    state: JobState = JobState.PENDING
    phase: str | None = None
    phase_index: int = 0
    message: str = ""
    start_time: str | None = None
    completion_time: str | None = None
    restart_generation: int = 0
    # The generation of the current phase whose workers were created last (None: none yet).
    created_generation: int | None = None
    restarts: int = 0
    world_size: int = 0
    active_nodes: int = 0
    spare_nodes: int = 0
    quarantined_nodes: int = 0
    utilization_percent: float = 0.0  # Utilization.allocation, for the printer column
    phases: list[PhaseRecord] = Field(default_factory=list)
    pool: Pool = Field(default_factory=Pool)
    failures: list[FailureRecord] = Field(default_factory=list)
    interruption: Interruption = Field(default_factory=Interruption)
    utilization: Utilization = Field(default_factory=Utilization)
    accounting: Accounting = Field(default_factory=Accounting)
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None
    # GPU type ("" for CPU) -> nodes still missing before the current phase can start; other
    # jobs' reconcilers read it to hand free nodes out fairly.
    waiting_for: dict[str, int] = Field(default_factory=dict)
    # GPU type ("" for CPU) -> spares a running generation is still short of (spares.count
    # beyond those it holds): its place in line for them, read by the jobs behind it. Never
    # set while the job waits, and cleared once the spares are full or it stops running.
    spares_wanted: dict[str, int] = Field(default_factory=dict)
    # Nodes under suspicion, with when the trouble began (the only record of a GPU-capacity
    # drop's start, which no node condition carries).
    suspects: list[Suspect] = Field(default_factory=list)
    # Restarts caused by workers failing on healthy nodes: the ones restartBudget limits.
    worker_restarts: int = 0
    # Times in a row the pool was given back for workers the namespace refused (reset when
    # their creates land): the wait before the next try doubles with each.
    pool_returns: int = 0
    breaker: Breaker = Field(default_factory=Breaker)
    # Troubles that began on the job's nodes within failurePolicy.flapping.window.
    troubles: list[TroubleStart] = Field(default_factory=list)
    # Quarantined nodes found healthy, with when a pass first did (ReturnToSpares): a GPU
    # back in allocatable, or a fault condition removed rather than set False, dates nothing.
    healed: list[Healed] = Field(default_factory=list)

    def to_k8s(self) -> dict[str, Any]:
        """The status as the API expects it: camelCase keys, no nulls."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# ---------------------------------------------------------------------------------------------
# The whole resource, as a person writes it (``phased plan`` and the tests read manifests).
# ---------------------------------------------------------------------------------------------


class ObjectMeta(BaseModel):
    """The part of ``metadata`` Phased cares about; everything else passes through."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str | None = Field(default=None, pattern=JOB_NAME_PATTERN, max_length=MAX_JOB_NAME)
    namespace: str | None = None


class TrainingJob(_Model):
    """A whole ``TrainingJob`` manifest: apiVersion, kind, metadata, spec (status optional)."""

    api_version: Literal["phased.dev/v1alpha1"]
    kind: Literal["TrainingJob"]
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingJobSpec
    status: TrainingJobStatus | None = None


def parse_manifest(raw: dict[str, Any]) -> TrainingJob:
    """Validate a whole manifest; raises pydantic's ``ValidationError`` on bad input."""
    return TrainingJob.model_validate(raw)


def parse_spec(raw: dict[str, Any]) -> TrainingJobSpec:
    """Validate a ``spec`` mapping; raises pydantic's ``ValidationError`` on bad input."""
    return TrainingJobSpec.model_validate(raw)


def parse_status(raw: dict[str, Any] | None) -> TrainingJobStatus:
    """Read a status written by the operator; the fields that cannot be read are left out
    (see :func:`read_status`)."""
    return read_status(raw)[0]


def read_status(raw: Any) -> tuple[TrainingJobStatus, tuple[str, ...]]:
    """The status, and the names of its top-level fields that could not be read.

    A person with status access can write anything; a field that does not parse is dropped
    from what decisions see (they fall back to what the cluster shows: pods, node labels,
    quarantine notes) and named here, so the operator can say so and never write over it.
    """
    if not raw:
        return TrainingJobStatus(), ()
    if not isinstance(raw, dict):
        return TrainingJobStatus(), ("status",)
    data = dict(raw)
    dropped: set[str] = set()
    while True:
        try:
            return TrainingJobStatus.model_validate(data), tuple(sorted(dropped))
        except ValidationError as exc:
            bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]} & data.keys()
            if not bad:
                return TrainingJobStatus(), tuple(sorted(raw))
            dropped |= bad
            for key in bad:
                del data[key]
