"""Which nodes a phase may use, which to claim, keep and release, and who goes first.

Ownership lives on the Nodes (see :mod:`phased.core.ownership`). A node is **free** when it
carries no Phased mark at all (no ``phased.dev/`` ownership label, annotation or taint,
whoever wrote it), is schedulable and Ready, and has no NoSchedule or NoExecute taint the
phase's workers do not tolerate (:mod:`phased.core.tolerations`); and it is claimable when
also no pod of others runs on it (:mod:`phased.core.occupancy`). A free
node **matches** a phase when it carries every label of the phase's GPU type (from the
settings) and allocates at least ``gpusPerNode`` of the type's resource; a CPU phase wants a
**CPU node**: one carrying the ``cpu.node_labels`` that is not a GPU node (capacity of a
configured GPU resource, or every label of a configured GPU type), unless
``cpu.allowGpuNodes`` is set. A node the job holds **fits** a phase when its labels are the
phase's type (a CPU node for a CPU phase) and its GPU *capacity* reaches ``gpusPerNode``: a
node that could never serve the phase is released when the phase's pool is formed, never
taken for a failure. Phased never acts on a node that is neither free nor its own.

Gang admission and fairness: a phase whose pool is being formed either reaches ``nodes.min``
in one pass — what it holds plus the free nodes not reserved for jobs ahead of it in line —
and claims it all at once, or holds nothing (it gives back what it held for the phase). The
line: higher ``spec.priority`` first, then the older job, then the smaller UID; each job
ahead that waits for the type reserves the nodes it still needs among those it could take
(:func:`kept_for_ahead`: its workers' tolerations and ``gpusPerNode``) (a CPU phase allowed GPU
nodes also leaves the GPU nodes that GPU jobs ahead of it wait for: ``sizing._available``; and
one waiting ahead of GPU jobs is kept, of their type, the GPU nodes it needs beyond the free
CPU nodes: :func:`_wanted_as`).
A job whose ``nodes.min`` exceeds every node of each type it accepts in the cluster (that its
workers tolerate: :func:`type_total`) reserves nothing (it could never start, and must not
block those that can); one that accepts several
types waits for one the cluster has enough of (:func:`choose_type`), and reserves its need on
every accepted type the cluster has enough of (``sizing._wanted_in_line``): alternatives, not a
sum, so it keeps nothing from a job behind it when free nodes of another of its types cover it
— unless they cover it on the type the job behind waits for and that one comes first in its
order of preference (:func:`kept_for_ahead`, :func:`_preferred_to`) — and is counted once
where needs are added up per type (:func:`counted_once`), and among the jobs the free nodes
would admit now (:func:`starting_now`), on the first type in its order of preference that
covers it (:func:`_by_preference`). Spare refills of running
jobs, and a started phase re-forming after a failure, never wait in line to make up the pool
they ran with; growing beyond it, they take only what the jobs ahead leave. A spare refill,
and a restart making up its spares, leave a job ahead the free nodes that would admit it now
(:func:`starting_now`). A running job short of spares is in line for them at its place
(``status.sparesWanted``, a claimant marked ``spares``): the jobs behind keep for it the free
nodes it could take, as for a waiting job ahead (but a waiting GPU job keeps no GPU node for
a CPU phase's spares: that refill never takes one a waiting GPU job wants), and a refill
behind leaves it what it could take now, covered whole or not (:func:`starting_now`; a CPU
phase's, none of the GPU nodes waiting GPU jobs want: :func:`_left_by_cpu_refill`).
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from phased.api.v1alpha1 import GPUType, Phase, TrainingJobSpec
from phased.core import labels
from phased.core.model import Claimant, NodeInfo, NodeSet
from phased.core.ownership import marks
from phased.core.selector import selects
from phased.core.settings import Settings
from phased.core.tolerations import Toleration, foreign_blocking, of_pod_spec, untolerated

CPU_TYPE = ""  # the "GPU type" of a CPU-only phase in waiting_for and Claimant.wants
_NAME = operator.attrgetter("name")
_FAR = 3  # topology distance between nodes with nothing in common


def type_keys(phase: Phase) -> list[str]:
    """The phase's acceptable types in preference order (``[CPU_TYPE]`` for a CPU phase)."""
    return [t.value for t in phase.gpu_types] if phase.gpu_types else [CPU_TYPE]


def gpu_resource(type_key: str, settings: Settings) -> str | None:
    """The extended resource of a GPU type; ``None`` for CPU or an unknown type."""
    if type_key == CPU_TYPE:
        return None
    conf = settings.gpu_types.get(GPUType(type_key))
    return conf.resource if conf is not None else None


def is_free(node: NodeInfo, tolerations: Sequence[Toleration]) -> bool:
    """No Phased mark, whoever wrote it, and it could take a worker now (:func:`unfit_now`
    finds nothing: asked of every free node each pass, so without building its reason)."""
    return (
        not marks(node)
        and not node.unschedulable
        and node.ready
        and not (node.taints and untolerated(node, tolerations))
    )


def unfit_now(node: NodeInfo, tolerations: Sequence[Toleration]) -> str | None:
    """Why ``node`` could not take a worker (whose pod spec has ``tolerations``) now, for
    people: ``Cordoned``, ``NotReady``, or ``Tainted: key:effect`` (a NoSchedule or
    NoExecute taint the worker does not tolerate); ``None`` if it could."""
    if node.unschedulable:
        return "Cordoned"
    if not node.ready:
        return "NotReady"
    taints = [f"{t.key}:{t.effect}" for t in untolerated(node, tolerations)]
    return f"Tainted: {', '.join(taints)}" if taints else None


def _carries(node: NodeInfo, wanted: Mapping[str, str]) -> bool:
    return all(node.labels.get(k) == v for k, v in wanted.items())


def gpu_kind(node: NodeInfo, settings: Settings) -> tuple[str, int] | None:
    """``node`` as a GPU node: its GPU type and GPU count (capacity, else allocatable), or
    ``None`` for a node that is no GPU node. The type is the one whose labels it carries,
    else the first configured type whose resource it has (so that it can be priced)."""
    for gpu, conf in settings.gpu_types.items():
        if _carries(node, conf.node_labels):
            count = node.capacity.get(conf.resource, 0) or node.allocatable.get(conf.resource, 0)
            return gpu.value, count
    for gpu, conf in settings.gpu_types.items():
        count = node.capacity.get(conf.resource, 0) or node.allocatable.get(conf.resource, 0)
        if count > 0:
            return gpu.value, count
    return None


def is_cpu_node(node: NodeInfo, settings: Settings) -> bool:
    """A node a CPU phase may hold: the CPU labels, and no GPU unless the settings allow it."""
    if not _carries(node, settings.cpu.node_labels):
        return False
    return settings.cpu.allow_gpu_nodes or gpu_kind(node, settings) is None


def has_type_labels(node: NodeInfo, type_key: str, settings: Settings) -> bool:
    """The node is of ``type_key``: its labels (GPU capacity not checked); for a CPU phase,
    a CPU node (:func:`is_cpu_node`)."""
    if type_key == CPU_TYPE:
        return is_cpu_node(node, settings)
    conf = settings.gpu_types.get(GPUType(type_key))
    return conf is not None and _carries(node, conf.node_labels)


def fits(node: NodeInfo, type_key: str, gpus_per_node: int, settings: Settings) -> bool:
    """A held node could serve the phase: its type, and a GPU *capacity* of ``gpus_per_node``
    (allocatable may be lower for a while: that is a GPU drop, a failure, not a misfit)."""
    if not has_type_labels(node, type_key, settings):
        return False
    resource = gpu_resource(type_key, settings)
    if resource is None:
        return True
    have = node.capacity.get(resource, 0) or node.allocatable.get(resource, 0)
    return have >= gpus_per_node


def matches(node: NodeInfo, type_key: str, gpus_per_node: int, settings: Settings) -> bool:
    """Labels and allocatable capacity fit a phase of ``type_key`` with ``gpus_per_node``."""
    if not has_type_labels(node, type_key, settings):
        return False
    resource = gpu_resource(type_key, settings)
    if resource is None:
        return type_key == CPU_TYPE
    return node.allocatable.get(resource, 0) >= gpus_per_node


def free_matching(
    nodes: Iterable[NodeInfo],
    type_key: str,
    gpus_per_node: int,
    settings: Settings,
    tolerations: Sequence[Toleration],
) -> list[NodeInfo]:
    """The nodes of ``nodes`` free (:func:`is_free`) that match the phase (:func:`matches`),
    by name. The type's labels and resource are read once, not once per node: this runs
    over every node the job does not hold, thousands a pass."""
    fit = type_fit(type_key, gpus_per_node, settings)
    if fit is None:
        return []
    return sorted((n for n in nodes if fit(n) and is_free(n, tolerations)), key=_NAME)


def type_fit(
    type_key: str, gpus_per_node: int, settings: Settings
) -> Callable[[NodeInfo], bool] | None:
    """Whether a node matches the phase (:func:`matches`), its type's labels and resource
    read once; ``None`` for a GPU type the settings do not know (no node matches)."""
    if type_key == CPU_TYPE:
        return functools.partial(is_cpu_node, settings=settings)
    conf = settings.gpu_types.get(GPUType(type_key))
    if conf is None:
        return None
    wanted, resource = tuple(conf.node_labels.items()), conf.resource

    def fit(n: NodeInfo) -> bool:
        found = n.labels
        for key, value in wanted:
            if found.get(key) != value:
                return False
        return n.allocatable.get(resource, 0) >= gpus_per_node

    return fit


# --- topology -------------------------------------------------------------------------------


def distance(a: NodeInfo, b: NodeInfo) -> int:
    """0 same rack, 1 same block, 2 same zone, 3 otherwise (unknown labels never match)."""
    (za, ba, ra), (zb, bb, rb) = a.topology, b.topology
    if za and za == zb:
        if ba and ba == bb:
            return 0 if ra and ra == rb else 1
        return 2
    return _FAR


def distance_to(node: NodeInfo, anchors: Sequence[NodeInfo]) -> int:
    return _Anchors(anchors).distance(node)


class _Anchors:
    """The anchors' racks, blocks and zones as sets, so that a candidate's distance to the
    nearest anchor is three lookups instead of a loop over the pool (thousands of nodes)."""

    def __init__(self, anchors: Sequence[NodeInfo]) -> None:
        tops = [a.topology for a in anchors]
        self.racks = {(z, b, r) for z, b, r in tops if z and b and r}
        self.blocks = {(z, b) for z, b, _ in tops if z and b}
        self.zones = {z for z, _, _ in tops if z}

    def distance(self, node: NodeInfo) -> int:
        zone, block, rack = node.topology
        if not zone or zone not in self.zones:
            return _FAR
        if not block or (zone, block) not in self.blocks:
            return 2
        return 0 if rack and (zone, block, rack) in self.racks else 1


def nearest_first(candidates: Iterable[NodeInfo], anchors: Sequence[NodeInfo]) -> list[NodeInfo]:
    """Candidates ordered nearest to the anchors first; ties by name. A distance is one of
    four, so the candidates are put in four lists, each then sorted by name: little work
    when they come by name already (:func:`free_matching`'s), thousands a pass."""
    near = _Anchors(anchors)
    by_distance: tuple[list[NodeInfo], ...] = tuple([] for _ in range(_FAR + 1))
    for node in candidates:
        by_distance[near.distance(node)].append(node)
    return [n for nodes in by_distance for n in sorted(nodes, key=_NAME)]


def nearest_fitting(
    nodes: NodeSet, anchors: Sequence[NodeInfo], fits: Callable[[NodeInfo], bool]
) -> Iterator[NodeInfo]:
    """The nodes of ``nodes`` that ``fits`` takes, in the order :func:`nearest_first` puts
    them in (nearest the anchors first, ties by name), found a distance at a time from the
    set's topology index (:class:`~phased.core.model.NodeIndex`): the anchors' racks, then
    the rest of their blocks, then the rest of their zones, each merged by name, and last
    every other node. The first few near a pool are found in its racks and blocks without
    looking at the rest of the cluster; a search that finds too few there goes on, and one
    that reaches the last distance walks the nodes (as nearest_first did every time)."""
    near = _Anchors(anchors)
    racks = [nodes.in_rack(r) for r in near.racks]
    for name in heapq.merge(*racks):
        if fits(node := nodes[name]):
            yield node
    blocks = [nodes.in_block(b) for b in near.blocks]
    for name in heapq.merge(*blocks):
        node = nodes[name]
        if node.topology not in near.racks and fits(node):
            yield node
    zones = [
        nodes.in_block((zone, block))
        for zone in near.zones
        for block in nodes.blocks_of(zone)
        if (zone, block) not in near.blocks
    ]
    for name in heapq.merge(*zones):
        if fits(node := nodes[name]):
            yield node
    rest = sorted(
        (n for n in nodes.values() if not n.topology[0] or n.topology[0] not in near.zones),
        key=_NAME,
    )
    yield from (n for n in rest if fits(n))


def anchors_for(held: Sequence[NodeInfo], free: Sequence[NodeInfo], key: str) -> Sequence[NodeInfo]:
    """What a pool grows around: the nodes it holds; with none yet, one free node of the rack
    with the most free nodes (a new pool is packed into as few racks as it can be), racks
    with as many broken by a hash of ``key`` (the job's UID), so that jobs forming their
    pools at once spread over equally good racks instead of all reaching for the same nodes.
    Nodes without topology labels give no anchor (then names decide)."""
    if held:
        return held
    racks: dict[tuple[str, str, str], list[NodeInfo]] = {}
    for node in free:
        if all(node.topology):
            racks.setdefault(node.topology, []).append(node)
    if not racks:
        return []

    def rank(item: tuple[tuple[str, str, str], list[NodeInfo]]) -> tuple[int, str]:
        digest = hashlib.sha256(f"{key}/{'/'.join(item[0])}".encode()).hexdigest()
        return -len(item[1]), digest

    _, members = min(racks.items(), key=rank)
    return [min(members, key=lambda n: n.name)]


def farthest_first(candidates: Iterable[NodeInfo], anchors: Sequence[NodeInfo]) -> list[NodeInfo]:
    """Candidates ordered farthest from the anchors first; ties by name, last name first."""
    return list(reversed(nearest_first(candidates, anchors)))


# --- fairness -------------------------------------------------------------------------------

_EPOCH = datetime.min.replace(tzinfo=UTC)


def _line_key(claimant: Claimant) -> tuple[int, datetime, str]:
    created = claimant.created or _EPOCH
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (-claimant.priority, created, claimant.uid)


def ahead_of(other: Claimant, me: Claimant) -> bool:
    """``other`` comes before ``me`` in the line: priority, then age, then UID."""
    return _line_key(other) < _line_key(me)


def counted_once(
    claimants: Iterable[Claimant], nodes: Sequence[NodeInfo], settings: Settings
) -> dict[str, int]:
    """What ``claimants`` want of each type, each claimant counted on one type only: one
    waiting for any of several types publishes its need on each (``sizing._wanted_in_line``),
    and those are alternatives, not a sum. In line order, each is counted on the type where it
    is nearest to being covered by the ``nodes`` (free ones, or spares a CPU phase would give
    back) that *it* could run on (:func:`could_run_on`: its ``gpusPerNode`` and tolerations)
    and no claimant before it was counted on (ties by its order of preference:
    :func:`_by_preference`): one that such nodes of a type cover is counted there — on the
    first it prefers of several they cover, as its own pass starts on it — and wants nothing
    of its other types. Nodes it could not run on cover nothing of its need."""
    used: set[str] = set()
    counted: dict[str, int] = {}
    for claimant in sorted(claimants, key=_line_key):
        wants = _by_preference(claimant)
        if not wants:
            continue
        takes = {
            k: [
                n.name
                for n in nodes
                if n.name not in used and could_run_on(claimant, n, k, settings)
            ]
            for k in wants
        }
        key = min(wants, key=lambda k: max(0, wants[k] - len(takes[k])))
        counted[key] = counted.get(key, 0) + wants[key]
        used.update(takes[key][: wants[key]])
    return counted


def could_run_on(claimant: Claimant, node: NodeInfo, type_key: str, settings: Settings) -> bool:
    """``node``, whoever holds it now, is of a shape the phase ``claimant`` waits to start
    could run on: Ready and schedulable, its type with the claimant's ``gpusPerNode``, and no
    blocking taint its workers do not tolerate but Phased's own ownership taints (a spare a
    CPU phase gives back loses them). For free nodes it is :func:`could_take`."""
    tolerations = claimant.tolerations or ()
    blocking = [t for t in untolerated(node, tolerations) if t.key not in labels.OWNERSHIP_TAINTS]
    return (
        node.ready
        and not node.unschedulable
        and not blocking
        and matches(node, type_key, claimant.gpus_per_node or 0, settings)
    )


LineShape = tuple[int, tuple[Toleration, ...], tuple[str, ...], tuple[str, ...]]


def waiting_shape(spec: TrainingJobSpec, phase_index: int) -> LineShape | None:
    """The shape of the phase a job at ``phase_index`` waits to start, as the line reads it
    (:class:`phased.core.model.Claimant`): its ``gpusPerNode``, its workers' tolerations,
    the job's ``gpuFaultConditions`` and the types the phase accepts in its order of
    preference; ``None`` when the index names no phase."""
    if not 0 <= phase_index < len(spec.phases):
        return None
    phase = spec.phases[phase_index]
    faults = tuple(spec.failure_policy.gpu_fault_conditions)
    tolerations = of_pod_spec(spec.worker_pod(phase).spec)
    return phase.gpus_per_node, tolerations, faults, tuple(type_keys(phase))


def could_take(claimant: Claimant, node: NodeInfo, type_key: str, settings: Settings) -> bool:
    """``node`` is free and of a shape the phase ``claimant`` waits to start could run on:
    its type with the claimant's ``gpusPerNode``, and no blocking taint its workers do not
    tolerate (for a claimant whose shape is known); and none of the claimant's
    ``gpuFaultConditions`` is True on it (its own pass never claims such a node: it would
    fail at once)."""
    tolerations = claimant.tolerations or ()
    gpus = claimant.gpus_per_node or 0
    faulty = any(
        (c := node.condition(kind)) is not None and c.status == "True"
        for kind in claimant.fault_conditions
    )
    return not faulty and is_free(node, tolerations) and matches(node, type_key, gpus, settings)


def kept_for_ahead(
    me: Claimant,
    waiting: Iterable[Claimant],
    type_key: str,
    mine: Sequence[NodeInfo],
    free: Iterable[NodeInfo],
    settings: Settings,
) -> set[str]:
    """Of ``mine`` (the free nodes of ``type_key`` ``me`` could claim, nearest first), those
    kept for the waiting jobs ahead of it, in line order: each job ahead first counts towards
    its need the other ``free`` nodes it could take that ``me`` cannot (:func:`could_take`),
    then is kept the rest of its need among ``mine`` that it could take, the farthest from
    ``me`` first. A node of the type that a job ahead could never run on (a taint its workers
    do not tolerate, fewer GPUs than its ``gpusPerNode``) is not kept for it. A job ahead
    (of known shape) that waits for any of several types is kept nothing when the other
    ``free`` nodes of another of its types cover its need (less those the jobs before it in
    line could take of them): it can start on those (:func:`_covered_elsewhere`) — but when
    the free nodes cover it on ``type_key`` too, only a type it prefers to ``type_key``
    counts (:func:`_preferred_to`): its own pass starts it on the first it prefers. A CPU
    phase ahead, when CPU phases may hold GPU nodes, wants ``type_key`` too
    (:func:`_wanted_as`): the free CPU nodes, then the other free nodes it could take, count
    towards its need first, and the rest is kept among ``mine``; before, it was kept nothing,
    and its pass and this job's claimed the same GPU nodes. Such a CPU phase that runs, short
    of spares (``claimant.spares``), is kept no GPU node from a waiting job (``me`` not
    ``spares``): its refill never takes one a waiting GPU job wants, whatever its place;
    only from another refill (``me.spares``), which its refill does not leave them to; and
    from any job, only what its refill takes (:func:`_left_by_cpu_refill`)."""
    waiting = tuple(waiting)
    ahead = sorted(
        (c for c in waiting if c.uid != me.uid and any(n > 0 for n in c.wants.values())),
        key=_line_key,
    )
    ahead = [c for c in ahead if ahead_of(c, me)]
    if not any(_wanted_as(c, type_key, settings) is not None for c in ahead):
        return set()
    names = {n.name for n in mine}
    # What any job ahead could take beside them: unmarked, Ready, schedulable (each job's
    # own tolerations and GPUs are judged below). Most nodes of a busy cluster are held, so
    # this is the short list.
    idle = [
        n for n in free if n.name not in names and not marks(n) and n.ready and not n.unschedulable
    ]
    others = [n for n in idle if has_type_labels(n, type_key, settings)]
    used: set[str] = set()
    kept: set[str] = set()
    for claimant in ahead:
        known = claimant.gpus_per_node is not None and claimant.tolerations is not None
        key = _wanted_as(claimant, type_key, settings)
        need = claimant.wants.get(key, 0) if key is not None else 0
        if key is None or need <= 0:
            if known:  # it does not want the type: what free nodes of its own it will take
                _covered_elsewhere(claimant, type_key, idle, used, settings)
            continue
        if key == CPU_TYPE != type_key:
            # A CPU phase allowed GPU nodes: the free CPU nodes first, then any GPU node of
            # another type or that ``me`` cannot take, as its own pass claims them; what is
            # left of its need is kept among ``mine``.
            takes = [
                n.name
                for n in _cpu_nodes_first(idle, settings)
                if n.name not in used and could_take(claimant, n, CPU_TYPE, settings)
            ]
            used.update(takes[:need])
            need -= min(need, len(takes))
            if claimant.spares and not me.spares:
                # A running CPU phase short of spares: its refill never takes a GPU node a
                # waiting GPU job wants (``sizing._kept_for_gpu_jobs``), so a waiting job
                # keeps none for it; kept, each kept the nodes for the other, idle.
                continue
        elif known:
            takes = [
                n.name
                for n in others
                if n.name not in used and could_take(claimant, n, type_key, settings)
            ]
            here = len(takes) + sum(
                1
                for n in mine
                if n.name not in kept and could_take(claimant, n, type_key, settings)
            )
            first = _preferred_to(claimant, type_key) if here >= need else None
            if len(takes) < need and _covered_elsewhere(
                claimant, type_key, idle, used, settings, first
            ):
                continue
            used.update(takes[:need])
            need -= min(need, len(takes))
        pool = list(mine)
        if claimant.spares and key == CPU_TYPE and settings.cpu.allow_gpu_nodes:
            # A CPU phase short of spares is kept only what its refill takes: none of the GPU
            # nodes waiting GPU jobs want (kept, it left them to those jobs, which left them
            # to this one, which kept them for it: idle).
            seen = [*mine, *idle]
            left = set(_left_by_cpu_refill([n.name for n in seen], waiting, seen, settings))
            pool = [n for n in mine if n.name in left]
        for node in reversed(pool):
            if need <= 0:
                break
            if node.name in kept or (known and not could_take(claimant, node, key, settings)):
                continue
            kept.add(node.name)
            need -= 1
    return kept


def _wanted_as(claimant: Claimant, type_key: str, settings: Settings) -> str | None:
    """The type under which ``claimant`` wants free nodes of ``type_key``: that type when it
    waits for it; ``CPU_TYPE`` for a CPU phase when CPU phases may hold GPU nodes
    (``cpu.allowGpuNodes``: its own pass takes a GPU node of any type once the free CPU
    nodes are too few, whatever the GPU jobs behind it want); else ``None``."""
    if claimant.wants.get(type_key, 0) > 0:
        return type_key
    if type_key != CPU_TYPE and settings.cpu.allow_gpu_nodes and claimant.wants.get(CPU_TYPE, 0):
        return CPU_TYPE
    return None


def _cpu_nodes_first(nodes: Iterable[NodeInfo], settings: Settings) -> list[NodeInfo]:
    """``nodes`` with the CPU-only ones first (stable otherwise): the order in which a CPU
    phase allowed GPU nodes claims them (``sizing._claim_order``)."""
    return sorted(nodes, key=lambda n: gpu_kind(n, settings) is not None)


def starting_now(
    me: Claimant, waiting: Iterable[Claimant], free: Sequence[NodeInfo], settings: Settings
) -> list[Claimant]:
    """The waiting jobs ahead of ``me`` that the ``free`` nodes would admit now, in line
    order: the free nodes of one of the types each wants that it could take
    (:func:`could_take`), less those the jobs before it in line could take (each job
    ahead counts its need on the first type in its order of preference that covers it, as
    its own pass starts on it, or on every type it wants when none does, as the line keeps
    it there), reach its need. A running job ahead short of spares (``claimant.spares``)
    is among them whenever it could take some of the free nodes: its refill takes what it
    can. A running generation's spare refill, and a restart making up its spares, leave
    them their nodes: their own pass, woken by the same nodes, takes them."""
    ahead = sorted(
        (
            c
            for c in waiting
            if c.uid != me.uid and ahead_of(c, me) and any(n > 0 for n in c.wants.values())
        ),
        key=_line_key,
    )
    used: set[str] = set()
    starting: list[Claimant] = []
    for claimant in ahead:
        wants = _by_preference(claimant)
        # A CPU phase allowed GPU nodes takes the CPU nodes first, as its own pass does: the
        # GPU nodes beyond them are left for the GPU jobs after it.
        takes = {
            k: [
                n.name
                for n in (_cpu_nodes_first(free, settings) if k == CPU_TYPE else free)
                if n.name not in used and could_take(claimant, n, k, settings)
            ]
            for k in wants
        }
        if claimant.spares:
            # A running job short of spares: its refill takes what it can of them now — a
            # CPU phase's, no GPU node a waiting GPU job wants (``_left_by_cpu_refill``).
            if CPU_TYPE in takes and settings.cpu.allow_gpu_nodes:
                takes[CPU_TYPE] = _left_by_cpu_refill(takes[CPU_TYPE], waiting, free, settings)
            mine = [name for key in wants for name in takes[key][: wants[key]]]
            used.update(mine)
            if mine:
                # Kept, as it takes them: what it takes now, not the whole of its need.
                counts = {key: min(wants[key], len(takes[key])) for key in wants}
                starting.append(replace(claimant, wants=counts))
            continue
        covered = [k for k in wants if len(takes[k]) >= wants[k]]
        for key in covered[:1] or list(wants):
            used.update(takes[key][: wants[key]])
        if covered:
            starting.append(claimant)
    return starting


def _left_by_cpu_refill(
    names: list[str], waiting: Iterable[Claimant], free: Sequence[NodeInfo], settings: Settings
) -> list[str]:
    """Of the free nodes a running CPU phase short of spares could take (``names``, CPU nodes
    first), those its refill takes: per GPU type, none of the last as many as the waiting GPU
    jobs want of it (each counted once: :func:`counted_once`), whatever their place in line
    (``sizing._kept_for_gpu_jobs``). Counted on them, the refill behind it left them to it,
    while it left them to the waiting GPU job, which kept them for that refill: idle."""
    gpu_jobs = [c for c in waiting if not c.spares and any(c.wants.get(k) for k in c.wants if k)]
    wanted = counted_once(gpu_jobs, [n for n in free if not marks(n)], settings)
    by_name = {n.name: n for n in free}
    left = list(names)
    for key, want in wanted.items():
        if key == CPU_TYPE or want <= 0:
            continue
        of_type = [m for m in left if has_type_labels(by_name[m], key, settings)]
        drop = set(of_type[len(of_type) - min(want, len(of_type)) :])
        left = [m for m in left if m not in drop]
    return left


def _by_preference(claimant: Claimant) -> dict[str, int]:
    """What ``claimant`` wants of each type (those it wants some of), in its order of
    preference: of several types the free nodes cover, its own pass starts it on the first.
    Types it does not name, or all when its preference is unknown, come after, by name."""
    order = claimant.types or ()
    keys = sorted(
        (k for k, n in claimant.wants.items() if n > 0),
        key=lambda k: (order.index(k) if k in order else len(order), k),
    )
    return {k: claimant.wants[k] for k in keys}


def _preferred_to(claimant: Claimant, type_key: str) -> frozenset[str] | None:
    """The types ``claimant`` prefers to ``type_key`` (``None``: its preference unknown, or
    ``type_key`` not among its types). Its own pass starts it on the first type in its order
    that the free nodes cover, so when they cover it on ``type_key``, a job behind it keeps
    them for it unless one of those types covers it too: when ``type_key`` comes first, the
    job ahead takes it whatever the free nodes of its other types."""
    if claimant.types is None or type_key not in claimant.types:
        return None
    return frozenset(claimant.types[: claimant.types.index(type_key)])


def _covered_elsewhere(
    claimant: Claimant,
    type_key: str,
    idle: Sequence[NodeInfo],
    used: set[str],
    settings: Settings,
    among: frozenset[str] | None = None,
) -> bool:
    """``claimant``'s need of a type other than ``type_key`` (of ``among``, when given) is
    covered by ``idle`` nodes of it that it could take and no job before it counted
    (``used``, which gets them)."""
    for key, need in sorted(claimant.wants.items()):
        if key == type_key or need <= 0 or (among is not None and key not in among):
            continue
        takes = [
            n.name for n in idle if n.name not in used and could_take(claimant, n, key, settings)
        ]
        if len(takes) >= need:
            used.update(takes[:need])
            return True
    return False


def type_total(
    nodes: Iterable[NodeInfo],
    type_key: str,
    gpus_per_node: int,
    settings: Settings,
    tolerations: Sequence[Toleration] | None,
) -> int:
    """Nodes of ``type_key`` in the cluster, whoever holds them, quarantined ones, those
    out of the operator's ``nodeSelector`` and those someone tainted that the phase's
    workers (``tolerations``; ``None``: taints not judged) do not tolerate excepted (a
    group dedicated to another team; not Phased's own taints on the nodes jobs hold, nor
    those the node controllers derive from a node's health or a cordon: they come and go):
    the most a phase of this type could ever be given as the cluster stands."""
    return sum(
        1
        for n in nodes
        if n.labels.get(labels.LABEL_ROLE) != "quarantined"
        and selects(settings.node_selector, n.labels)
        and (tolerations is None or not foreign_blocking(n, tolerations))
        and matches(n, type_key, gpus_per_node, settings)
    )


# --- sizing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Targets:
    """How many active and spare nodes a phase should hold given ``available`` nodes."""

    active: int
    spares: int

    @classmethod
    def for_available(cls, phase: Phase, spares: int, available: int, world: int = 0) -> Targets:
        """``nodes.min`` actives first, then the spares, then actives up to ``nodes.max``.

        Below ``min`` every node is active (the phase waits). Spares come before the actives
        between min and max because a spare saves a restart from checkpoint, while an extra
        active node only adds throughput.

        A phase that has run (``world``: the world it ran with) and is formed again after a
        failure keeps that world, within ``[min, max]``, before its spares whenever the nodes
        make it: the spares promoted for the places lost stay active and the spares refill
        afterwards. Before, the pool re-formed by the rule above turned them back into
        spares: one failure the spares covered shrank an elastic job (two failures, a job of
        4 at min 2, halved it) to keep idle spares, and its ledger named as the failed
        node's replacement a node that was a spare again.
        """
        if available < phase.nodes.min:
            return cls(active=available, spares=0)
        kept = min(max(world, phase.nodes.min), phase.nodes.max)
        if world and available >= kept:
            spare = min(spares, available - kept)
            return cls(
                active=kept + min(phase.nodes.max - kept, available - kept - spare), spares=spare
            )
        active = phase.nodes.min
        spare = min(spares, available - active)
        active += min(phase.nodes.max - active, available - active - spare)
        return cls(active=active, spares=spare)


def choose_type(
    phase: Phase,
    held: Sequence[NodeInfo],
    free: Mapping[str, Sequence[NodeInfo]],
    settings: Settings,
    totals: Mapping[str, int] | None = None,
) -> tuple[str, bool]:
    """The type to size the phase on, and whether held + free nodes of it reach ``min``.

    The first type in preference order that reaches ``min`` wins; when none does, the phase
    waits for the type closest to it (ties by preference) among those of which the cluster
    has ``min`` nodes at all (``totals``, :func:`type_total`): a type it could never get is
    no type to wait in line for. When no type has that many, the closest one is named.
    """
    counts: list[tuple[str, int]] = []
    for key in type_keys(phase):
        mine = sum(1 for n in held if has_type_labels(n, key, settings))
        counts.append((key, mine + len(free.get(key, ()))))
    for key, count in counts:
        if count >= phase.nodes.min:
            return key, True
    possible = [kc for kc in counts if totals is None or totals.get(kc[0], 0) >= phase.nodes.min]
    best = max(possible or counts, key=lambda kc: kc[1])  # max keeps the first of equal counts
    return best[0], False
