"""Which nodes a phase may use, which to claim, keep and release, and who goes first.

Ownership lives on the Nodes (see :mod:`phased.core.ownership`). A node is **free** when it
carries no Phased mark at all (no ``phased.dev/`` ownership label, annotation or taint,
whoever wrote it), is schedulable and Ready, and has no NoSchedule or NoExecute taint; and
it is claimable when also no pod of others runs on it (:mod:`phased.core.occupancy`). A free
node **matches** a phase when it carries every label of the phase's GPU type (from the
settings) and allocates at least ``gpusPerNode`` of the type's resource; a CPU phase wants
the ``cpu.node_labels`` and no GPU resource at all. Phased never acts on a node that is
neither free nor its own.

Fairness: free nodes of a type go to the first waiting job in line for that type: higher
``spec.priority`` first, then the older job, then the smaller UID. A job that is below its
phase's ``nodes.min`` and not first in line gives back what it holds for the phase, so two
half-claimed jobs can never block each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from phased.api.v1alpha1 import GPUType, Phase
from phased.core.model import Claimant, NodeInfo
from phased.core.ownership import marks
from phased.core.settings import Settings

CPU_TYPE = ""  # the "GPU type" of a CPU-only phase in waiting_for and Claimant.wants
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
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


def is_free(node: NodeInfo) -> bool:
    """No Phased mark, whoever wrote it, and it could take a worker now."""
    if marks(node) or node.unschedulable or not node.ready:
        return False
    return not any(t.effect in _BLOCKING_EFFECTS for t in node.taints)


def has_type_labels(node: NodeInfo, type_key: str, settings: Settings) -> bool:
    """The node carries the labels of ``type_key`` (capacity not checked)."""
    if type_key == CPU_TYPE:
        wanted: Mapping[str, str] = settings.cpu.node_labels
    else:
        conf = settings.gpu_types.get(GPUType(type_key))
        if conf is None:
            return False
        wanted = conf.node_labels
    return all(node.labels.get(k) == v for k, v in wanted.items())


def matches(node: NodeInfo, type_key: str, gpus_per_node: int, settings: Settings) -> bool:
    """Labels and allocatable capacity fit a phase of ``type_key`` with ``gpus_per_node``."""
    if not has_type_labels(node, type_key, settings):
        return False
    if type_key == CPU_TYPE:
        return all(node.allocatable.get(r, 0) == 0 for r in settings.gpu_resources())
    resource = gpu_resource(type_key, settings)
    return resource is not None and node.allocatable.get(resource, 0) >= gpus_per_node


def free_matching(
    nodes: Iterable[NodeInfo], type_key: str, gpus_per_node: int, settings: Settings
) -> list[NodeInfo]:
    return sorted(
        (n for n in nodes if is_free(n) and matches(n, type_key, gpus_per_node, settings)),
        key=lambda n: n.name,
    )


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
    """Candidates ordered nearest to the anchors first; ties by name."""
    near = _Anchors(anchors)
    return sorted(candidates, key=lambda n: (near.distance(n), n.name))


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


def first_in_line(me: Claimant, waiting: Iterable[Claimant], type_key: str) -> bool:
    """No other waiting job that wants ``type_key`` is ahead of ``me``."""
    return not any(
        c.uid != me.uid and c.wants.get(type_key, 0) > 0 and ahead_of(c, me) for c in waiting
    )


# --- sizing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Targets:
    """How many active and spare nodes a phase should hold given ``available`` nodes."""

    active: int
    spares: int

    @classmethod
    def for_available(cls, phase: Phase, spares: int, available: int) -> Targets:
        """``nodes.min`` actives first, then the spares, then actives up to ``nodes.max``.

        Below ``min`` every node is active (the phase waits). Spares come before the actives
        between min and max because a spare saves a restart from checkpoint, while an extra
        active node only adds throughput.
        """
        if available < phase.nodes.min:
            return cls(active=available, spares=0)
        active = phase.nodes.min
        spare = min(spares, available - active)
        active += min(phase.nodes.max - active, available - active - spare)
        return cls(active=active, spares=spare)


def choose_type(
    phase: Phase,
    held: Sequence[NodeInfo],
    free: Mapping[str, Sequence[NodeInfo]],
    settings: Settings,
) -> tuple[str, bool]:
    """The type to size the phase on, and whether held + free nodes of it reach ``min``.

    The first type in preference order that reaches ``min`` wins; when none does, the type
    closest to it (ties by preference) is the one the phase waits for.
    """
    counts: list[tuple[str, int]] = []
    for key in type_keys(phase):
        mine = sum(1 for n in held if has_type_labels(n, key, settings))
        counts.append((key, mine + len(free.get(key, ()))))
    for key, count in counts:
        if count >= phase.nodes.min:
            return key, True
    best = max(counts, key=lambda kc: kc[1])  # max keeps the first of equal counts
    return best[0], False
