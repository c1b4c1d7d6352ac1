"""Interruptions no ledger entry records: *stops* (``status.interruption.stops``).

The ledger records a node taken out of the pool, and charges the interruption from when its
trouble began to when training resumed. But training also stops when no node is taken out:

* a **restart** of the running generation — a worker failed on a healthy node, a node
  blipped within its grace and its worker died with it, the nodes the breaker held came
  back without their workers, a person drained a node. Its stop begins when the trouble that
  caused it began (a node of the generation in trouble now; or, for a worker that ended
  with its node, when that node's last trouble began, else when it was Ready again), else
  at the pass that found it; a restart while a ledger entry is open needs none (the entry
  runs until training resumed);
* the **breaker holding active nodes**: nothing is answered, the generation cannot be whole
  — charged from when the first held active node's trouble began, live while it holds. An
  active node whose worker of the running generation has succeeded holds no training (that
  rank did its part): it opens no stop and keeps none open (:func:`done_nodes`). Nor does
  a hold before the running phase made its first workers (a boundary): nothing trains yet.

A stop that is open takes a new cause in (its start moves back if the cause began earlier):
one interruption, however many restarts it took. It ends when training resumed, never while
the breaker holds an active node: without checkpoint reports, when every worker of the
running generation is Running again or has succeeded (nothing created or deleted in that
pass); with them, at the first report of a worker started after it (a later generation, or a
replacement rank) — or, when none was (the workers lived through the breaker's hold), when
every worker is Running again. A phase boundary or the job's end closes it (:func:`close`).

The interruption charged is the union of ledger entries and stops, so an interval both
cover (a restart beside a node that fails later, a hold a person releases) counts once
(:func:`phased.core.accounting.interruption`). The latest ``MAX_STOPS`` stops are kept;
older closed ones are folded into ``interruption.foldedSeconds`` (their seconds not covered
by what is kept), so the status stays bounded however many restarts a run sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from phased.api.v1alpha1 import HeldFailure, Stop
from phased.core.draft import Draft
from phased.core.model import PodInfo, PodPhase
from phased.core.times import format_time, parse_time

MAX_STOPS = 32
MAX_CAUSE = 256


def stopped(draft: Draft, since: datetime, cause: str) -> None:
    """Training stopped at ``since``: open a stop, or take the cause into the open one."""
    spent = draft.status.interruption
    stops = list(spent.stops)
    for i, stop in enumerate(stops):
        if stop.resumed is not None:
            continue
        start = parse_time(stop.since)
        if start is None or since < start:
            stops[i] = stop.model_copy(update={"since": format_time(since)})
        break
    else:
        text = cause if len(cause) <= MAX_CAUSE else cause[: MAX_CAUSE - 3] + "..."
        stops.append(
            Stop(
                phase=draft.phase.name,
                generation=draft.status.restart_generation,
                since=format_time(min(since, draft.now)),
                cause=text,
            )
        )
    draft.set(interruption=spent.model_copy(update={"stops": stops}))


def resume(draft: Draft, pods: Sequence[PodInfo], whole: bool) -> None:
    """Open stops end when training resumed (see the module docstring).

    ``pods``: the live workers of the running generation; ``whole``: every one of its ranks
    is Running or has succeeded, and this pass created or deleted no worker."""
    done = done_nodes(pods, draft.status.breaker.held)
    if any(h.role == "active" and h.node not in done for h in draft.status.breaker.held):
        return
    spent = draft.status.interruption
    stops = list(spent.stops)
    changed = False
    for i, stop in enumerate(stops):
        since = parse_time(stop.since)
        if stop.resumed is not None or since is None:
            continue
        resumed = _resumed(draft, stop, since, pods, whole)
        if resumed is not None:
            stops[i] = stop.model_copy(update={"resumed": format_time(max(resumed, since))})
            changed = True
    if changed:
        draft.set(interruption=spent.model_copy(update={"stops": stops}))


def gang_started(
    draft: Draft, pods: Sequence[PodInfo], since: datetime, interrupted: int | None
) -> datetime:
    """When the pods say training resumed after an interruption that began at ``since``:
    the last start of a running worker of ``pods`` (the live workers of the running
    generation, every rank Running or succeeded), once the gang was remade after it — a
    generation later than ``interrupted``, or a worker created after it began (a rank
    replaced alone). Never later than now, nor before ``since`` or the last pass whose
    status was written (it found training not resumed, and charged the interruption up to
    then): the kubelet's clock and the operator's may differ. Now when the pods do not say:
    a running worker without its start, or none remade (the workers lived through it)."""
    running = [p for p in pods if p.phase == PodPhase.RUNNING]
    remade = any(
        (interrupted is not None and p.generation > interrupted)
        or (p.created is not None and p.created > since)
        for p in pods
    )
    starts = [p.running_since for p in running]
    if not running or not remade or any(s is None for s in starts):
        return draft.now
    written = parse_time(draft.snap.status.accounting.accounted_at)
    floor = since if written is None else max(since, written)
    return min(draft.now, max(floor, max(s for s in starts if s is not None)))


def done_nodes(pods: Sequence[PodInfo], held: Sequence[HeldFailure]) -> set[str]:
    """The held nodes on which a worker of ``pods`` (the running generation's), made before
    the node's trouble began, has succeeded: its rank did its part, so the breaker holding
    that node stops no training."""
    done: set[str] = set()
    for h in held:
        since = parse_time(h.since)
        if since is not None and any(
            p.node_name == h.node
            and p.phase == PodPhase.SUCCEEDED
            and p.created is not None
            and p.created <= since
            for p in pods
        ):
            done.add(h.node)
    return done


def _resumed(
    draft: Draft, stop: Stop, since: datetime, pods: Sequence[PodInfo], whole: bool
) -> datetime | None:
    if stop.phase != draft.phase.name:  # its phase ended with a status write that was lost
        return draft.now
    if not draft.spec.checkpoint.report:
        return gang_started(draft, pods, since, stop.generation) if whole else None
    first = draft.snap.reports.first_since(stop.phase, since, stop.generation)
    if first is not None:
        return first.time
    same = draft.status.restart_generation == stop.generation
    replaced = any(p.created is not None and p.created > since for p in pods)
    running = all(p.phase == PodPhase.RUNNING for p in pods)
    return draft.now if whole and same and not replaced and running else None


def close(draft: Draft) -> None:
    """A phase or the job ends: stops still open end now."""
    spent = draft.status.interruption
    if all(s.resumed is not None for s in spent.stops):
        return
    stamp = format_time(draft.now)
    stops = [
        s if s.resumed is not None else s.model_copy(update={"resumed": stamp}) for s in spent.stops
    ]
    draft.set(interruption=spent.model_copy(update={"stops": stops}))
