"""Flap detection: a node whose troubles restart the workers again and again has failed
(``NodeFlapping``).

A node of the pool can go NotReady for a few seconds, kill its worker and come back Ready,
again and again. Each time its grace (``notReadyGrace``, ``gpuFaultGrace``, ``gpuDropGrace``)
tells a blip from a loss, so it never fails, while every blip may restart the whole gang.
So the job remembers when troubles began on its nodes, marks those a worker of the job ended
with (on the node, or beside it while it was in trouble: :func:`blame`, when the restart is
decided), and a node whose troubles restarted the workers for the
``failurePolicy.flapping.troubles``-th time (default 3) within ``flapping.window`` (default
24h; ``0s`` turns detection off) has failed, reason ``NodeFlapping``, detected when the last
of them began: answered like any failed node (quarantine, ledger entry, events, swap for a
spare, restart), through the breaker like any failure (the trouble it is in now is marked
as one that stopped the workers only when it is answered, or, while the breaker holds it,
when a worker fails with it: :mod:`phased.core.recovery`). Troubles the workers lived through
count for nothing: a control plane that is briefly out of reach makes every kubelet NotReady
at once, and quarantining a healthy pool for it would be the harm, not the cure.

What counts as a trouble beginning (:func:`remember`), per node the job holds as active or
spare:

* a trouble seen now (NotReady or Unknown, a GPU-fault condition, GPUs short of the phase's
  need; the same troubles :mod:`phased.core.failure` judges) on a node that was under no
  trouble at the last pass the status records (not a suspect, not held by the breaker): its
  start is when the trouble began. Troubles that overlap are one (a node that goes NotReady
  and reports a GPU fault counts once), and one that lasts is counted once, when it began;
* a trouble no pass saw: a node of the pool the status records that is Ready now, under no
  trouble, was under none at that pass, and whose Ready condition turned True after it
  (``accounting.accountedAt``): it was not Ready in between. Its start is unknown, so the
  instant it was Ready again stands for it. (A GPU fault or a GPU drop that came and went
  between two passes leaves no such trace and is not counted.)

The memory is ``status.troubles``, so an operator restarted meanwhile counts on where it
was; it is bounded: only troubles that began within the window, of nodes the job holds
(quarantined ones too, so that a flapping node returned to the spares by ``ReturnToSpares``
is not trusted again before its troubles age out: :func:`quiet_in`), at most ``troubles`` per
node of each kind (marked or not), and at most ``MAX_TROUBLES`` in all (the oldest go first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import FailurePolicy, FailureReason, NodeRole, TroubleStart
from phased.core.failure import Failure, Trouble
from phased.core.model import NodeInfo
from phased.core.times import format_time, parse_time, shifted

MAX_TROUBLES = 256


def _window(policy: FailurePolicy) -> float:
    return float(parse_duration(policy.flapping.window))


def _start(entry: TroubleStart) -> datetime | None:
    return parse_time(entry.since)


def remember(
    history: Sequence[TroubleStart],
    *,
    troubled: Iterable[Trouble],
    troubled_before: set[str],
    pool_before: set[str],
    written: datetime | None,
    nodes: Mapping[str, NodeInfo],
    roles: Mapping[str, NodeRole],
    policy: FailurePolicy,
    now: datetime,
) -> list[TroubleStart]:
    """The record after this pass: the troubles that began since, added (see the module
    docstring), and what fell out of the window or off the job's nodes, dropped.

    ``troubled``: the earliest trouble of each active or spare node in trouble now;
    ``troubled_before`` and ``pool_before``: the nodes in trouble, and the active and spare
    nodes, at the pass that wrote the status (at ``written``)."""
    window = _window(policy)
    if window <= 0:
        return []
    known = {(e.node, e.since) for e in history}
    found = list(history)
    seen_now: set[str] = set()
    for trouble in troubled:
        seen_now.add(trouble.node)
        stamp = format_time(trouble.since)
        if trouble.node in troubled_before or (trouble.node, stamp) in known:
            continue
        found.append(TroubleStart(node=trouble.node, reason=trouble.reason.value, since=stamp))
        known.add((trouble.node, stamp))
    for name in sorted(pool_before):
        if name in seen_now or name in troubled_before or roles.get(name) not in _POOL:
            continue
        back = _ready_again(nodes.get(name), written)
        if back is not None and (name, format_time(back)) not in known:
            found.append(
                TroubleStart(
                    node=name, reason=FailureReason.NOT_READY.value, since=format_time(back)
                )
            )
    return _bounded(found, roles, policy, now)


_POOL = (NodeRole.ACTIVE, NodeRole.SPARE)


def _ready_again(node: NodeInfo | None, written: datetime | None) -> datetime | None:
    """When ``node`` turned Ready after ``written``, if it did (and is Ready now)."""
    if node is None or written is None:
        return None
    ready = node.condition("Ready")
    if ready is None or ready.status != "True" or ready.last_transition is None:
        return None
    return ready.last_transition if ready.last_transition > written else None


def _bounded(
    found: list[TroubleStart],
    roles: Mapping[str, NodeRole],
    policy: FailurePolicy,
    now: datetime,
) -> list[TroubleStart]:
    start = shifted(now, -_window(policy))
    dated = [(t, e) for e in found if (t := _start(e)) is not None and start < t <= now]
    dated = [(t, e) for t, e in dated if e.node in roles]
    dated.sort(key=lambda pair: (pair[0], pair[1].node))
    per_node: dict[tuple[str, bool], int] = {}
    kept: list[TroubleStart] = []
    for _, entry in reversed(dated):  # newest first: each node keeps its latest ones
        key = (entry.node, entry.restarted)  # of each kind: the harmless ones never crowd out
        if per_node.get(key, 0) >= policy.flapping.troubles or len(kept) >= MAX_TROUBLES:
            continue
        per_node[key] = per_node.get(key, 0) + 1
        kept.append(entry)
    kept.reverse()
    return kept


def counted(
    history: Sequence[TroubleStart], node: str, policy: FailurePolicy, now: datetime
) -> list[TroubleStart]:
    """The troubles of ``node`` that began within the window and restarted the workers,
    oldest first."""
    window = _window(policy)
    if window <= 0:
        return []
    start = shifted(now, -window)
    return [
        e
        for e in history
        if e.node == node and e.restarted and (t := _start(e)) is not None and start < t <= now
    ]


def blame(history: Sequence[TroubleStart], node: str, after: datetime) -> list[TroubleStart]:
    """``history`` with the latest trouble of ``node`` that began at or after ``after`` (the
    creation of the workers it ended) marked as one that restarted the workers; unchanged
    when there is none (detection off) or it is marked already."""
    mine = [
        (t, i)
        for i, e in enumerate(history)
        if e.node == node and (t := _start(e)) is not None and t >= after
    ]
    if not mine:
        return list(history)
    _, i = max(mine)
    out = list(history)
    out[i] = out[i].model_copy(update={"restarted": True})
    return out


def failures(
    history: Sequence[TroubleStart],
    held: Mapping[str, NodeRole],
    nodes: Mapping[str, NodeInfo],
    failed: set[str],
    troubled: Mapping[str, TroubleStart],
    policy: FailurePolicy,
    now: datetime,
) -> list[Failure]:
    """The held nodes (active or spare) not failed already whose troubles within the window
    that restarted the workers reach ``flapping.troubles`` — counting the trouble a node is
    in now (``troubled``: its entry), so that the one that would restart them once more is
    answered as a failure instead: failed as ``NodeFlapping``, detected when the last
    began."""
    out: list[Failure] = []
    for name in sorted(held):
        if name in failed or name not in nodes:
            continue
        recent = counted(history, name, policy, now)
        current = troubled.get(name)
        if current is not None and current not in recent:
            recent = [*recent, current]
        if len(recent) < policy.flapping.troubles:
            continue
        last = parse_time(recent[-1].since) or now
        said = ", ".join(f"{e.reason} at {e.since}" for e in recent)
        message = (
            f"node {name} flaps: {len(recent)} troubles that stopped its workers began within "
            f"{policy.flapping.window} ({said})"
        )
        out.append(
            Failure(
                name, held[name], FailureReason.NODE_FLAPPING, message, last, not nodes[name].ready
            )
        )
    return out


def quiet_in(
    history: Sequence[TroubleStart], node: str, policy: FailurePolicy, now: datetime
) -> float | None:
    """Seconds until ``node`` no longer counts as flapping (None: it does not now)."""
    recent = counted(history, node, policy, now)
    if len(recent) < policy.flapping.troubles:
        return None
    # The oldest of the latest ``troubles`` ones leaving the window brings it below.
    oldest = parse_time(recent[-policy.flapping.troubles].since) or now
    return max(0.0, (shifted(oldest, _window(policy)) - now).total_seconds())
