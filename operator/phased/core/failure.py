"""Node failure: detection with grace periods, the blast-radius breaker, spare choice.

Only nodes the job holds as active or spare are examined. A node has failed when

* its ``Ready`` condition is False/Unknown for ``notReadyGrace``, counted from the
  condition's ``last_transition`` (not from when Phased noticed, so a restarted operator does
  not wait twice). A node seen Ready again restarts the clock; a change between False and
  Unknown does not (the kubelet said NotReady, then went silent: it was never back), so a
  trouble the job already recorded — a suspect, or a failure the breaker holds — keeps its
  first-seen time while it lasts;
* one of ``gpuFaultConditions`` is True for ``gpuFaultGrace``, from its transition (kept the
  same way);
* it is Ready but allocates fewer GPUs than ``gpusPerNode`` for ``gpuDropGrace``: no
  condition records when that began, so the first sighting is kept in ``status.suspects``;
* it is in ``status.pool`` but gone from a synced node view (``NodeDeleted``, at once).
* its trouble began too often within ``flapping.window`` (``NodeFlapping``, at once: see
  :mod:`phased.core.flapping`).

Until a grace runs out the node is a *suspect*, and decide asks to be called again exactly
when it would run out.

The breaker: when the failures found in one pass (none answered yet), plus the pool nodes
in trouble but still within their grace (a rack going dark is one event even when its
nodes' graces run out a second apart), plus those answered inside ``massFailure.window``
since the last release by a person, exceed ``maxFailedPercent``
of the pool (active + spares), it *trips*: none of them is answered — no cordon, no pod
deletion, no swap — ``MassFailure`` is set and one Warning event says so, since so many
nodes at once means the network or the power, and a person should look. One failure is
always answered, however small the pool — unless it lies in an *outage* (:func:`outage`):
more than half of the nodes the operator sees (or more than ``maxFailedPercent``, when that
is higher), of the whole cluster or of the failed node's zone (at least two), went NotReady
together with them (at most ``massFailure.window`` before the failures began, or since),
whoever holds them. Then the breaker trips too, whatever the job's own count: no fleet or
zone loses half its machines at once — its control plane or its network did, and the nodes
are likely sound. A rack going dark is no outage: each job answers its share, onto nodes
elsewhere, as it answers any failure.

Once tripped it *holds* every failure found, old and new, whatever the window says, with
their first-seen times kept in ``status.breaker.held`` (never restarted while held); a held
node keeps its place in the pool even once deleted (:mod:`phased.core.recovery`). It lets
go in exactly two ways, each with one event: every held node recovered (``MassFailureCleared``,
nothing is quarantined), or a person set the TrainingJob annotation
``phased.dev/proceed-after-mass-failure`` to a time at or after the trip (``phased proceed``
writes it; ``MassFailureReleased``): then the failures still there are answered as usual, and
the breaker is armed again at once for new failures, counting only those answered after the
release. (A job that ends meanwhile gives the held nodes back with its pool, and the breaker
lets go with them: ``MassFailureCleared``, reason ``JobFinished``, in
:mod:`phased.core.decide`.)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import FailurePolicy, FailureReason, FailureRecord, NodeRole, Suspect
from phased.core.model import NodeInfo, NodeSet
from phased.core.pools import nearest_first
from phased.core.times import format_time, parse_time, shifted
from phased.core.tolerations import Toleration, foreign_blocking


@dataclass(frozen=True)
class Trouble:
    """Something wrong with a node, and since when."""

    node: str
    reason: FailureReason
    message: str
    since: datetime
    grace: float

    def expires(self) -> datetime:
        return shifted(self.since, self.grace)


@dataclass(frozen=True)
class Failure:
    """A node whose trouble outlasted its grace."""

    node: str
    role: NodeRole
    reason: FailureReason
    message: str
    detected: datetime
    kubelet_gone: bool  # not Ready or deleted: its pods must be force-deleted


@dataclass(frozen=True)
class Detection:
    failures: tuple[Failure, ...]
    suspects: tuple[Suspect, ...]
    wake_in: float | None  # seconds until the next grace runs out
    # The earliest trouble of each held node in trouble now, failed or suspect.
    troubled: tuple[Trouble, ...] = ()


def _recorded(previous: Sequence[Suspect], node: str, reason: str) -> datetime | None:
    """When the job first saw ``node`` in this trouble, if it recorded it (a suspect, or a
    failure the breaker holds)."""
    for suspect in previous:
        if suspect.node == node and suspect.reason == reason:
            return parse_time(suspect.since)
    return None


def _first_seen(previous: Sequence[Suspect], node: str, reason: str, now: datetime) -> datetime:
    return _recorded(previous, node, reason) or now


def _began(
    previous: Sequence[Suspect],
    node: str,
    reason: str,
    transition: datetime | None,
    now: datetime,
) -> datetime:
    """When a trouble read from a condition began: its transition, or the earlier time the
    job recorded for it (the condition changed between two bad states since)."""
    known = [t for t in (transition, _recorded(previous, node, reason)) if t is not None]
    return min(known) if known else now


def troubles(
    node: NodeInfo,
    policy: FailurePolicy,
    resource: str | None,
    gpus_per_node: int,
    previous: Sequence[Suspect],
    now: datetime,
) -> list[Trouble]:
    """Everything wrong with ``node`` now, each with its start and grace."""
    found: list[Trouble] = []
    ready = node.condition("Ready")
    if ready is None or ready.status != "True":
        status = ready.status if ready is not None else "missing"
        transition = ready.last_transition if ready is not None else None
        since = _began(previous, node.name, FailureReason.NOT_READY, transition, now)
        found.append(
            Trouble(
                node.name,
                FailureReason.NOT_READY,
                f"node {node.name} Ready={status}"
                + (f" ({ready.reason})" if ready is not None and ready.reason else ""),
                since,
                parse_duration(policy.not_ready_grace),
            )
        )
    for kind in policy.gpu_fault_conditions:
        cond = node.condition(kind)
        if cond is not None and cond.status == "True":
            since = _began(previous, node.name, FailureReason.GPU_FAULT, cond.last_transition, now)
            detail = cond.message or cond.reason
            found.append(
                Trouble(
                    node.name,
                    FailureReason.GPU_FAULT,
                    f"node {node.name} reports {kind}" + (f": {detail}" if detail else ""),
                    since,
                    parse_duration(policy.gpu_fault_grace),
                )
            )
            break
    if resource is not None and node.ready:
        have = node.allocatable.get(resource, 0)
        if have < gpus_per_node:
            found.append(
                Trouble(
                    node.name,
                    FailureReason.GPU_DROPPED,
                    f"node {node.name} allocates {have} {resource}, the phase needs "
                    f"{gpus_per_node}",
                    _first_seen(previous, node.name, FailureReason.GPU_DROPPED, now),
                    parse_duration(policy.gpu_drop_grace),
                )
            )
    return found


def detect(
    held: Mapping[str, NodeRole],
    nodes: Mapping[str, NodeInfo],
    deleted: Iterable[tuple[str, NodeRole]],
    policy: FailurePolicy,
    resource: str | None,
    gpus_per_node: int,
    previous: Sequence[Suspect],
    now: datetime,
) -> Detection:
    """Failures and suspects among the held nodes (``held``: name → active/spare role)."""
    failures: list[Failure] = []
    suspects: list[Suspect] = []
    wake: list[float] = []
    troubled: list[Trouble] = []
    for name, role in deleted:
        failures.append(
            Failure(name, role, FailureReason.NODE_DELETED, f"node {name} was deleted", now, True)
        )
    for name in sorted(held):
        node = nodes[name]
        found = troubles(node, policy, resource, gpus_per_node, previous, now)
        if found:
            troubled.append(min(found, key=lambda t: t.since))
        expired = [t for t in found if t.expires() <= now]
        if expired:
            first = min(expired, key=lambda t: t.since)
            failures.append(
                Failure(name, held[name], first.reason, first.message, first.since, not node.ready)
            )
            continue
        for trouble in found:
            suspects.append(
                Suspect(
                    node=name,
                    reason=trouble.reason.value,
                    since=format_time(trouble.since),
                    message=trouble.message,
                )
            )
            wake.append((trouble.expires() - now).total_seconds())
    return Detection(tuple(failures), tuple(suspects), min(wake) if wake else None, tuple(troubled))


class BreakerMove(StrEnum):
    """What the breaker does with the failures of one pass."""

    ANSWER = "Answer"  # not tripped, and these failures do not trip it: answer them
    TRIP = "Trip"  # too many at once: hold them all (MassFailure, one Warning event)
    HOLD = "Hold"  # tripped before and failures remain: keep holding, no event
    CLEAR = "Clear"  # tripped before and every held node recovered (one Normal event)
    RELEASE = "Release"  # a person said proceed: answer what is held (one Normal event)


@dataclass(frozen=True)
class Outage:
    """Nodes of one domain that went NotReady together, whoever holds them."""

    domain: str  # "the cluster", "zone z1", "block b1", "rack r1"
    down: int
    size: int


OUTAGE_PERCENT = 50  # an outage darkens more than this share of a domain at least


def _domains(node: NodeInfo) -> list[tuple[str, ...]]:
    """The domains ``node`` lies in, widest first: the cluster, then its zone (when its
    topology labels name one). Racks and blocks are not: a rack's switch or power going is a
    failure of those nodes, which other nodes can replace; a zone's or the whole cluster's
    nodes going dark together is the network or the control plane."""
    zone = node.topology[0]
    return [(), (zone,)] if zone else [()]


def _domain_name(key: tuple[str, ...]) -> str:
    return f"zone {key[0]}" if key else "the cluster"


def outage(
    failed: Sequence[Failure],
    nodes: NodeSet,
    policy: FailurePolicy,
) -> Outage | None:
    """The widest domain of a failed node (:func:`_domains`) in which more than half of the
    domain's nodes (or more than ``maxFailedPercent``, when higher; at least two) are
    NotReady since a time at most ``massFailure.window``
    before the earliest of these failures began — every node the operator sees counts, the
    job's, other jobs' and free ones — or ``None``.

    Measured from the failures' own start, not from now, so a ``notReadyGrace`` longer than
    the window, or an operator restarted long after, sees the same outage. A node NotReady
    since before (a machine down for repair), or since it joined (:func:`_joining`), did not
    go down together with them and counts only in the domain's size."""
    names = [f.node for f in failed if f.node in nodes]
    if not names:
        return None
    began = min(f.detected for f in failed if f.node in nodes)
    start = shifted(began, -parse_duration(policy.mass_failure.window))
    window = parse_duration(policy.mass_failure.window)
    # Only the failed nodes' domains are counted, and only the nodes not Ready are looked
    # at: the node set keeps their names, and how many nodes each zone has (every pass that
    # answers a failure asks, and it walked every node the operator sees).
    keys = sorted({k for n in names for k in _domains(nodes[n])}, key=lambda k: (len(k), k))
    size = {key: nodes.in_zone(key[0]) if key else len(nodes) for key in keys}
    down = dict.fromkeys(keys, 0)
    for name in nodes.not_ready():
        node = nodes[name]
        zone = (node.topology[0],)
        counted = zone in size
        ready = node.condition("Ready")
        if (
            ready is not None
            and ready.last_transition is not None
            and ready.last_transition >= start
            and not _joining(node, ready.last_transition, window)
        ):
            down[()] += 1
            if counted:
                down[zone] += 1
    for key in keys:
        percent = max(OUTAGE_PERCENT, policy.mass_failure.max_failed_percent)
        allowed = max(1, math.floor(size[key] * percent / 100))
        if down[key] > allowed:
            return Outage(_domain_name(key), down[key], size[key])
    return None


def _joining(node: NodeInfo, transition: datetime, window: float) -> bool:
    """The node is NotReady since it joined (within ``window`` of its creation): a node an
    autoscaler is still bringing up never went dark, and a burst of them is no outage."""
    if node.created is None:
        return False
    created = node.created if node.created.tzinfo else node.created.replace(tzinfo=UTC)
    return transition <= shifted(created, window)


@dataclass(frozen=True)
class BreakerVerdict:
    move: BreakerMove
    count: int  # failures counted: unanswered ones now, plus answered ones inside the window
    pool_size: int
    allowed: int
    outage: Outage | None = None  # what tripped it, when the job's own count did not

    @property
    def percent(self) -> float:
        return 100.0 * self.count / self.pool_size if self.pool_size else 100.0

    @property
    def answers(self) -> bool:
        return self.move in (BreakerMove.ANSWER, BreakerMove.RELEASE)

    @property
    def holds(self) -> bool:
        return self.move in (BreakerMove.TRIP, BreakerMove.HOLD)


def proceed_time(value: str | None) -> datetime | None:
    """The instant a proceed annotation approves (an RFC 3339 time), or ``None``."""
    return parse_time(value.strip()) if value else None


def judge_breaker(
    *,
    tripped: bool,
    tripped_at: datetime | None,
    failures: Sequence[Failure],
    troubled: int,
    ledger: Sequence[FailureRecord],
    pool_size: int,
    policy: FailurePolicy,
    proceed: str | None,
    released_at: datetime | None,
    released_by: str | None,
    now: datetime,
    outage: Outage | None = None,
) -> BreakerVerdict:
    """The breaker's move for this pass (see the module docstring).

    Not tripped: it trips when the failures found now (none answered yet), plus the
    ``troubled`` nodes still within their grace, plus the failures answered inside the
    window — those detected inside it and cordoned after the last release by a person —
    exceed ``maxFailedPercent`` of the pool (at least one is always
    allowed), or when ``outage`` names a domain the failures lie in that went dark together
    (:func:`outage`). Tripped: it holds until no held node is failed any more (``CLEAR``) or a
    person approves (``RELEASE``) with a proceed time at or after the trip, not the value
    that released it last time; the window plays no part once it holds.
    """
    window = parse_duration(policy.mass_failure.window)
    start = shifted(now, -window)
    allowed = max(1, math.floor(pool_size * policy.mass_failure.max_failed_percent / 100))
    answered = 0
    for record in ledger:
        detected = parse_time(record.detected)
        cordoned = parse_time(record.cordoned) or detected
        if detected is None or detected < start:
            continue
        if released_at is not None and cordoned is not None and cordoned <= released_at:
            continue
        answered += 1
    count = len(failures) + (0 if tripped else troubled + answered)
    if tripped:
        approved = proceed_time(proceed)
        if not failures:
            move = BreakerMove.CLEAR
        elif (
            approved is not None
            and (tripped_at is None or approved >= tripped_at)
            and proceed != released_by
        ):
            move = BreakerMove.RELEASE
        else:
            move = BreakerMove.HOLD
    elif failures and count > allowed:
        move = BreakerMove.TRIP
    elif failures and outage is not None:
        return BreakerVerdict(BreakerMove.TRIP, count, pool_size, allowed, outage)
    else:
        move = BreakerMove.ANSWER
    return BreakerVerdict(move, count, pool_size, allowed)


def choose_spare(
    lost: NodeInfo | None,
    spares: Sequence[NodeInfo],
    actives: Sequence[NodeInfo],
    tolerations: Sequence[Toleration],
    troubled: Collection[str] = frozenset(),
) -> NodeInfo | None:
    """The Ready spare nearest the lost node (rack, block, zone, any; ties by name), one
    under no suspicion before any in ``troubled`` (a suspect within its grace: GPUs missing,
    a GPU fault, however near it lies; it may still be chosen when no other is left). A
    spare a person cordoned, or tainted with a taint the workers (whose pod spec has
    ``tolerations``) do not tolerate, is never chosen: its worker could not be placed there."""
    anchors = [lost] if lost is not None else list(actives)
    ordered = nearest_first(usable_spares(spares, tolerations), anchors)
    ordered.sort(key=lambda s: s.name in troubled)  # stable: nearest first within each
    return ordered[0] if ordered else None


def usable_spares(spares: Sequence[NodeInfo], tolerations: Sequence[Toleration]) -> list[NodeInfo]:
    """The spares a worker could be placed on now: Ready, not cordoned by a person, and
    carrying no taint the workers do not tolerate."""
    return [
        s
        for s in spares
        if s.ready and not s.unschedulable and not foreign_blocking(s, tolerations)
    ]


def healthy_since(
    node: NodeInfo, policy: FailurePolicy, resource: str | None, gpus_per_node: int
) -> datetime | None:
    """When ``node`` last became healthy (latest transition), or ``None`` if it is not.

    Healthy: Ready, no GPU-fault condition True, and all its GPUs allocatable again.
    """
    ready = node.condition("Ready")
    if ready is None or ready.status != "True" or ready.last_transition is None:
        return None
    if resource is not None and node.allocatable.get(resource, 0) < gpus_per_node:
        return None
    latest = ready.last_transition
    for kind in policy.gpu_fault_conditions:
        cond = node.condition(kind)
        if cond is None:
            continue
        if cond.status == "True":
            return None
        if cond.last_transition is not None and cond.last_transition > latest:
            latest = cond.last_transition
    return latest
