"""Small builders for whole snapshots: nodes, pods, specs, and a tiny cluster simulator.

The simulator applies a plan's actions to NodeInfo/PodInfo the way the reconciler and the
kubelet would, so tests can iterate decide until the cluster is quiet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

from phased.api.v1alpha1 import (
    NodeRole,
    SpareIdlePolicy,
    TrainingJobSpec,
    TrainingJobStatus,
    parse_spec,
)
from phased.core import labels
from phased.core.decide import decide
from phased.core.ledger import encode_replaces
from phased.core.model import (
    Action,
    ClaimNode,
    CreatePod,
    DeletePod,
    EmitEvent,
    EnsureClaim,
    EnsureSecret,
    EnsureService,
    EvictPod,
    FinishClearing,
    JobRef,
    NodeCondition,
    NodeInfo,
    NodePod,
    NodeSet,
    Plan,
    PodInfo,
    PodPhase,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
    Snapshot,
    StartClearing,
    Taint,
    UnquarantineNode,
)
from phased.core.quarantine import QuarantineNote, decode_quarantine, encode_quarantine
from phased.core.reports import Report, ReportStore, merge
from phased.core.settings import Settings
from phased.core.times import format_time
from phased.core.tolerations import Toleration, of_pod_spec, untolerated
from phased.kube.convert import checkpoint_fields

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
LONG_AGO = T0 - timedelta(days=1)
SETTINGS = Settings()
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm", generation=1, created=LONG_AGO)
H100_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
H200_LABELS = {"nvidia.com/gpu.product": "NVIDIA-H200"}
_NODE_OBJECTS = count()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def node(
    name: str,
    *,
    gpu: str | None = "H100",
    gpus: int = 8,
    ready: bool = True,
    ready_since: datetime = LONG_AGO,
    rack: str = "r1",
    block: str = "b1",
    zone: str = "z1",
    extra: Iterable[NodeCondition] = (),
    unschedulable: bool = False,
    taints: tuple[Taint, ...] = (),
) -> NodeInfo:
    """A node; GPU nodes carry the settings' labels and ``gpus`` allocatable GPUs."""
    node_labels = {
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/zone": zone,
        "topology.phased.dev/block": block,
        "topology.phased.dev/rack": rack,
    }
    allocatable: dict[str, int] = {"cpu": 96}
    if gpu == "H100":
        node_labels.update(H100_LABELS)
        allocatable["nvidia.com/gpu"] = gpus
    elif gpu == "H200":
        node_labels.update(H200_LABELS)
        allocatable["nvidia.com/gpu"] = gpus
    ready_cond = NodeCondition("Ready", "True" if ready else "False", ready_since)
    return NodeInfo(
        name=name,
        resource_version="1",
        labels=node_labels,
        taints=taints,
        unschedulable=unschedulable,
        conditions=(ready_cond, *extra),
        allocatable=allocatable,
        capacity=dict(allocatable),
        created=LONG_AGO,
        uid=f"node-{name}-{next(_NODE_OBJECTS)}",  # each call a new Node object
    )


def nodes(prefix: str, count: int, **kwargs: Any) -> list[NodeInfo]:
    return [node(f"{prefix}{i:02d}", **kwargs) for i in range(count)]


def owned(n: NodeInfo, role: NodeRole, job: JobRef = JOB, spare_taint: bool = False) -> NodeInfo:
    """``n`` as held by ``job`` in ``role`` (labels and pool taint, as ClaimNode writes; a
    spare of a job whose spares are Preemptible carries the spare taint instead)."""
    node_labels = dict(n.labels)
    node_labels.update(
        {
            labels.LABEL_JOB_UID: job.uid,
            labels.LABEL_JOB: job.name,
            labels.LABEL_JOB_NAMESPACE: job.namespace,
            labels.LABEL_ROLE: role.value,
            labels.LABEL_INSTALLATION: SETTINGS.installation,
        }
    )
    taints = tuple(t for t in n.taints if t.key not in (labels.TAINT_POOL, labels.TAINT_SPARE))
    key = labels.TAINT_SPARE if spare_taint and role == NodeRole.SPARE else labels.TAINT_POOL
    return replace(n, labels=node_labels, taints=(*taints, Taint(key, job.uid)))


def node_pod(
    name: str,
    node_name: str,
    *,
    namespace: str = "tenant",
    created: datetime = LONG_AGO,
    **flags: Any,
) -> NodePod:
    """A pod bound to ``node_name``; ``flags`` are NodePod's (daemon, mirror, ...)."""
    return NodePod(namespace=namespace, name=name, node=node_name, created=created, **flags)


def with_ready(n: NodeInfo, ready: bool, since: datetime) -> NodeInfo:
    others = tuple(c for c in n.conditions if c.type != "Ready")
    cond = NodeCondition("Ready", "True" if ready else "Unknown", since)
    return replace(n, conditions=(cond, *others))


def phase(
    name: str,
    lo: int,
    hi: int,
    gpu_types: list[str] | None = None,
    gpus: int = 8,
    **extra: Any,
) -> dict[str, Any]:
    types = ["H100"] if gpu_types is None else gpu_types
    return {
        "name": name,
        "nodes": {"min": lo, "max": hi},
        "gpuTypes": types,
        "gpusPerNode": gpus if types else 0,
        **extra,
    }


def spec(*phases: dict[str, Any], spares: int = 0, **extra: Any) -> TrainingJobSpec:
    raw: dict[str, Any] = {
        "phases": list(phases) or [phase("train", 2, 2)],
        "template": {"image": "registry.example/llm:1", "command": ["python", "train.py"]},
        "spares": {"count": spares},
        **extra,
    }
    return parse_spec(raw)


def pod(
    name: str,
    phase_name: str,
    rank: int,
    *,
    generation: int = 0,
    world: int = 1,
    node_name: str | None = None,
    state: PodPhase = PodPhase.RUNNING,
    job: JobRef = JOB,
    attempt: int = 0,
) -> PodInfo:
    return PodInfo(
        name=name,
        labels={
            labels.LABEL_JOB_UID: job.uid,
            labels.LABEL_PHASE: phase_name,
            labels.LABEL_RANK: str(rank),
            labels.LABEL_GENERATION: str(generation),
            labels.LABEL_WORLD_SIZE: str(world),
            labels.LABEL_ATTEMPT: str(attempt),
        },
        node_name=node_name,
        phase=state,
        created=T0,
        controller=job.uid,
    )


def snapshot(
    the_spec: TrainingJobSpec | None,
    the_nodes: Iterable[NodeInfo],
    pods: Iterable[PodInfo] = (),
    status: TrainingJobStatus | None = None,
    **extra: Any,
) -> Snapshot:
    node_list = tuple(the_nodes)
    return Snapshot(
        job=extra.pop("job", JOB),
        spec=the_spec,
        spec_error=extra.pop("spec_error", None),
        status=status or TrainingJobStatus(),
        nodes=NodeSet.of(node_list),
        pods=tuple(pods),
        known_node_names=extra.pop("known", frozenset(n.name for n in node_list)),
        **extra,
    )


def of_type(plan: Plan, kind: type[Action]) -> list[Any]:
    return [a for a in plan.actions if isinstance(a, kind)]


def events(plan: Plan) -> list[str]:
    return [a.reason for a in plan.actions if isinstance(a, EmitEvent)]


# --- a tiny cluster -------------------------------------------------------------------------


@dataclass
class Cluster:
    """Applies plans like the reconciler, schedules and runs pods like the kubelet."""

    the_spec: TrainingJobSpec
    nodes: dict[str, NodeInfo]
    settings: Settings = SETTINGS
    job: JobRef = JOB
    now: datetime = T0
    status: TrainingJobStatus = field(default_factory=TrainingJobStatus)
    pods: dict[str, PodInfo] = field(default_factory=dict)
    service: bool = False
    waiting: tuple[Any, ...] = ()
    log: list[Action] = field(default_factory=list)
    finished: bool = False
    reports: ReportStore = field(default_factory=ReportStore)
    report_token: str | None = None
    secret: bool = False  # the report Secret was ensured (as the reconciler remembers)
    claim: bool = False
    annotations: dict[str, str] = field(default_factory=dict)  # the job's phased.dev/ ones
    # Nodes whose kubelet never starts the pods placed there (a broken network plugin).
    stalling: set[str] = field(default_factory=set)
    # Each worker's tolerations, from the manifest it was created with (the scheduler's).
    tolerations: dict[str, tuple[Toleration, ...]] = field(default_factory=dict)
    # Others' pods bound to nodes (node -> pods): listed, as the reconciler lists them, for
    # the job's nodes being cleared; a node with one that stays takes no worker.
    guests: dict[str, list[NodePod]] = field(default_factory=dict)

    def _listed(self) -> dict[str, tuple[NodePod, ...]]:
        return {
            name: tuple(self.guests.get(name, ()))
            for name, n in self.nodes.items()
            if n.owner_uid == self.job.uid and labels.ANNOTATION_CLEARING in n.annotations
        }

    def snapshot(self) -> Snapshot:
        return Snapshot(
            job=self.job,
            spec=self.the_spec,
            spec_error=None,
            status=self.status,
            nodes=NodeSet.of(self.nodes.values()),
            pods=tuple(self.pods.values()),
            service_exists=self.service,
            waiting=self.waiting,
            known_node_names=frozenset(self.nodes),
            reports=self.reports,
            report_token=self.report_token,
            report_secret_exists=self.secret,
            claim_exists=self.claim,
            annotations=self.annotations,
            node_pods=self._listed(),
        )

    def decide(self) -> Plan:
        return decide(self.snapshot(), self.settings, self.now)

    def apply(self, plan: Plan) -> None:
        for action in plan.actions:
            self.log.append(action)
            self._apply(action)
        self.status = plan.status
        self.finished = plan.finished

    def _apply(self, action: Action) -> None:
        if isinstance(action, ClaimNode):
            n = self.nodes[action.node]
            assert not n.owner_uid, f"claimed a held node {n.name}"
            notes = dict(n.annotations)
            if action.replaces is not None and action.at is not None:
                notes[labels.ANNOTATION_REPLACES] = encode_replaces(action.replaces, action.at)
            self.nodes[n.name] = replace(
                owned(n, action.role, self.job, self._spare_taint()), annotations=notes
            )
        elif isinstance(action, SetNodeRole):
            n = self.nodes[action.node]
            assert n.owner_uid == self.job.uid
            notes = {k: v for k, v in n.annotations.items() if k != labels.ANNOTATION_REPLACES}
            if action.replaces is not None and action.at is not None:
                notes[labels.ANNOTATION_REPLACES] = encode_replaces(
                    action.replaces, action.at, action.troubled
                )
            # As the kube layer's: a stalled mark written, kept while the role stays, else gone.
            if action.stalled is not None:
                notes[labels.ANNOTATION_STALLED] = action.stalled
            elif n.role != action.role:
                notes.pop(labels.ANNOTATION_STALLED, None)
            self.nodes[n.name] = replace(
                owned(n, action.role, self.job, self._spare_taint()), annotations=notes
            )
        elif isinstance(action, ReleaseNode):
            n = self.nodes[action.node]
            assert n.owner_uid == self.job.uid
            if n.role == NodeRole.QUARANTINED:
                # As the operator's release: a quarantined node keeps its role, cordon, note
                # and quarantine taint for a person; only the job's own labels go.
                job_keys = (labels.LABEL_JOB_UID, labels.LABEL_JOB, labels.LABEL_JOB_NAMESPACE)
                kept = {k: v for k, v in n.labels.items() if k not in job_keys}
                self.nodes[n.name] = replace(n, labels=kept)
                return
            # As the kube layer's release: Phased's own marks go, whatever else is there stays.
            ours = (*labels.OWNERSHIP_ANNOTATIONS, labels.ANNOTATION_REPLACES)
            self.nodes[n.name] = replace(
                n,
                labels={k: v for k, v in n.labels.items() if k not in labels.OWNERSHIP_LABELS},
                taints=tuple(
                    t for t in n.taints if t.key not in (labels.TAINT_POOL, labels.TAINT_SPARE)
                ),
                annotations={k: v for k, v in n.annotations.items() if k not in ours},
            )  # a cordon stays: a release never uncordons (a person's cordon is theirs)
        elif isinstance(action, QuarantineNode):
            before = self.nodes[action.node]
            n = owned(before, NodeRole.QUARANTINED, self.job)
            note = QuarantineNote.for_action(
                self.job.uid, action.reason, action.message, action.detected, action.cordoned
            )
            if before.unschedulable:  # as the kube layer: someone else's cordon, on the note
                note = note.over_a_cordon()
            self.nodes[n.name] = replace(
                n,
                unschedulable=True,
                annotations={labels.ANNOTATION_QUARANTINE: encode_quarantine(note)},
            )
        elif isinstance(action, UnquarantineNode):
            n = owned(self.nodes[action.node], NodeRole.SPARE, self.job)
            taints = tuple(t for t in n.taints if t.key != labels.TAINT_QUARANTINE)
            note = decode_quarantine(n.annotations.get(labels.ANNOTATION_QUARANTINE))
            theirs = note is not None and note.cordoned_before  # their cordon stays
            self.nodes[n.name] = replace(n, unschedulable=theirs, annotations={}, taints=taints)
        elif isinstance(action, CreatePod):
            meta = action.manifest["metadata"]
            assert meta["name"] not in self.pods, f"duplicate create {meta['name']}"
            owner = next(o for o in meta["ownerReferences"] if o.get("controller"))
            self.pods[meta["name"]] = PodInfo(
                name=meta["name"],
                labels=dict(meta["labels"]),
                created=self.now,
                controller=owner["uid"],
                **checkpoint_fields(action.manifest["spec"]),
            )
            self.tolerations[meta["name"]] = of_pod_spec(action.manifest["spec"])
        elif isinstance(action, DeletePod):
            self.pods.pop(action.name, None)
        elif isinstance(action, EvictPod):
            left = [p for p in self.guests.get(action.node, []) if p.name != action.name]
            self.guests[action.node] = left
        elif isinstance(action, StartClearing):
            n = self.nodes[action.node]
            assert n.owner_uid == self.job.uid and n.role == NodeRole.ACTIVE
            notes = {labels.ANNOTATION_CLEARING: format_time(self.now), **n.annotations}
            self.nodes[n.name] = replace(n, annotations=notes)
        elif isinstance(action, FinishClearing):
            n = self.nodes[action.node]
            notes = {k: v for k, v in n.annotations.items() if k != labels.ANNOTATION_CLEARING}
            self.nodes[n.name] = replace(n, annotations=notes)
        elif isinstance(action, EnsureService):
            self.service = True
        elif isinstance(action, EnsureSecret):
            self.secret = True
        elif isinstance(action, EnsureClaim):
            self.claim = True

    def _spare_taint(self) -> bool:
        """Spares carry the spare taint when the spec says so now, as the reconciler writes."""
        return self.the_spec.spares.while_idle == SpareIdlePolicy.PREEMPTIBLE

    def report(self, report: Report) -> None:
        """A worker's report, as the endpoint records it on the job."""
        self.reports = merge(self.reports, report)

    def schedule(self) -> None:
        """Pending pods go to free, Ready, uncordoned active nodes of the job with no taint
        they do not tolerate, and start Running (their containers start now) — but on a node
        in ``stalling``, where they stay Pending (``ContainerCreating``) until it is not."""
        live = (PodPhase.PENDING, PodPhase.RUNNING)
        busy = {p.node_name for p in self.pods.values() if p.node_name and p.phase in live}
        busy |= {name for name, pods in self.guests.items() if pods}  # a guest took its GPUs
        for name in sorted(self.pods):
            p = self.pods[name]
            if p.phase != PodPhase.PENDING:
                continue
            if p.node_name is not None:  # placed: its kubelet starts it, unless it stalls
                on = self.nodes.get(p.node_name)
                if on is not None and on.ready and p.node_name not in self.stalling:
                    self.pods[name] = replace(
                        p, phase=PodPhase.RUNNING, running_since=self.now, waiting_reason=""
                    )
                continue
            for n in sorted(self.nodes.values(), key=lambda x: x.name):
                active = n.owner_uid == self.job.uid and n.role == NodeRole.ACTIVE
                fits = not untolerated(n, self.tolerations.get(name, ()))
                if active and fits and n.ready and not n.unschedulable and n.name not in busy:
                    if n.name not in self.stalling:
                        self.pods[name] = replace(
                            p, node_name=n.name, phase=PodPhase.RUNNING, running_since=self.now
                        )
                    else:
                        self.pods[name] = replace(
                            p, node_name=n.name, waiting_reason="ContainerCreating"
                        )
                    busy.add(n.name)
                    break

    def step(self) -> Plan:
        plan = self.decide()
        self.apply(plan)
        self.schedule()
        return plan

    def settle(self, limit: int = 12) -> list[Plan]:
        """Step until decide asks for nothing (no action but events, and no look again at
        once); returns the plans."""
        plans: list[Plan] = []
        for _ in range(limit):
            plan = self.step()
            plans.append(plan)
            acts = any(not isinstance(a, EmitEvent) for a in plan.actions)
            if not acts and plan.requeue_after != 0:
                return plans
        raise AssertionError(f"not quiet after {limit} steps: {plans[-1].actions}")

    def finish_workers(self, phase_name: str) -> None:
        for name, p in list(self.pods.items()):
            if p.phase_name == phase_name and p.phase == PodPhase.RUNNING:
                self.pods[name] = replace(p, phase=PodPhase.SUCCEEDED, exit_code=0)

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def fail_a_worker(self) -> None:
        """The first running worker (by name) fails; a minute passes and the cluster settles."""
        name = min(p for p in self.pods if self.pods[p].phase == PodPhase.RUNNING)
        self.pods[name] = replace(self.pods[name], phase=PodPhase.FAILED)
        self.advance(60)
        self.settle()

    def held(self, role: NodeRole) -> list[str]:
        return sorted(
            n.name for n in self.nodes.values() if n.owner_uid == self.job.uid and n.role == role
        )

    def running(self) -> list[PodInfo]:
        return [p for p in self.pods.values() if p.phase == PodPhase.RUNNING]


def landed(snap: Snapshot, plan: Plan, settings: Settings = SETTINGS) -> Cluster:
    """The cluster of ``snap`` once ``plan`` landed and the workers it stopped are gone (a
    new generation is created on the pass after that: see ``phased.core.phases``)."""
    assert snap.spec is not None
    cluster = Cluster(
        snap.spec,
        {n.name: n for n in snap.nodes.values()},
        settings=settings,
        job=snap.job,
        status=snap.status,
        pods={p.name: p for p in snap.pods},
        service=snap.service_exists,
        reports=snap.reports,
        report_token=snap.report_token,
        secret=snap.report_secret_exists,
        claim=snap.claim_exists,
    )
    cluster.apply(plan)
    return cluster
