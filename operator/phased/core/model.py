"""What the decide step sees (a snapshot) and what it returns (a plan of actions).

These are plain frozen values: the kube layer builds a :class:`Snapshot` from the cluster,
:func:`phased.core.decide.decide` turns it into a :class:`Plan`, and the reconciler performs
the plan's actions through the kube layer, then writes ``Plan.status`` once.
"""

from __future__ import annotations

import bisect
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any, TypeVar, overload

from phased.api.v1alpha1 import NodeRole, TrainingJobSpec, TrainingJobStatus
from phased.core import labels
from phased.core.reports import ReportStore

# ---------------------------------------------------------------------------------------------
# Observed state
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"
    # ``timeAdded`` as the API wrote it (NoExecute taints; the eviction clock of pods that
    # tolerate them for a while): kept so that a node patched from the view keeps it. No
    # decision reads it, and two taints differing only there are the same taint.
    time_added: str = field(default="", compare=False)


@dataclass(frozen=True)
class NodeCondition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    last_transition: datetime | None = None
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class NodeInfo:
    """A Node as the operator's in-memory view holds it."""

    name: str
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    conditions: tuple[NodeCondition, ...] = ()
    allocatable: Mapping[str, int] = field(default_factory=dict)  # whole units, e.g. GPUs
    capacity: Mapping[str, int] = field(default_factory=dict)
    created: datetime | None = None
    uid: str = ""  # metadata.uid: which Node object this is (a name may be reused)

    def condition(self, kind: str) -> NodeCondition | None:
        for cond in self.conditions:
            if cond.type == kind:
                return cond
        return None

    @cached_property
    def ready(self) -> bool:
        cond = self.condition("Ready")
        return cond is not None and cond.status == "True"

    @cached_property
    def true_conditions(self) -> frozenset[str]:
        """The types of the node's conditions that are True, read once per node object:
        every pass asks each node the job does not hold for a fault condition."""
        return frozenset(c.type for c in self.conditions if c.status == "True")

    @cached_property
    def marks(self) -> frozenset[str]:
        """The ownership marks the node carries (label, annotation and taint keys), read
        once per node object: every pass asks it of every node the job does not hold."""
        found = {k for k in labels.OWNERSHIP_LABELS if k in self.labels}
        found |= {k for k in labels.OWNERSHIP_ANNOTATIONS if k in self.annotations}
        found |= {t.key for t in self.taints if t.key in labels.OWNERSHIP_TAINTS}
        return frozenset(found)

    @property
    def owner_uid(self) -> str | None:
        return self.labels.get(labels.LABEL_JOB_UID)

    @property
    def installation(self) -> str | None:
        return self.labels.get(labels.LABEL_INSTALLATION)

    @property
    def role(self) -> NodeRole | None:
        value = self.labels.get(labels.LABEL_ROLE)
        try:
            return NodeRole(value) if value else None
        except ValueError:
            return None

    @cached_property
    def topology(self) -> tuple[str, str, str]:
        """(zone, block, rack) from the node's topology labels; empty where unknown (read
        once per node object: ordering candidates nearest first asks for it per comparison
        key, thousands of times a pass)."""
        return (
            self.labels.get("topology.kubernetes.io/zone", ""),
            self.labels.get("topology.phased.dev/block", ""),
            self.labels.get("topology.phased.dev/rack", ""),
        )


_T = TypeVar("_T")
Rack = tuple[str, str, str]  # (zone, block, rack), as NodeInfo.topology
Block = tuple[str, str]  # (zone, block); the block "" holds a zone's nodes with no block label


class NodeIndex:
    """What a :class:`NodeSet` keeps beside the nodes by name, so that a pass finds the few
    nodes it needs without asking every node of the cluster: the names by ``job-uid`` label
    value (a job's own nodes), and by topology — by rack, by block (sorted: ties in the claim
    order go by name), and each zone's blocks (the nearest free nodes of a pool are found a
    rack, a block, a zone at a time: :func:`phased.core.pools.nearest_fitting`), and the
    names of the nodes not Ready (the outage rule counts them against their zone's size).

    Kept as the nodes come, change and go (:meth:`put`): an entry changes only when a node's
    label or topology does, each as a new immutable value, so a :meth:`copy` (dicts copied,
    values shared; the set of nodes not Ready copied whole) keeps what it held while the
    original moves on."""

    __slots__ = ("blocks", "labelled", "not_ready", "racks", "zones")

    def __init__(self) -> None:
        self.labelled: dict[str, frozenset[str]] = {}
        self.racks: dict[Rack, tuple[str, ...]] = {}  # only racks named by all three labels
        self.blocks: dict[Block, tuple[str, ...]] = {}  # nodes with a zone label, by name
        self.zones: dict[str, frozenset[str]] = {}  # the blocks of each zone
        # The nodes not Ready: a set changed in place (in a wide outage, thousands), so a
        # copy copies it.
        self.not_ready: set[str] = set()

    @classmethod
    def of(cls, nodes: Iterable[NodeInfo]) -> NodeIndex:
        """The index of ``nodes`` (one per name), built at once: each entry sorted once,
        not kept sorted node by node (a zone's nodes with no block label are one entry of
        thousands, and a relist builds the index afresh)."""
        labelled: dict[str, set[str]] = {}
        racks: dict[Rack, list[str]] = {}
        blocks: dict[Block, list[str]] = {}
        zones: dict[str, set[str]] = {}
        index = cls()
        for node in nodes:
            if (uid := node.owner_uid) is not None:
                labelled.setdefault(uid, set()).add(node.name)
            if not node.ready:
                index.not_ready.add(node.name)
            placed = _entries(node.topology)
            if placed is None:
                continue
            rack, (zone, block) = placed
            if rack is not None:
                racks.setdefault(rack, []).append(node.name)
            blocks.setdefault((zone, block), []).append(node.name)
            zones.setdefault(zone, set()).add(block)
        index.labelled = {uid: frozenset(names) for uid, names in labelled.items()}
        index.racks = {key: tuple(sorted(names)) for key, names in racks.items()}
        index.blocks = {key: tuple(sorted(names)) for key, names in blocks.items()}
        index.zones = {zone: frozenset(found) for zone, found in zones.items()}
        return index

    def copy(self) -> NodeIndex:
        other = NodeIndex()
        other.labelled = dict(self.labelled)
        other.racks = dict(self.racks)
        other.blocks = dict(self.blocks)
        other.zones = dict(self.zones)
        other.not_ready = set(self.not_ready)
        return other

    def put(self, name: str, before: NodeInfo | None, after: NodeInfo | None) -> None:
        """Node ``name`` was ``before`` (``None``: not there) and is now ``after`` (``None``:
        gone)."""
        old = before.owner_uid if before is not None else None
        new = after.owner_uid if after is not None else None
        if old != new:
            if old is not None:
                _drop(self.labelled, old, name)
            if new is not None:
                self.labelled[new] = self.labelled.get(new, frozenset()) | {name}
        if after is None or after.ready:
            self.not_ready.discard(name)
        else:
            self.not_ready.add(name)
        was = before.topology if before is not None else None
        now = after.topology if after is not None else None
        if was == now:
            return
        if was is not None and (placed := _entries(was)) is not None:
            self._unplace(name, *placed)
        if now is not None and (placed := _entries(now)) is not None:
            self._place(name, *placed)

    def _place(self, name: str, rack: Rack | None, where: Block) -> None:
        zone, block = where
        if rack is not None:
            self.racks[rack] = _sorted_with(self.racks.get(rack, ()), name)
        self.blocks[where] = _sorted_with(self.blocks.get(where, ()), name)
        self.zones[zone] = self.zones.get(zone, frozenset()) | {block}

    def _unplace(self, name: str, rack: Rack | None, where: Block) -> None:
        if rack is not None:
            _drop_sorted(self.racks, rack, name)
        if not _drop_sorted(self.blocks, where, name):
            _drop(self.zones, where[0], where[1])


def _entries(where: Rack) -> tuple[Rack | None, Block] | None:
    """Where the index keeps a node of topology ``where``: its rack (None unless all three
    labels name it) and its block; None for a node with no zone label, kept in neither."""
    zone, block, rack = where
    if not zone:
        return None
    return (where if block and rack else None), (zone, block)


def _drop(found: dict[str, frozenset[str]], key: str, name: str) -> None:
    left = found.get(key, frozenset()) - {name}
    if left:
        found[key] = left
    else:
        found.pop(key, None)


def _sorted_with(names: tuple[str, ...], name: str) -> tuple[str, ...]:
    if name in names:
        return names
    at = bisect.bisect_left(names, name)
    return (*names[:at], name, *names[at:])


def _drop_sorted(found: dict[Any, tuple[str, ...]], key: Any, name: str) -> bool:
    """Take ``name`` out of ``found[key]``; False when nothing is left under ``key``."""
    left = tuple(n for n in found.get(key, ()) if n != name)
    if left:
        found[key] = left
        return True
    found.pop(key, None)
    return False


class NodeSet(Mapping[str, NodeInfo]):
    """Every node the operator sees, by name, with a :class:`NodeIndex` of them: a pass finds
    its job's nodes, and the free nodes nearest its pool, there, not by asking every node of
    the cluster (the kube layer's node view keeps both as the nodes change, and a pass reads
    a copy of them; :meth:`of` builds them from a list of nodes). Read-only."""

    __slots__ = ("_index", "_nodes")

    def __init__(self, nodes: dict[str, NodeInfo], index: NodeIndex) -> None:
        """``nodes`` by name and their ``index``, as :meth:`of` would make it: taken as they
        are, never changed (the caller's copies)."""
        self._nodes = nodes
        self._index = index

    @classmethod
    def of(cls, nodes: Iterable[NodeInfo]) -> NodeSet:
        """The set of ``nodes`` (of two of one name, the later)."""
        by_name = {n.name: n for n in nodes}
        return cls(by_name, NodeIndex.of(by_name.values()))

    def labelled(self, job_uid: str) -> frozenset[str]:
        """The names of the nodes whose ``job-uid`` label is ``job_uid`` (whether the job
        holds them is :func:`phased.core.ownership.holds`'s to say)."""
        return self._index.labelled.get(job_uid, frozenset())

    def in_rack(self, rack: Rack) -> tuple[str, ...]:
        """The names of the nodes of ``rack`` (all three labels named), sorted."""
        return self._index.racks.get(rack, ())

    def in_block(self, block: Block) -> tuple[str, ...]:
        """The names of the nodes of ``block`` (the block ``""``: the zone's nodes with no
        block label), sorted."""
        return self._index.blocks.get(block, ())

    def blocks_of(self, zone: str) -> frozenset[str]:
        """The blocks the nodes of ``zone`` lie in (``""`` among them for nodes with none)."""
        return self._index.zones.get(zone, frozenset())

    def in_zone(self, zone: str) -> int:
        """How many nodes carry the zone label ``zone``."""
        blocks = self._index.blocks
        return sum(len(blocks.get((zone, b), ())) for b in self.blocks_of(zone))

    def not_ready(self) -> frozenset[str]:
        """The names of the nodes not Ready (:attr:`NodeInfo.ready`)."""
        return frozenset(self._index.not_ready)

    def with_nodes(self, nodes: Iterable[NodeInfo]) -> NodeSet:
        """This set with ``nodes`` put in (a node of a name already here replaces it)."""
        extra = list(nodes)
        if not extra:
            return self
        by_name, index = dict(self._nodes), self._index.copy()
        for node in extra:
            index.put(node.name, by_name.get(node.name), node)
            by_name[node.name] = node
        return NodeSet(by_name, index)

    def __getitem__(self, name: str) -> NodeInfo:
        return self._nodes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    @overload
    def get(self, name: str, /) -> NodeInfo | None: ...

    @overload
    def get(self, name: str, /, default: NodeInfo | _T) -> NodeInfo | _T: ...

    def get(self, name: str, /, default: Any = None) -> Any:
        return self._nodes.get(name, default)

    def keys(self) -> KeysView[str]:
        return self._nodes.keys()

    def values(self) -> ValuesView[NodeInfo]:
        return self._nodes.values()

    def items(self) -> ItemsView[str, NodeInfo]:
        return self._nodes.items()

    def __repr__(self) -> str:
        return f"NodeSet({list(self._nodes)!r})"


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class PodInfo:
    """A worker pod of the job (selected by the job-uid label)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    node_name: str | None = None
    phase: PodPhase = PodPhase.PENDING
    # metadata.deletionTimestamp: the pod is being deleted, and the grace it was given ends then
    stop_by: datetime | None = None
    ready: bool = False
    created: datetime | None = None
    started: datetime | None = None  # status.startTime
    # When the pod's last container started (the latest ``state.running.startedAt`` of its
    # containers, as the kubelet wrote it); None when no container says it runs.
    running_since: datetime | None = None
    # When the ``worker`` container ended (its ``state.terminated.finishedAt``); None while it
    # runs, or when the kubelet did not say.
    finished: datetime | None = None
    exit_code: int | None = None
    reason: str = ""
    # The ``worker`` container has ended (``phase`` is then what it ended as) while another
    # container of the pod, a sidecar that is no init container, still runs or waits: the pod
    # holds its node (and its GPUs) until Phased deletes it (phased.core.phases.lingering).
    lingering: bool = False
    # The kubelet rejected the pod at admission (Failed, no container started; ``reason`` is
    # the check that refused it): the scheduler placed it, and its node would not run it — a
    # device plugin failing to allocate its GPUs (UnexpectedAdmissionError), resources taken
    # by pods the scheduler does not know of (OutOf<resource>), labels changed under it.
    rejected: bool = False
    # The kubelet stopped the worker for its node's sake and left it Failed: evicted under
    # node pressure (memory, disk, PIDs), killed for the node's graceful shutdown, preempted
    # for a critical pod. What it said ("" when none of these): the pod's ``DisruptionTarget``
    # condition, or on a kubelet that sets none, its ``Evicted``/``Preempting``/shutdown reason.
    disruption: str = ""
    # Why a Pending pod does not run: a container's waiting reason (ErrImagePull,
    # ImagePullBackOff, CreateContainerConfigError, ...) or the scheduler's (Unschedulable).
    waiting_reason: str = ""
    waiting_message: str = ""
    # The UID its controlling ownerReference names ("" when none): the job's for every worker
    # Phased makes; a pod that only carries the job's labels is not the job's.
    controller: str = ""
    # Where the pod was made to keep its checkpoints (phased.core.workers): the claim of its
    # volume ``phased-checkpoints`` ("" when it has none; None when the pod has no ``worker``
    # container, so nothing is known), that volume's mount path in the ``worker`` container,
    # and the container's ``PHASED_CHECKPOINT_ROOT`` (``<checkpoint.path>/<job>``).
    checkpoint_claim: str | None = None
    checkpoint_mount: str | None = None
    checkpoint_root: str | None = None

    @property
    def deleting(self) -> bool:
        return self.stop_by is not None

    @property
    def phase_name(self) -> str:
        return self.labels.get(labels.LABEL_PHASE, "")

    @property
    def rank(self) -> int | None:
        try:
            return int(self.labels.get(labels.LABEL_RANK, ""))
        except ValueError:
            return None

    @property
    def generation(self) -> int:
        try:
            return int(self.labels.get(labels.LABEL_GENERATION, "0"))
        except ValueError:
            return 0


@dataclass(frozen=True)
class NodePod:
    """Any pod bound to a node, as far as deciding who may have the node needs it.

    Built by the kube layer from a LIST of the node's pods: ``daemon`` (a DaemonSet owns
    it), ``mirror`` (a static pod the kubelet runs from a file) and ``operator`` (it is the
    operator's own pod, from the downward API) are read there, once.
    """

    namespace: str
    name: str
    node: str
    created: datetime | None = None
    priority_class: str = ""
    daemon: bool = False
    mirror: bool = False
    operator: bool = False
    terminal: bool = False  # Succeeded or Failed: holds nothing any more
    deleting: bool = False  # metadata.deletionTimestamp is set: on its way out
    # The UID its controlling ownerReference names ("" when none): a worker's is its job's.
    controller: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class JobRef:
    namespace: str
    name: str
    uid: str
    generation: int = 1
    created: datetime | None = None
    deleting: bool = False


@dataclass(frozen=True)
class Claimant:
    """Another job that is waiting for nodes: used to hand free nodes out fairly."""

    uid: str
    priority: int
    created: datetime | None
    wants: Mapping[str, int]  # GPU type value ("H100", "" for CPU) -> nodes still missing
    # The shape of the phase it waits to start, so that only free nodes it could take are
    # kept for it: its ``gpusPerNode`` and its workers' tolerations (``None``: unknown, any
    # node of the type it wants is taken to be one it could take).
    gpus_per_node: int | None = None
    tolerations: tuple[Mapping[str, Any], ...] | None = None
    # Its ``gpuFaultConditions``: a free node on which one is True is one it never claims.
    fault_conditions: tuple[str, ...] = ()
    # The types its phase accepts, in its order of preference (``None``: unknown): of several
    # that free nodes cover, its own pass starts it on the first.
    types: tuple[str, ...] | None = None
    # It runs, short of spares (``status.sparesWanted``): it takes whatever free nodes it can
    # of its need, as its refill does, rather than waiting for all of it at once.
    spares: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Everything decide needs, observed at one instant."""

    job: JobRef
    spec: TrainingJobSpec | None  # None when the spec failed validation
    spec_error: str | None
    status: TrainingJobStatus
    nodes: NodeSet  # every node the operator knows (its own and free ones), by name
    pods: tuple[PodInfo, ...]  # the job's worker pods
    service_exists: bool = False
    waiting: tuple[Claimant, ...] = ()  # other jobs waiting for capacity
    known_node_names: frozenset[str] | None = None  # None: the node view is not synced yet
    reports: ReportStore = field(default_factory=ReportStore)  # from the job's annotation
    report_token: str | None = None  # the job's report token; None: the operator has no key
    report_secret_exists: bool = False  # the token's Secret was ensured by this operator
    claim_exists: bool = False  # the checkpoint claim was ensured by this operator
    # Top-level status fields that could not be read: left out of ``status``, never written.
    unreadable_status: tuple[str, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)  # the job's phased.dev/ ones
    # Pods on the nodes the reconciler looked at: claim candidates it checked (and found
    # occupied) and the job's nodes whose guests are being cleared. A node absent here was
    # not looked at, not found empty.
    node_pods: Mapping[str, tuple[NodePod, ...]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Actions: what the reconciler must do. Each is idempotent when performed.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimNode:
    """Label and taint a free node for the job, if its resourceVersion still matches.

    ``replaces``: the failed node whose place this claim fills (the pool regrowing from free
    nodes when the spares did not suffice), written on the node with ``at`` like
    ``SetNodeRole``'s; the ledger takes it from the node once the claim has landed."""

    node: str
    resource_version: str
    role: NodeRole
    replaces: str | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class SetNodeRole:
    """Change the role of a node the job already holds (e.g. promote a spare).

    ``replaces``: the failed node this promotion answers, written on the node with ``at``
    (``ANNOTATION_REPLACES``) and cleared by any other role change; ``troubled``: it is a node
    in trouble within its grace, not failed (yet), whose place this one takes, and the note
    says so. ``stalled``: when, and what a
    worker did not do on the node, swapped out of the active pool for it, written on it as
    it is (``ANNOTATION_STALLED``); the mark is cleared when the role changes again."""

    node: str
    role: NodeRole
    replaces: str | None = None
    at: datetime | None = None
    stalled: str | None = None
    troubled: bool = False


@dataclass(frozen=True)
class ReleaseNode:
    """Remove the job's labels and taint from a node it holds; the node becomes free."""

    node: str


@dataclass(frozen=True)
class QuarantineNode:
    """Cordon the node, mark it quarantined, and record why and when."""

    node: str
    reason: str
    message: str
    detected: datetime
    cordoned: datetime


@dataclass(frozen=True)
class UnquarantineNode:
    """Uncordon a healthy quarantined node and make it a spare of the job again (a cordon
    someone else put there before the quarantine, which its note records, stays)."""

    node: str


@dataclass(frozen=True)
class CreatePod:
    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class DeletePod:
    name: str
    force: bool = False  # grace period 0: the node's kubelet is gone
    reason: str = ""
    grace_seconds: int | None = None  # None: the pod's own terminationGracePeriodSeconds


@dataclass(frozen=True)
class EnsureSecret:
    """Create the Secret unless it exists (never read back, never updated)."""

    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class EnsureClaim:
    """Create the PersistentVolumeClaim unless it exists."""

    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class EvictPod:
    """Ask a guest to leave a node that became active: the Eviction API (its
    PodDisruptionBudget may refuse), or, with ``delete``, a plain delete with its own grace
    period once the eviction deadline has passed."""

    namespace: str
    name: str
    node: str
    delete: bool = False


@dataclass(frozen=True)
class FinishClearing:
    """No guest is left on the node: drop its ``ANNOTATION_CLEARING``."""

    node: str


@dataclass(frozen=True)
class StartClearing:
    """Mark an active node the job holds ``ANNOTATION_CLEARING`` (now, unless it carries it):
    workers are about to be placed there, and guests that came meanwhile must leave."""

    node: str


@dataclass(frozen=True)
class EnsureService:
    manifest: Mapping[str, Any]


@dataclass(frozen=True)
class EmitEvent:
    type: str  # "Normal" | "Warning"
    reason: str  # PascalCase, machine-readable
    message: str  # for people


Action = (
    ClaimNode
    | SetNodeRole
    | ReleaseNode
    | QuarantineNode
    | UnquarantineNode
    | CreatePod
    | DeletePod
    | EvictPod
    | FinishClearing
    | StartClearing
    | EnsureService
    | EnsureSecret
    | EnsureClaim
    | EmitEvent
)


@dataclass(frozen=True)
class Plan:
    """The result of one decision: actions in order, the status to write, and when to look again."""

    actions: tuple[Action, ...]
    status: TrainingJobStatus
    requeue_after: float | None = None  # seconds; None: wait for the next event or resync
    finished: bool = False  # the job holds nothing any more (deletion may proceed)
