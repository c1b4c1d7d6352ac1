"""Workers that do not start: Pending past ``failurePolicy.pendingGrace`` is a failed start.

A worker of the running generation is *stuck* when it is still Pending ``pendingGrace``
after it was created and its node, if it has one, is Ready and under no suspicion (a node
failure is answered by failure handling, not here). One on no node yet waits for the job's
active nodes no worker of its generation is on: it is not stuck while one of them is in
trouble (the breaker holding it keeps its place, deleted or not), nor while it waits for one
under a condition taint its workers do not tolerate (memory, disk or PID pressure, network
unavailable) that no healthy spare was left to trade for — past the grace that wait turns
``WorkersPending`` True with reason ``NodeCondition`` (one Warning event
``WorkersWaitingOnNodeCondition``) and spends no retry, unless more workers wait than there
are such nodes. Its grace runs from when one was healthy again or its condition passed, if
that was after it was created; a worker placed on a node, from when that node was. Why it
waits is read from the pod: a container's waiting reason (``ErrImagePull``,
``ImagePullBackOff``, ``CreateContainerConfigError``, ...) or the scheduler's
(``Unschedulable``, with its message).

Stuck workers turn ``WorkersPending`` True (one Warning event ``WorkersStuckPending``) and
are a failed start (a node a worker never started on while a peer started elsewhere trades
places with a healthy spare for the retry: :func:`_stalled`): the phase retries it
``pendingRestarts`` times in a row (default 1,
counted in ``status.phases[].pendingRestarts``, back to 0 once every rank of a generation
runs: :func:`_all_started`) — a new generation (``restartScope: Gang``) or
the stuck ranks recreated (``Worker``, while they can rejoin their generation:
:func:`phased.core.recovery.rejoinable`; not while the breaker holds) — and then the job
fails with reason ``WorkersStuckPending``, since a bad image or a worker that fits no node
does not mend by waiting. The retries count as restarts, not against ``restartBudget``
(which counts workers failing on healthy nodes). A start stuck on workers all made from a
worker spec the job no longer has (:func:`phased.core.recovery.made_before_edit`: the image,
a pull secret, the resources were edited while they waited) is not a failed start of the
spec as it is: it is retried from the edit and spends no retry (before, the job failed at
the grace of its last retry though the fix had never been tried); and when none of the
generation's workers has started yet, it is made again from the edit at once, without
waiting for the grace (nothing runs that a restart would stop: a person fixing an image
that cannot be pulled sees the fix tried within seconds, not after ``pendingGrace``). Until
the grace runs out
decide asks to be called again when it would. ``WorkersPending`` turns False once no worker
of the generation is Pending.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import NodeRole
from phased.core import conditions as conds
from phased.core.conditions import ConditionType
from phased.core.draft import WARNING, Draft
from phased.core.failure import healthy_since
from phased.core.model import DeletePod, NodeInfo, PodInfo, PodPhase
from phased.core.phases import (
    fail,
    generation_pods,
    latest_attempts,
    live,
    world_limit,
    world_of,
)
from phased.core.pools import gpu_resource
from phased.core.recovery import (
    blocked_nodes,
    gang_restart,
    made_before_edit,
    rejoinable,
    replace_ranks,
    swap_stalled,
)
from phased.core.tolerations import condition_passed


def _why(pod: PodInfo) -> str:
    reason = pod.waiting_reason or "Pending"
    return f"{pod.name}: {reason}" + (f" ({pod.waiting_message})" if pod.waiting_message else "")


class _Places(NamedTuple):
    """The places a worker not placed yet waits for (:func:`_places`)."""

    troubled: bool  # one is not Ready, a suspect, or held by the breaker (deleted or not)
    blocked: dict[str, str]  # the Ready ones under a condition taint, with its keys
    back: datetime | None  # the latest time one of them was healthy again


def _places(draft: Draft) -> _Places:
    """The places a worker not placed yet waits for: the job's active nodes no worker of the
    running generation is on. Whether one of them is in trouble (not Ready, a suspect, or
    held by the breaker, which keeps its place even once the node is deleted), which are
    Ready but under a condition taint the workers do not tolerate (memory, disk or PID
    pressure, network unavailable: :func:`phased.core.recovery.blocked_nodes`), and
    the latest time one of them was healthy again
    (:func:`phased.core.failure.healthy_since`) or its condition passed
    (:func:`phased.core.tolerations.condition_passed`)."""
    held_back = draft.suspect_nodes | draft.breaker_nodes
    bound = {p.node_name for p in live(generation_pods(draft)) if p.node_name}
    free = [n for n in draft.held(NodeRole.ACTIVE) if n.name not in bound]
    # A held active node that was deleted keeps its place too, though no Node is left.
    gone = any(
        h.role == NodeRole.ACTIVE.value and h.node not in draft.nodes and h.node not in bound
        for h in draft.status.breaker.held
    )
    troubled = gone or any(not n.ready or n.name in held_back for n in free)
    held_blocked = blocked_nodes(draft)
    blocked = {n.name: held_blocked[n.name] for n in free if n.name in held_blocked}
    back = [since for n in free if (since := _healthy_again(draft, n)) is not None]
    return _Places(troubled, blocked, max(back, default=None))


def _healthy_again(draft: Draft, node: NodeInfo) -> datetime | None:
    """When ``node`` was last healthy again (:func:`phased.core.failure.healthy_since`), or
    a condition it was tainted for passed (:func:`phased.core.tolerations.condition_passed`),
    whichever is later; ``None`` while it is not healthy."""
    policy = draft.spec.failure_policy
    resource = gpu_resource(draft.record.gpu_type or "", draft.settings)
    since = healthy_since(node, policy, resource, draft.phase.gpus_per_node)
    if since is None:
        return None
    return max(since, condition_passed(node) or since)


def _waiting(draft: Draft) -> tuple[list[PodInfo], list[PodInfo], dict[str, str]]:
    """The generation's Pending workers past the grace: those stuck, and those not placed
    yet that wait for a place under a condition taint, with those places and their taints
    (and ask to look again at the next).

    A worker not placed yet is not stuck while a place it waits for is in trouble, nor while
    it waits for one under a condition taint (:func:`_places`) — unless more wait than
    there are such places, so that a place free of trouble did not take one either: the
    scheduler has nowhere else to put it, and nothing of the worker's keeps it out. Its
    grace runs from when one was healthy again, if that was after it was made: it could not
    be placed meanwhile. A worker placed runs its grace from when its node was healthy
    again, likewise (the scheduler places it as a condition passes; its kubelet starts it
    after)."""
    grace = parse_duration(draft.spec.failure_policy.pending_grace)
    held_back = draft.suspect_nodes | draft.breaker_nodes
    deleted = draft.deleted_pods()
    places = _places(draft)
    stuck: list[PodInfo] = []
    blocked: list[PodInfo] = []
    for pod in live(generation_pods(draft)):
        if pod.phase != PodPhase.PENDING or pod.name in deleted or pod.created is None:
            continue
        since = pod.created
        if pod.node_name is not None:
            node = draft.nodes.get(pod.node_name)
            if node is None or not node.ready or pod.node_name in held_back:
                continue
            since = max(since, _healthy_again(draft, node) or since)
        elif places.troubled:
            continue
        elif places.back is not None:
            since = max(since, places.back)
        left = grace - (draft.now - since).total_seconds()
        if left > 0:
            draft.later(left)
        elif pod.node_name is None and places.blocked:
            blocked.append(pod)
        else:
            stuck.append(pod)
    if len(blocked) > len(places.blocked):  # some would have gone to a place not blocked
        stuck, blocked = stuck + blocked, []
    by_name = sorted(stuck, key=lambda p: p.name), sorted(blocked, key=lambda p: p.name)
    return *by_name, places.blocked


def stuck_workers(draft: Draft) -> list[PodInfo]:
    """The generation's workers Pending past the grace, not waiting for a place in trouble
    or under a condition taint (:func:`_waiting`)."""
    return _waiting(draft)[0]


def _unstarted_before_edit(draft: Draft) -> list[PodInfo]:
    """The generation's workers when none has started yet (every one Pending, none being
    deleted) and every one was made from a worker spec the job no longer has: the edit can
    be taken at once, since nothing runs that a restart would stop."""
    deleted = draft.deleted_pods()
    pods = live(generation_pods(draft))
    if not pods or any(
        p.phase != PodPhase.PENDING or p.name in deleted or not made_before_edit(draft, p)
        for p in pods
    ):
        return []
    return sorted(pods, key=lambda p: p.name)


def _all_started(draft: Draft, pods: list[PodInfo]) -> bool:
    """Every rank of the running generation has a worker (its newest attempt) that runs or
    has succeeded: the start succeeded, and the failed starts before it are behind the phase
    (``pendingRestarts`` counts those in a row). Not while a rank has no worker yet (between
    a restart's deletions and its creates nothing has started)."""
    world = world_of(pods, draft.status.world_size, world_limit(draft))
    started = {
        p.rank for p in latest_attempts(pods) if p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED)
    }
    return world > 0 and all(rank in started for rank in range(world))


def _stalled(stuck: list[PodInfo], pods: list[PodInfo]) -> dict[str, str]:
    """The nodes the ``stuck`` workers were placed on and never started on, while a peer of
    their generation (``pods``) started on another node: the node, not the worker spec,
    is the likelier cause (:func:`phased.core.recovery.swap_stalled`). Nothing when no
    rank started anywhere (an image that cannot be pulled, a spec that fits no node)."""
    started = {
        p.node_name
        for p in latest_attempts(live(pods))
        if p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED) and p.node_name
    }
    return {
        p.node_name: f"did not start worker {p.name} within pendingGrace "
        f"({p.waiting_reason or 'Pending'}) while its peers started on other nodes"
        for p in stuck
        if started and p.node_name and p.node_name not in started
    }


def _say_blocked(draft: Draft, waiting: list[PodInfo], blocked: dict[str, str]) -> None:
    """Workers waiting past the grace for places under a condition taint (``blocked``: node
    -> its taints), with no healthy spare to trade them for: no failed start (the node's
    trouble, not the worker's), but ``WorkersPending`` says so (one Warning event
    ``WorkersWaitingOnNodeCondition``)."""
    places = ", ".join(f"{name} ({taints})" for name, taints in sorted(blocked.items()))
    shown = ", ".join(p.name for p in waiting[:5]) + (
        f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
    )
    _pending(
        draft,
        "NodeCondition",
        f"{len(waiting)} worker(s) of phase {draft.phase.name} still Pending after "
        f"pendingGrace {draft.spec.failure_policy.pending_grace} ({shown}), waiting for "
        f"node(s) under a condition the workers do not tolerate: {places}; no healthy spare "
        "is left to trade places with, and no start retry is spent until it passes",
        "WorkersWaitingOnNodeCondition",
    )


def _pending(draft: Draft, reason: str, message: str, event_reason: str) -> None:
    """Turn ``WorkersPending`` True for ``reason``, with one Warning event each time it turns
    True or its reason changes while True (a wait on a node's condition that becomes a stuck
    start is news, and so is the reverse)."""
    old = conds.find(draft.conditions, ConditionType.WORKERS_PENDING)
    moved = old is not None and old.status == "True" and old.reason != reason
    kind = ConditionType.WORKERS_PENDING
    if not draft.condition(kind, True, reason, message, WARNING, event_reason) and moved:
        draft.event(WARNING, event_reason, message)


def tend_starts(draft: Draft) -> None:
    """Answer workers stuck Pending: retry the start within ``pendingRestarts``, then fail.
    A generation none of whose workers has started, made before an edit of the phase's
    worker, is made again from the edit at once (:func:`_unstarted_before_edit`)."""
    unstarted = _unstarted_before_edit(draft)
    if unstarted and not draft.breaker_nodes:
        draft.update_record(restarts=draft.record.restarts + 1)
        draft.set(restarts=draft.status.restarts + 1)
        gang_restart(
            draft,
            f"phase {draft.phase.name}'s worker was edited before any of its workers started "
            f"({', '.join(p.name for p in unstarted[:5])}"
            + (f" and {len(unstarted) - 5} more" if len(unstarted) > 5 else "")
            + "): made again from the edit, spending no retry",
        )
        return
    stuck, blocked, places = _waiting(draft)
    if not stuck:
        pods = live(generation_pods(draft))
        if blocked:
            _say_blocked(draft, blocked, places)
        elif not any(p.phase == PodPhase.PENDING for p in pods):
            draft.condition(ConditionType.WORKERS_PENDING, False, "Started", "")
            if draft.record.pending_restarts and _all_started(draft, pods):
                draft.update_record(pending_restarts=0)
        return
    policy = draft.spec.failure_policy
    shown = "; ".join(_why(p) for p in stuck[:5]) + (
        f"; and {len(stuck) - 5} more" if len(stuck) > 5 else ""
    )
    message = (
        f"{len(stuck)} worker(s) of phase {draft.phase.name} still Pending after "
        f"pendingGrace {policy.pending_grace}: {shown}"
    )
    _pending(draft, "StuckPending", message, "WorkersStuckPending")
    used = draft.record.pending_restarts
    edited = all(made_before_edit(draft, p) for p in stuck)
    if used >= policy.pending_restarts and not edited:
        fail(
            draft,
            "WorkersStuckPending",
            f"{message}; the {policy.pending_restarts} retried start(s) allowed by "
            "failurePolicy.pendingRestarts are spent",
        )
        return
    pods = generation_pods(draft)
    alone = rejoinable(draft, pods)
    if alone and draft.breaker_nodes:
        return  # no worker is created while the breaker holds: the ranks' retry waits
    draft.update_record(
        pending_restarts=used + (0 if edited else 1), restarts=draft.record.restarts + 1
    )
    draft.set(restarts=draft.status.restarts + 1)
    why = f"worker(s) stuck Pending: {', '.join(p.name for p in stuck)}" + (
        f" (made before an edit of phase {draft.phase.name}'s worker: retried from the edit, "
        "spending no retry)"
        if edited
        else ""
    )
    if not edited:
        swap_stalled(draft, _stalled(stuck, pods))
    if not alone:
        gang_restart(draft, why)
        return
    world = world_of(live(pods), draft.status.world_size, world_limit(draft))
    for pod in stuck:
        draft.act(DeletePod(pod.name, reason=why))
    replace_ranks(draft, pods, [p.rank for p in stuck if p.rank is not None], world)
