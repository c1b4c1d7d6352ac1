"""Answering failure: quarantine, swap in a spare, restart, and take healed nodes back.

For every failed node in one call (several at once are all answered, each with its own
swap): ``QuarantineNode`` (detected = when the trouble began, cordoned = now), a ledger
entry, events ``NodeFailed`` and ``NodeQuarantined``. Then, level-based over the running
generation: workers on a node that is no longer active are deleted (forced when the kubelet
is gone), a Ready spare nearest the lost node (one under no suspicion first) is promoted for
each missing active node (``SparePromoted``), and the lost ranks are restarted per
``restartScope`` (Gang: a new generation over the new active pool; Worker: a replacement of
each lost rank, which the scheduler puts on the promoted node — unless the rank is rank 0
or rank 0's node is in trouble (its agent hosts the rendezvous store), a worker of the
generation has succeeded, or the running phase's worker was edited since the generation
was made, when the gang restarts, since a rank started alone could not rejoin it
(:func:`rejoinable`), and not while the breaker holds, when the replacement waits). When the
spares do not cover every lost place (``SparesExhausted``) none is promoted here: the gang
restarts and the pool is formed again by the admission rule (:mod:`phased.core.sizing`:
``nodes.min`` actives, the spares, then actives up to ``max``), smaller within
``[min, max]`` or waiting for capacity. The spare pool is refilled afterwards (see
:mod:`phased.core.sizing`).

``restartBudget`` limits restarts caused by workers failing on healthy nodes (the code's
fault); restarts after node failures are counted in ``status.restarts`` and bounded by the
interruption budget instead, since a 100-day run on hundreds of nodes sees dozens of them.
Workers failing beside a node of the generation that failed or is in trouble (a suspect, or
held by the breaker), or on a node that was in trouble while they ran and is healthy again,
are that node's doing: their restart does not spend the budget. Nor does that of workers
failing while ranks of their generation never came to the rendezvous (:func:`_excused`: the
namespace refuses their creates, or their worker never started), which its event says. A
gang restart whose only losses are workers lost with their node before they started
(Pending, bound to it) is not counted in ``status.restarts`` either: the generation never
trained (:func:`_never_started`).

A counted restart that no open ledger entry covers, and the breaker's hold of active nodes,
are charged to the interruption account as stops (:mod:`phased.core.interruptions`).

Ledger recovery: a node of the job labelled quarantined whose ``ANNOTATION_QUARANTINE`` has
no ledger entry (same node, same detected instant) gets one, so an operator killed between
the cordon and the status write loses nothing and duplicates nothing.

A quarantined node that heals: with ``nodeReturn: Quarantine`` it stays until a person
releases it (remove the ``phased.dev/*`` labels, taints and the quarantine annotation, and
uncordon it). With ``ReturnToSpares`` it must stay healthy for ``healthyBeforeReturn``,
counted from its latest Ready or GPU-condition transition (a flapping node never gets
there), and no longer count as flapping (:mod:`phased.core.flapping`: its troubles within
``flapping.window`` fewer than ``flapping.troubles``); then it rejoins the spares if they
are short, or is released — but not while the breaker holds failures: a failed spare it
holds still counts among the spares, so the node stays quarantined until the breaker lets
go (then a proceed that quarantines the spare makes it the spare). A returned node that
fails again opens a new ledger entry.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import (
    MAX_NODES,
    FailureReason,
    FailureRecord,
    Healed,
    HeldFailure,
    JobState,
    NodeReturnPolicy,
    NodeRole,
    RestartScope,
    Suspect,
    TroubleStart,
)
from phased.core import checkpoints, flapping, interruptions, labels
from phased.core.conditions import ConditionType, find
from phased.core.draft import NORMAL, WARNING, Draft
from phased.core.failure import (
    BreakerMove,
    BreakerVerdict,
    Detection,
    Failure,
    choose_spare,
    detect,
    healthy_since,
    judge_breaker,
    outage,
    usable_spares,
)
from phased.core.ledger import mark_replaced, recover_replacements
from phased.core.model import (
    CreatePod,
    DeletePod,
    NodeInfo,
    PodInfo,
    PodPhase,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
    UnquarantineNode,
)
from phased.core.phases import (
    ENDED,
    fail,
    generation_pods,
    interrupted_generation,
    latest_attempts,
    live,
    world_limit,
    world_of,
)
from phased.core.pools import gpu_resource, has_type_labels
from phased.core.quarantine import decode_quarantine
from phased.core.selector import selects
from phased.core.times import format_time, parse_time
from phased.core.tolerations import condition_blocking, foreign_blocking
from phased.core.workers import Worker, worker_specs

# The rank whose torchrun agent hosts the c10d rendezvous store: ``PET_RDZV_ENDPOINT`` is its
# pod's address (phased.core.workers), and torchrun hosts the store in the agent there.
STORE_RANK = 0


def _next_id(draft: Draft) -> int:
    return max((r.id for r in draft.ledger), default=0) + 1


def recover_ledger(draft: Draft) -> None:
    """Ledger entries for quarantined nodes whose entry a lost status write dropped, each
    said again as ``NodeFailed``: the pass that quarantined the node posts its events after
    all its actions, so one stopped between (killed, or an API error on a later action) said
    nothing, and the failure would have been entered with no word at all. (A pass whose
    status write alone was lost had said it: then it is said twice, the lesser harm.)

    A node the last status written lists among the spares (or the breaker held as one)
    interrupted no worker: its entry is resumed at detection, as when it was answered.
    Before, it was rebuilt open, and the spare's grace and the passes after were charged to
    the interruption budget while the workers trained on.

    Any other node's entry gets what answering it records (:func:`_quarantine`): the
    generation it interrupted (the last status written names the one running then) and,
    with reports, the step the restart resumes from and the work lost. Before, these were
    left out: the entry's lost work was missing from ``phased_job_lost_work_seconds_total``
    and its ``resumeStep`` empty, and with no generation any worker's report, the
    interrupted generation's too, could mark it resumed."""
    known = {(r.node, parse_time(r.detected)) for r in draft.ledger}
    written = draft.snap.status  # the last status written: the roles the nodes had then
    spares = {*written.pool.spares} | {
        h.node for h in written.breaker.held if h.role == NodeRole.SPARE.value
    }
    for name in sorted(draft.roles):
        if draft.roles[name] != NodeRole.QUARANTINED:
            continue
        note = decode_quarantine(draft.nodes[name].annotations.get(labels.ANNOTATION_QUARANTINE))
        if note is None or note.job != draft.snap.job.uid or (name, note.detected) in known:
            continue
        draft.ledger.append(
            FailureRecord(
                id=_next_id(draft),
                node=name,
                reason=note.reason,
                message=note.message,
                phase=draft.status.phase or "",
                detected=format_time(note.detected),
                cordoned=format_time(note.cordoned) if note.cordoned else None,
                # A spare's failure interrupted no worker, as when it was answered.
                resumed=format_time(note.detected) if name in spares else None,
                **({} if name in spares else _interrupted(draft, name, note.detected)),
            )
        )
        draft.event(WARNING, "NodeFailed", f"{note.message} ({note.reason})")
    recover_replacements(draft.ledger, _held_nodes(draft))


def _held_nodes(draft: Draft) -> dict[str, NodeInfo]:
    return {n: draft.nodes[n] for n in draft.roles if n in draft.nodes}


def _interrupted(draft: Draft, name: str, detected: datetime) -> dict[str, Any]:
    """The ledger fields of a failure of active node ``name`` (:func:`_quarantine`): the
    generation, and with reports the resume step and lost work — only the generation when
    its worker had succeeded (it lost no work)."""
    if worker_done_on(draft, name, detected):
        return {"generation": interrupted_generation(draft.status)}
    return checkpoints.lost_work(draft, detected)


def _deleted_nodes(draft: Draft) -> list[tuple[str, NodeRole]]:
    """Pool nodes, and nodes the breaker holds, that a synced node view no longer has, or
    has only as a new object under the same name (:func:`_recreated`)."""
    known = draft.snap.known_node_names
    if known is None:
        return []
    pool = draft.status.pool
    gone = [(n, NodeRole.ACTIVE) for n in pool.active] + [(n, NodeRole.SPARE) for n in pool.spares]
    gone += [(h.node, _role(h.role)) for h in draft.status.breaker.held]
    seen: set[str] = set()
    out: list[tuple[str, NodeRole]] = []
    for name, role in gone:
        vanished = name not in draft.nodes and name not in known
        if (vanished or _recreated(draft, name)) and name not in seen:
            seen.add(name)
            out.append((name, role))
    return out


def _recreated(draft: Draft, name: str) -> bool:
    """The node named ``name``, which the status lists in the pool, is a new object: the job
    does not hold it and its ``metadata.uid`` is not the one the pass that wrote that status
    read (``status.pool.uids``) — whatever it carries now (another job may have claimed it
    first). A node the job gave back itself is the same object, even when the status write
    that dropped it from the pool was lost. Two uids are compared, never two clocks: before,
    a node created after that pass's ``accounting.accountedAt`` was the new object, and with
    the operator's clock ahead of the API server's, or a node view that lagged, a recreated
    node passed for one the job released, and its deletion went unrecorded.

    A status written before the uids were kept (an upgrade; its next write keeps them) is
    read by the old rule: created after the pass that wrote it."""
    node = draft.nodes.get(name)
    if node is None or name in draft.roles:
        return False
    known = draft.snap.status.pool.uids.get(name)
    if known and node.uid:
        return node.uid != known
    written = parse_time(draft.snap.status.accounting.accounted_at)
    if node.created is None or written is None:
        return False
    created = node.created if node.created.tzinfo else node.created.replace(tzinfo=UTC)
    return created > written


def _role(value: str) -> NodeRole:
    return NodeRole.SPARE if value == NodeRole.SPARE.value else NodeRole.ACTIVE


def _held_as_suspects(draft: Draft) -> list[Suspect]:
    """What the breaker holds, in the form detection reads first-seen times from."""
    return [
        Suspect(node=h.node, reason=h.reason, since=h.since, message=h.message)
        for h in draft.status.breaker.held
    ]


def handle_failures(draft: Draft, type_key: str) -> None:
    """Detect failed nodes, ask the breaker, quarantine and record what it lets through."""
    policy = draft.spec.failure_policy
    held = {n: r for n, r in draft.roles.items() if r in (NodeRole.ACTIVE, NodeRole.SPARE)}
    deleted = _deleted_nodes(draft)
    found = detect(
        held,
        draft.nodes,
        deleted,
        policy,
        gpu_resource(type_key, draft.settings),
        draft.phase.gpus_per_node,
        [*draft.status.suspects, *_held_as_suspects(draft)],
        draft.now,
    )
    flaps = _flapping(draft, held, found)
    flapped = {f.node for f in flaps}
    draft.set(suspects=[s for s in found.suspects if s.node not in flapped])
    draft.suspect_nodes = {s.node for s in found.suspects} - flapped
    draft.later(found.wake_in)
    failures = _keep_held_times(draft, [*found.failures, *flaps])
    state = draft.status.breaker
    tripped = draft.is_true(ConditionType.MASS_FAILURE)
    released = _released_unwritten(draft) if tripped else None
    approved: list[Failure] = []  # held when a release lost with its status write came
    if released is not None:
        # That release happened: record it, answer what it approved still failing, and
        # judge the failures found since as the breaker armed again judges them.
        before = {h.node for h in state.held}
        approved = [f for f in failures if f.node in before]
        failures = [f for f in failures if f.node not in before]
        value = draft.snap.annotations.get(labels.ANNOTATION_PROCEED)
        # What it approved and the pass cut short left is cordoned now: the release reaches
        # to now, so those count towards the next trip no more than the ones it reached.
        if approved:
            released = draft.now
        state = state.model_copy(
            update={"released_at": format_time(released), "released_by": value, "held": []}
        )
        draft.set(breaker=state)
        _say_released(draft, value or "", "the failed node(s) it held were answered")
        tripped = False
    verdict = judge_breaker(
        tripped=tripped,
        tripped_at=_tripped_at(draft) if tripped else None,
        failures=failures,
        troubled=len(draft.suspect_nodes - {f.node for f in [*approved, *failures]}),
        ledger=draft.ledger,
        pool_size=len(held) + len(deleted),
        policy=policy,
        proceed=draft.snap.annotations.get(labels.ANNOTATION_PROCEED),
        released_at=parse_time(state.released_at),
        released_by=state.released_by,
        now=draft.now,
        outage=None if tripped else outage(_in_view(failures), draft.nodes, policy),
    )
    if verdict.holds:
        _hold(draft, verdict, failures)
        # The generation cannot be whole while they are held — unless the held node's
        # worker has succeeded: that rank did its part, and its peers train on. Nor is
        # anything held before the phase made its first workers (a boundary, a pool being
        # formed): nothing trains yet, as for a failure answered then (_before_start).
        active = [
            f
            for f in failures
            if f.role == NodeRole.ACTIVE and not worker_done_on(draft, f.node, f.detected)
        ]
        if active and draft.record.start_time is not None:
            names = ", ".join(sorted(f.node for f in active))
            began = min(f.detected for f in active)
            interruptions.stopped(draft, began, f"the breaker holds active node(s) {names}")
        for failure in approved:
            _quarantine(draft, failure)
        _blame_answered(draft, approved)
        return
    if verdict.move == BreakerMove.CLEAR:
        draft.condition(
            ConditionType.MASS_FAILURE, False, "Recovered", "every node the breaker held recovered"
        )
        draft.event(
            NORMAL,
            "MassFailureCleared",
            "every node the breaker held recovered; nothing was quarantined",
        )
    elif verdict.move == BreakerMove.RELEASE:
        value = draft.snap.annotations.get(labels.ANNOTATION_PROCEED, "")
        _say_released(draft, value, f"answering {len(failures)} failed node(s)")
        state = state.model_copy(
            update={"released_at": format_time(draft.now), "released_by": value}
        )
    elif find(draft.conditions, ConditionType.MASS_FAILURE) is None:
        draft.condition(ConditionType.MASS_FAILURE, False, "BelowLimit", "")
    # Otherwise it is False already: its reason (Recovered, ReleasedByPerson) stays readable.
    draft.set(breaker=state.model_copy(update={"held": []}))
    for failure in [*approved, *failures]:
        _quarantine(draft, failure)
    _blame_answered(draft, [*approved, *failures])


def _say_released(draft: Draft, value: str, what: str) -> None:
    draft.condition(
        ConditionType.MASS_FAILURE,
        False,
        "ReleasedByPerson",
        f"released by {labels.ANNOTATION_PROCEED}={value}",
    )
    draft.event(
        NORMAL,
        "MassFailureReleased",
        f"released by {labels.ANNOTATION_PROCEED}={value}: {what}; the breaker is armed "
        "again for new failures",
    )


def _released_unwritten(draft: Draft) -> datetime | None:
    """When a person's release was answered by a pass whose status write was lost, or
    ``None``: the status still says the breaker holds, and a node it held is now quarantined
    by the job with a cordon at or after the trip. Only a release answers what the breaker
    holds, so those cordons are its answer (the earliest is when it was released; the caller
    moves it to now when what it approved is answered in this pass). Without this, the pass
    took the held nodes' absence from the pool for their recovery (``Recovered``, "nothing
    was quarantined"), forgot the release, and counted the failures the person had approved
    towards the next trip; or, with failures found since, took the approval for unused and
    answered those too, where the breaker armed again trips."""
    tripped_at = _tripped_at(draft)
    if tripped_at is None:
        return None
    held = {h.node for h in draft.status.breaker.held}
    cordons = [
        parse_time(r.cordoned)
        for r in draft.ledger
        if r.node in held and draft.roles.get(r.node) == NodeRole.QUARANTINED
    ]
    answered = [t for t in cordons if t is not None and t >= tripped_at]
    return min(answered) if answered else None


def _in_view(failures: Sequence[Failure]) -> list[Failure]:
    """The failures an outage may explain: all but the deleted (nothing dates them)."""
    return [f for f in failures if f.reason != FailureReason.NODE_DELETED]


def _flapping(draft: Draft, held: Mapping[str, NodeRole], found: Detection) -> list[Failure]:
    """Remember the troubles that began on the job's nodes (``status.troubles``) and fail
    the held nodes whose troubles began too often within the window (:mod:`.flapping`)."""
    before = draft.snap.status
    history = flapping.remember(
        before.troubles,
        troubled=found.troubled,
        troubled_before={s.node for s in before.suspects} | {h.node for h in before.breaker.held},
        pool_before={*before.pool.active, *before.pool.spares},
        written=parse_time(before.accounting.accounted_at),
        nodes=draft.nodes,
        roles=draft.roles,
        policy=draft.spec.failure_policy,
        now=draft.now,
    )
    failed = {f.node for f in found.failures}
    # The trouble each node is in now, as remembered (when it began).
    began = {t.node: t.since for t in found.troubled}
    current = {
        e.node: e for e in history if e.node in began and format_time(began[e.node]) == e.since
    }
    history = _blame_held(draft, history)
    flaps = flapping.failures(
        history, held, draft.nodes, failed, current, draft.spec.failure_policy, draft.now
    )
    draft.set(troubles=history)
    draft.flap_troubles = {f.node: began[f.node] for f in flaps if f.node in current}
    return flaps


def _blame_held(draft: Draft, history: Sequence[TroubleStart]) -> list[TroubleStart]:
    """Mark the trouble of each node the breaker holds that a worker of the running
    generation ended with (Failed on it, made before its trouble began): nothing restarts
    while it holds, so no restart marks it (:func:`_blame_troubles`). A held node whose
    workers live through its trouble leaves it unmarked: it counted for nothing."""
    pods = latest_attempts(live(generation_pods(draft)))
    for h in draft.status.breaker.held:
        since = parse_time(h.since)
        for pod in pods:
            if (
                pod.node_name == h.node
                and pod.phase == PodPhase.FAILED
                and pod.created is not None
                and since is not None
                and pod.created <= since
            ):
                history = flapping.blame(history, h.node, pod.created)
    return list(history)


def _blame_answered(draft: Draft, answered: Sequence[Failure]) -> None:
    """A node answered as flapping in the trouble it is in now: that trouble stops its
    workers (the gang restarts without it), so it is marked as one that did. Not while the
    breaker holds it: nothing is stopped then, and the workers may live through it
    (:func:`_blame_held` marks it if they do not)."""
    history = draft.status.troubles
    for failure in answered:
        began = draft.flap_troubles.get(failure.node)
        if failure.reason == FailureReason.NODE_FLAPPING and began is not None:
            history = flapping.blame(history, failure.node, began)
    draft.set(troubles=history)


def _keep_held_times(draft: Draft, failures: Sequence[Failure]) -> list[Failure]:
    """A failure the breaker already holds keeps the time it was first held with.

    Detection already keeps the first-seen time of a held NotReady, GPU-fault or GPU-drop
    failure (``core.failure``: the earlier of the condition's transition and the recorded
    time). What this adds is a held node that was deleted: ``NodeDeleted`` has nothing on
    the node to date it, so detection finds it at ``now`` at every pass."""
    since = {(h.node, h.reason): parse_time(h.since) for h in draft.status.breaker.held}
    out = []
    for failure in failures:
        first = since.get((failure.node, failure.reason.value))
        if first is not None and first < failure.detected:
            failure = replace(failure, detected=first)
        out.append(failure)
    return out


def _tripped_at(draft: Draft) -> datetime | None:
    cond = find(draft.conditions, ConditionType.MASS_FAILURE)
    return parse_time(cond.last_transition_time) if cond is not None else None


def _hold(draft: Draft, verdict: BreakerVerdict, failures: Sequence[Failure]) -> None:
    names = sorted(f.node for f in failures)
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    job = draft.snap.job
    message = (
        f"{verdict.count} of {verdict.pool_size} pool nodes ({verdict.percent:.0f}%) failed "
        f"together, more than the {draft.spec.failure_policy.mass_failure.max_failed_percent}% "
        "allowed: automatic remediation "
        f"paused; holding {shown}. It resumes when they recover, or run "
        f"`phased proceed {job.namespace}/{job.name}` to answer them"
    )
    if verdict.outage is not None:
        found = verdict.outage
        message = (
            f"{found.down} of the {found.size} nodes of {found.domain} went NotReady "
            "together: an outage of the network or the control plane, not the nodes' own "
            "failure; automatic remediation "
            f"paused; holding {shown}. It resumes when they recover, or run "
            f"`phased proceed {job.namespace}/{job.name}` to answer them"
        )
    if verdict.move == BreakerMove.HOLD:
        message = (
            f"holding {len(names)} failed node(s) of {verdict.pool_size}: {shown}. Automatic "
            f"remediation resumes when they recover, or run "
            f"`phased proceed {job.namespace}/{job.name}` to answer them"
        )
    gone = sorted(f.node for f in failures if f.reason == FailureReason.NODE_DELETED)
    if gone:
        # A deleted node never recovers: only a person's proceed lets the breaker go.
        message += (
            f"; deleted, so they will not recover: {', '.join(gone[:10])}"
            + (f" and {len(gone) - 10} more" if len(gone) > 10 else "")
            + (" (only a proceed answers them)" if len(gone) == len(names) else "")
        )
    draft.condition(ConditionType.MASS_FAILURE, True, "MassFailure", message, WARNING)
    draft.breaker_nodes = set(names)
    held = [
        HeldFailure(
            node=f.node,
            role=f.role.value,
            reason=f.reason.value,
            since=format_time(f.detected),
            message=f.message,
        )
        for f in sorted(failures, key=lambda f: f.node)
    ]
    draft.set(breaker=draft.status.breaker.model_copy(update={"held": held}))


def _quarantine(draft: Draft, failure: Failure) -> None:
    gone = failure.reason.value == "NodeDeleted"
    if not gone:
        draft.act(
            QuarantineNode(
                node=failure.node,
                reason=failure.reason.value,
                message=failure.message,
                detected=failure.detected,
                cordoned=draft.now,
            )
        )
    draft.event(WARNING, "NodeFailed", f"{failure.message} ({failure.reason.value})")
    if not gone:
        draft.event(NORMAL, "NodeQuarantined", f"node {failure.node} cordoned and quarantined")
    spare = failure.role == NodeRole.SPARE  # a spare's failure interrupts no worker
    # Nor does that of a node whose worker is done: no lost work, and it is resumed at
    # detection once its replacement is recorded (resume_done_workers).
    if not spare and draft.record.start_time is None:  # no worker of the phase was made yet
        draft.unstarted_failures.add(_next_id(draft))
    draft.ledger.append(
        FailureRecord(
            id=_next_id(draft),
            node=failure.node,
            reason=failure.reason.value,
            message=failure.message,
            phase=draft.phase.name,
            detected=format_time(failure.detected),
            cordoned=None if gone else format_time(draft.now),  # a deleted node is not cordoned
            resumed=format_time(failure.detected) if spare else None,
            **({} if spare else _interrupted(draft, failure.node, failure.detected)),
        )
    )
    if spare:
        # A node in trouble swapped out of the active pool (keep_troubled_out) fails as a
        # spare: the node that took its place, whose note says so, is its replacement.
        recover_replacements(draft.ledger, _held_nodes(draft))
    if gone:
        draft.roles.pop(failure.node, None)
    else:
        draft.roles[failure.node] = NodeRole.QUARANTINED


def worker_done_on(draft: Draft, name: str, detected: datetime | None) -> bool:
    """The running generation's worker on ``name`` (the newest attempt of its rank), made
    before the failure was detected, has succeeded: it did its part, and its node failing
    after that interrupted nothing (the phase waits only for its peers, or for the final
    checkpoint at the boundary). A worker made later, on the node healed and taken back,
    says nothing of the failure before it."""
    pods = latest_attempts(live(generation_pods(draft)))
    return any(
        p.node_name == name
        and p.phase == PodPhase.SUCCEEDED
        and p.created is not None
        and detected is not None
        and p.created <= detected
        for p in pods
    )


def resume_done_workers(draft: Draft) -> None:
    """Open failures that interrupted no worker are resumed at their detection: a node whose
    worker had succeeded, or one answered before the phase's first workers were made
    (:func:`_before_start`). Run once the pass has promoted or claimed their replacement,
    which is recorded only on an open entry (:func:`phased.core.ledger.mark_replaced`)."""
    for i, entry in enumerate(draft.ledger):
        if entry.resumed is not None:
            continue
        done = worker_done_on(draft, entry.node, parse_time(entry.detected))
        if done or _before_start(draft, entry):
            draft.ledger[i] = entry.model_copy(
                update={"resumed": entry.detected, "interruption_seconds": 0.0}
            )


def _before_start(draft: Draft, entry: FailureRecord) -> bool:
    """The failure was answered before the phase's first workers were made (this pass, which
    may make them on the pool without it), or the phase has not started yet: no worker of
    it ran there. A boundary, or a pool being formed; waiting in line afterwards is waiting,
    not an interruption."""
    if entry.id in draft.unstarted_failures:
        return True
    return entry.phase == draft.phase.name and draft.record.start_time is None


def keep_troubled_out(draft: Draft, busy: frozenset[str] = frozenset()) -> None:
    """A generation goes on nodes under no suspicion when the spares allow it.

    An active node in trouble but still within its grace (NotReady, a GPU-fault condition,
    GPUs missing from allocatable), or one whose kubelet rejected a worker of the phase at
    admission or stopped one for the node's sake (:func:`refusing_nodes`), on which no worker
    of the generation is bound
    (``busy``: the nodes that have one) trades roles with the Ready spare nearest to it that
    is under no suspicion: before a new generation is created (nothing is bound yet), and
    while one runs whose worker for that node is still unbound (the node went NotReady
    before the scheduler placed it; a rank replaced onto a spare that fell ill), so no
    unplaced worker waits out a grace a spare can cover. The troubled node stays held, as a
    spare: it is answered as a spare's failure if its grace runs out (nothing is
    interrupted), its entry naming the spare that took its place (the ``troubled`` note
    the swap writes on it, :func:`phased.core.ledger.recover_replacements`), and serves as
    one if it recovers. No ledger entry at the swap and no restart: nothing failed, nothing
    ran there. Not while the breaker holds failures (automatic action is
    paused then). A worker already bound to a troubled node is waited for: the grace is what
    tells a blip from a loss.
    """
    if draft.breaker_nodes:
        return
    rejecting = refusing_nodes(draft)
    blocked = blocked_nodes(draft)
    troubled = [
        n
        for n in draft.held(NodeRole.ACTIVE)
        if (
            not n.ready or n.name in draft.suspect_nodes or n.name in rejecting or n.name in blocked
        )
        and n.name not in busy
    ]
    _swap_out(draft, troubled, rejecting, blocked)


def blocked_nodes(draft: Draft) -> dict[str, str]:
    """The Ready active and spare nodes the job holds with a taint the node controllers
    derived from a condition — memory, disk or PID pressure, network unavailable — that the
    workers do not tolerate (:func:`~phased.core.tolerations.condition_blocking`), with its
    keys. Nothing failed for good there, and a worker already running on one runs on, but a
    new worker would wait Pending until the condition passes: while a healthy spare is left,
    such an active node with no worker bound trades places with it
    (:func:`keep_troubled_out`), and such a spare is promoted last."""
    tolerations = draft.tolerations
    found: dict[str, str] = {}
    for role in (NodeRole.ACTIVE, NodeRole.SPARE):
        for node in draft.held(role):
            taints = condition_blocking(node, tolerations) if node.ready else []
            if taints:
                found[node.name] = ", ".join(sorted({f"{t.key}:{t.effect}" for t in taints}))
    return found


def refusing_nodes(draft: Draft) -> dict[str, str]:
    """The nodes whose kubelet refused a worker of the running phase, in the running
    generation or the one it replaced, with what it did: rejected it at admission
    (:attr:`~phased.core.model.PodInfo.rejected`; the scheduler placed the worker and the
    node would not run it: a device plugin failing to allocate its GPUs, resources taken by
    pods the scheduler does not know of), or stopped it for the node's sake
    (:attr:`~phased.core.model.PodInfo.disruption`: evicted under node pressure, killed for
    the node's shutdown). A worker placed there again would most likely meet the same, so
    the node trades places with a healthy spare (:func:`keep_troubled_out`)."""
    gen = draft.status.restart_generation
    return {
        p.node_name: _refused_as(p)
        for p in draft.phase_pods()
        if (p.rejected or p.disruption) and p.node_name and p.generation >= gen - 1
    }


def _refused_as(pod: PodInfo) -> str:
    if pod.rejected:
        return f"rejected a worker at admission ({pod.reason or 'rejected'})"
    return f"stopped a worker for its own sake ({pod.disruption})"


def stalled_nodes(draft: Draft) -> dict[str, str]:
    """The held spares swapped out of the active pool because a worker never started on them
    while its peers did (:func:`swap_stalled`), with what the mark says: in this pass, or
    in an earlier one (``ANNOTATION_STALLED``, which outlives the pass and the operator;
    its pod, which said so, was deleted by the retry). Promoted last, never traded into a
    troubled node's place, given up first when the pool shrinks (:func:`promoted_last`,
    ``phased.core.sizing``); a promotion, as the last resort, clears the mark and tries
    the node again."""
    found = dict(draft.stalled)
    for node in draft.held(NodeRole.SPARE):
        mark = node.annotations.get(labels.ANNOTATION_STALLED)
        if mark is not None and node.name not in found:
            found[node.name] = mark
    return found


def promoted_last(draft: Draft) -> set[str]:
    """The spares a promotion takes only when no other is left: a suspect within its grace,
    one that refused a worker of the phase, one a condition taint blocks, one a worker
    stalled on (:func:`stalled_nodes`)."""
    return (
        draft.suspect_nodes
        | refusing_nodes(draft).keys()
        | blocked_nodes(draft).keys()
        | stalled_nodes(draft).keys()
    )


def _healthy_spares(draft: Draft, rejecting: Collection[str]) -> list[NodeInfo]:
    """The spares a troubled active may trade places with: under no suspicion, none that
    refused a worker of the phase, none a condition taint blocks (:func:`blocked_nodes`),
    and none a worker stalled on (:func:`stalled_nodes`)."""
    shunned = blocked_nodes(draft).keys() | stalled_nodes(draft).keys()
    return [
        s
        for s in promotable(draft)
        if s.name not in draft.suspect_nodes and s.name not in rejecting and s.name not in shunned
    ]


def swap_stalled(draft: Draft, stalled: Mapping[str, str]) -> None:
    """Active nodes on which a worker of the running generation never started within
    ``pendingGrace`` while its peers started on other nodes (a failed start, answered by
    :func:`phased.core.starts.tend_starts`: a sandbox its network plugin could not make, an
    image its disk or registry mirror could not pull, a volume that would not attach there)
    trade places with the nearest healthy spares (none that refused a worker of the phase),
    while one is left, so the retry goes elsewhere: the worker there is stopped by that
    retry. Each stays held as a spare marked with what it did (:func:`stalled_nodes`).
    ``stalled``: node -> what it did. Not while the breaker holds failures (automatic
    action is paused then)."""
    if draft.breaker_nodes or not stalled:
        return
    troubled = [n for n in draft.held(NodeRole.ACTIVE) if n.name in stalled]
    _swap_out(draft, troubled, refusing_nodes(draft), stalled=stalled)


def _swap_out(
    draft: Draft,
    troubled: list[NodeInfo],
    rejecting: Mapping[str, str],
    blocked: Mapping[str, str] | None = None,
    stalled: Mapping[str, str] | None = None,
) -> None:
    """Each of the active nodes ``troubled`` trades roles with the nearest healthy spare, while
    one is left (:func:`keep_troubled_out`, :func:`swap_stalled`)."""
    for node in sorted(troubled, key=lambda n: n.name):
        spare = choose_spare(node, _healthy_spares(draft, rejecting), [], draft.tolerations)
        if spare is None:
            return
        answered = _hand_over(draft, node.name, spare.name)
        what = stalled.get(node.name) if stalled else None
        mark = f"{format_time(draft.now)} {what}" if what is not None else None
        if mark is not None:
            draft.stalled[node.name] = mark
        draft.act(SetNodeRole(node=node.name, role=NodeRole.SPARE, stalled=mark))
        # The note names the failure handed on, else the node in trouble: should its grace
        # run out, its failure (as a spare's) names this one as its replacement.
        draft.act(
            SetNodeRole(
                node=spare.name,
                role=NodeRole.ACTIVE,
                replaces=answered or node.name,
                at=draft.now,
                troubled=answered is None,
            )
        )
        draft.roles[node.name] = NodeRole.SPARE
        draft.roles[spare.name] = NodeRole.ACTIVE
        well = node.ready and node.name not in draft.suspect_nodes
        bound = "no worker is bound to it"
        if stalled and node.name in stalled:
            why, bound = stalled[node.name], "the retry stops its worker there"
        elif well and node.name in rejecting:
            why = rejecting[node.name]
        elif well and blocked and node.name in blocked:
            why = f"carries {blocked[node.name]}, which its workers do not tolerate"
        else:
            why = "is in trouble within its grace"
        draft.event(
            NORMAL,
            "TroubledNodeSwapped",
            f"active node {node.name} {why} and {bound}: spare {spare.name} "
            f"takes its place in phase {draft.phase.name}"
            + (f" (replacing {answered})" if answered is not None else "")
            + f", {node.name} stays held as a spare"
            + (", promoted only when no other spare is left" if mark is not None else ""),
        )


def _hand_over(draft: Draft, troubled: str, spare: str) -> str | None:
    """The open failure ``troubled`` was to answer (it replaced a failed node, and fell ill
    before any worker was placed on it, or before training resumed) is answered by
    ``spare``, which takes its place: the entry names it, and so does the note the promotion
    writes on it. Returns the failed node, if any."""
    for i, entry in enumerate(draft.ledger):
        if entry.resumed is None and entry.replaced_by == troubled:
            draft.ledger[i] = entry.model_copy(
                update={"replaced_by": spare, "replaced": format_time(draft.now)}
            )
            return entry.node
    return None


# --- the running generation -----------------------------------------------------------------


@dataclass
class Losses:
    by_node: dict[int, str]  # rank -> the node it was lost with
    failed: list[PodInfo]  # workers that failed on healthy nodes
    vanished: list[int]  # ranks whose pod disappeared (deleted or evicted)
    missing: list[int]  # ranks never created (a crash between creates)

    @property
    def restart_needed(self) -> bool:
        return bool(self.by_node or self.failed or self.vanished)


def _losses(draft: Draft, pods: list[PodInfo], world: int) -> Losses:
    active = {n for n, r in draft.roles.items() if r == NodeRole.ACTIVE}
    held_back = draft.breaker_nodes | draft.suspect_nodes
    losses = Losses({}, [], [], [])
    for pod in latest_attempts(live(pods)):
        if pod.phase == PodPhase.SUCCEEDED or pod.node_name is None or pod.rank is None:
            continue
        if pod.node_name not in active and pod.node_name not in held_back:
            node = draft.nodes.get(pod.node_name)
            force = node is None or not node.ready
            draft.act(DeletePod(pod.name, force=force, reason=f"node {pod.node_name} failed"))
            losses.by_node[pod.rank] = pod.node_name
        elif pod.phase == PodPhase.FAILED and pod.node_name not in held_back:
            losses.failed.append(pod)
    ranks_live = {p.rank for p in live(pods)}
    ranks_any = {p.rank for p in pods}
    for rank in range(world):
        if rank not in ranks_live:
            (losses.vanished if rank in ranks_any else losses.missing).append(rank)
    return losses


def _promote(draft: Draft, world: int, lost_nodes: list[str]) -> int:
    """Promote spares until the active pool is back to ``world``; return what is missing."""
    deficit = world - len(draft.held(NodeRole.ACTIVE)) - _held_places(draft)
    for i in range(max(0, deficit)):
        anchor = draft.nodes.get(lost_nodes[i]) if i < len(lost_nodes) else None
        spare = choose_spare(
            anchor,
            promotable(draft),
            draft.held(NodeRole.ACTIVE),
            draft.tolerations,
            promoted_last(draft),
        )
        if spare is None:
            return deficit - i
        lost = lost_nodes[i] if i < len(lost_nodes) else None
        answered = mark_replaced(draft.ledger, lost, spare.name, draft.now)
        draft.act(SetNodeRole(spare.name, NodeRole.ACTIVE, replaces=answered, at=draft.now))
        draft.roles[spare.name] = NodeRole.ACTIVE
        draft.event(
            NORMAL,
            "SparePromoted",
            f"spare {spare.name} promoted to active" + (f", replacing {lost}" if lost else ""),
        )
    return 0


def _spares_cover(draft: Draft, world: int) -> bool:
    """The spares the workers could be placed on fill every place missing from ``world``."""
    deficit = world - len(draft.held(NodeRole.ACTIVE)) - _held_places(draft)
    return deficit <= len(usable_spares(promotable(draft), draft.tolerations))


def promotable(draft: Draft) -> list[NodeInfo]:
    """The held spares a promotion may choose, by any rule (a failed node's replacement, a
    troubled active's swap, a pool formed again): those the job can keep as active. A spare
    a person cordoned, one tainted with a taint the workers do not tolerate, and one out of
    the operator's ``nodeSelector`` are leaving the pool (released once failure handling
    has nothing to say about them: ``release_cordoned``, ``release_out_of_scope``) and are
    never promoted, not even as the last resort a spare in trouble is: before, such a spare
    in trouble within its grace was promoted when no other was left (or when a pool was
    formed again), and its worker waited on a node it could never run on or was moved again
    once the node was released."""
    return [
        s
        for s in draft.held(NodeRole.SPARE)
        if not s.unschedulable
        and not foreign_blocking(s, draft.tolerations)
        and selects(draft.settings.node_selector, s.labels)
    ]


def _held_places(draft: Draft) -> int:
    """Active nodes the breaker holds that the cluster no longer has (deleted while active):
    they keep their places while it holds, as a held node that is still there does."""
    return sum(
        1
        for h in draft.status.breaker.held
        if h.node in draft.breaker_nodes
        and h.node not in draft.roles
        and h.role == NodeRole.ACTIVE.value
    )


def _count_restart(draft: Draft, worker_fault: bool, refused: Losses | None = None) -> bool:
    """Count one restart; False when it spends the restart budget (the job has failed). A
    restart not charged only because nodes rejected or stopped the workers of ``refused``
    (:func:`_refusal_excused`) is counted in the phase's ``admissionRejections`` or
    ``nodeDisruptions`` too (:func:`_node_excused`)."""
    draft.set(restarts=draft.status.restarts + 1)
    draft.update_record(restarts=draft.record.restarts + 1)
    if not worker_fault:
        failed = refused.failed if refused is not None else []
        if any(p.rejected for p in failed):
            draft.update_record(admission_rejections=draft.record.admission_rejections + 1)
        if any(p.disruption and not p.rejected for p in failed):
            draft.update_record(node_disruptions=draft.record.node_disruptions + 1)
        return True
    used = draft.status.worker_restarts + 1
    draft.set(worker_restarts=used)
    budget = draft.spec.failure_policy.restart_budget
    if used > budget:
        fail(
            draft,
            "RestartBudgetExceeded",
            f"workers failed {used} times on healthy nodes; restartBudget is {budget}",
        )
        return False
    return True


def gang_restart(draft: Draft, why: str) -> None:
    """Stop every worker of the phase (those not counted as workers too:
    :func:`_phase_pods_all`); the next generation is created by sizing.

    Workers on a lost node were already deleted with no grace (their kubelet is gone); the
    running survivors get ``survivorGracePeriod`` to stop; Failed and Succeeded workers are
    kept (but for one whose sidecar outlives it, deleted by the next pass once this restart
    is on record: :func:`phased.core.phases.lingering`). The next generation is created once
    the survivors have stopped (:func:`phased.core.phases.stopping_until`): their leaving
    wakes the pass that creates it, so no new worker waits beside one that still holds its
    node's GPUs.
    """
    old = draft.status.restart_generation
    grace = parse_duration(draft.spec.failure_policy.survivor_grace_period)
    for pod in live(_phase_pods_all(draft)):
        # Failed and Succeeded workers hold nothing and stay, the record of why (a lost
        # status write re-derives the restart from them, and their logs are kept); running
        # survivors get the grace period.
        if 0 <= pod.generation <= old and pod.phase not in ENDED:
            draft.act(DeletePod(pod.name, reason=f"gang restart: {why}", grace_seconds=grace))
    draft.set(restart_generation=old + 1)
    draft.event(
        NORMAL,
        "WorkersRestarted",
        f"phase {draft.phase.name}: generation {old} -> {old + 1} ({why})",
    )


def _phase_pods_all(draft: Draft) -> list[PodInfo]:
    """The running phase's pods, those not counted as workers included: a rank beyond a
    ``nodes.max`` lowered since, when the status write that recorded its generation's world
    was lost (:func:`phased.core.podlabels.trusted`), is still a worker Phased made, and a
    gang restart that left it would leave it running unwatched beside the next generation
    (a pod whose labels were forged is stopped with the rest, as a finished job stops it)."""
    name = draft.phase.name
    return [p for p in draft.snap.pods if p.phase_name == name]


def replace_ranks(
    draft: Draft, pods: list[PodInfo], ranks: list[int], world: int, *, made: bool = True
) -> None:
    """Create the workers of ``ranks`` in the running generation.

    ``made``: the ranks had workers before, and this is a replacement, counted in
    ``status.restarts`` before it is made. Its attempt is that count (and past every attempt
    of the rank still seen): every replacement of a rank comes with a restart counted, so its
    attempts grow with the count and one is never made again under a name already used, even
    when the rank's newest attempt is gone (evicted, or collected with its node) and an older
    one is still there — numbered from the pods left, it was made again, and with no pod left
    it was attempt 0, which in a phase's first generation also starts with
    ``PHASED_RESUME=false``. ``made=False``: ranks never created (a crash between creates),
    their first attempt, 0."""
    gen = draft.status.restart_generation
    if ranks:
        checkpoints.answered(draft, gen, gang=not made)
    for rank in sorted(set(ranks)):
        attempts = [_attempt(p) for p in pods if p.rank == rank]
        if made:
            attempt = max(max(attempts, default=0) + 1, draft.status.restarts)
        else:
            attempt = max(attempts) + 1 if attempts else 0
        worker = Worker(
            job=draft.snap.job,
            spec=draft.spec,
            phase=draft.phase,
            generation=gen,
            rank=rank,
            world_size=world,
            attempt=attempt,
            resource=gpu_resource(draft.record.gpu_type or "", draft.settings),
            service_account=draft.settings.workers.service_account,
            installation=draft.settings.installation,
            legacy_nodes=draft.legacy_active(),
            restarts=draft.status.restarts,
            worker_restarts=draft.status.worker_restarts,
            **checkpoints.worker_options(draft),
        )
        draft.act(CreatePod(manifest=worker.manifest()))


def _attempt(pod: PodInfo) -> int:
    try:
        return int(pod.labels.get(labels.LABEL_ATTEMPT, "0"))
    except ValueError:
        return 0


def tend_generation(draft: Draft) -> None:
    """Keep the running generation whole: delete, promote, restart, recreate."""
    pods = generation_pods(draft)
    if not live(pods):
        _restart_vanished(draft, pods)
        return
    world = world_of(live(pods), draft.status.world_size, world_limit(draft))
    losses = _losses(draft, pods, world)
    if draft.breaker_nodes:
        # A rank whose worker is gone may have run on a node the breaker holds (deleted, its
        # pods collected): nothing it holds is replaced, so such ranks wait for it too.
        losses.vanished.clear()
        losses.missing.clear()
    if _shrink_to_max(draft, pods, losses):
        return
    if losses.missing and (losses.restart_needed or _swap_interrupted(draft)):
        # The generation restarts anyway, or a failure is open (not resumed yet: the
        # missing rank's pod may have been deleted with the node, or by a gang restart,
        # before a crash lost the status write — not lost between creates): the missing
        # ranks are part of the restart, never created again beside it under a name already
        # used (a gang restart whose status write was lost leaves its failed worker and
        # some survivors or none: the new generation comes after them). A crash between
        # the creates of the generation answering a failure costs one restart more.
        losses.vanished.extend(losses.missing)
        losses.missing.clear()
    if losses.missing and _remade(draft, pods):
        _restart_uncreated(draft, losses.missing)
        return
    if losses.missing:
        replace_ranks(draft, pods, losses.missing, world, made=False)
    if not losses.restart_needed:
        keep_troubled_out(draft, frozenset(p.node_name for p in live(pods) if p.node_name))
        # A node can leave the pool while no worker of this generation runs on it yet (its
        # worker still Pending): nothing to restart, but its place is filled all the same —
        # by the spares when they cover it, else by the pool formed again (below).
        if len(draft.held(NodeRole.ACTIVE)) < world:
            if not _spares_cover(draft, world):
                _spares_exhausted(draft, _unreplaced(draft))
                gang_restart(draft, "a node left the pool before its worker was placed")
                return
            _promote(draft, world, _unreplaced(draft))
        return
    ranks = [*losses.by_node, *(p.rank for p in losses.failed if p.rank is not None)]
    lost = {*ranks, *losses.vanished}
    if draft.breaker_nodes and rejoinable(draft, pods, lost):
        # No worker is created while the breaker holds: a rank replaced alone waits for it
        # to let go (as a gang restart's next generation does), and is counted then.
        return
    worker_fault = _code_fault(draft, losses, pods)
    alone = _spares_cover(draft, world) and rejoinable(draft, pods, lost)
    if not worker_fault and not alone and not _retry_start(draft, losses, pods):
        return
    counted = alone or not _never_started(pods, losses)
    by_refusal = losses if _refusal_excused(draft, losses, pods, worker_fault) else None
    if counted and not _count_restart(draft, worker_fault, by_refusal):
        return
    why = _why(losses) + (_excused(draft, pods) if losses.failed and not losses.by_node else "")
    beside = _troubles_beside(draft, losses, pods) if not worker_fault else {}
    if beside and not losses.by_node:
        why += (
            f"; node(s) {', '.join(sorted(beside))} of the generation were in trouble while "
            "they ran (not charged to restartBudget)"
        )
    _charge_stop(draft, losses, pods)
    _blame_troubles(draft, losses, pods)
    if not _spares_cover(draft, world):
        # Nothing is promoted here: the pool is formed again by the admission rule
        # (phased.core.sizing), which promotes or claims each replacement it keeps. A spare
        # promoted now would be turned back into one when the job shrinks, or released
        # with the rest when it cannot reach nodes.min, and named a replacement meanwhile.
        _spares_exhausted(draft, [*losses.by_node.values(), *_unreplaced(draft)])
        gang_restart(draft, why)
        return
    _promote(draft, world, [losses.by_node[r] for r in sorted(losses.by_node)])
    if not rejoinable(draft, pods, lost):
        gang_restart(draft, why + _alone_note(draft, pods, lost))
        return
    # A rank replaced alone is not placed back on a node that rejected or stopped it: the node
    # trades places with a healthy spare first (one whose worker still runs keeps its place).
    running = {p.node_name for p in latest_attempts(live(pods)) if p.phase not in ENDED}
    rejecting = refusing_nodes(draft)
    refused = [n for n in draft.held(NodeRole.ACTIVE) if n.name in rejecting]
    _swap_out(draft, [n for n in refused if n.name not in running], rejecting)
    replace_ranks(draft, pods, [*ranks, *losses.vanished], world)
    draft.event(
        NORMAL,
        "WorkersRestarted",
        f"phase {draft.phase.name}: replaced rank(s) "
        f"{', '.join(map(str, sorted({*ranks, *losses.vanished})))} ({why})",
    )


def _never_started(pods: list[PodInfo], losses: Losses) -> bool:
    """Every worker lost is one lost with its node before it started (Pending, bound to
    the node): the generation never trained, and the gang restart that remakes it (the
    worker cannot move, as one not placed yet does) is not counted in ``restarts`` — as a
    pool formed again after a node left under a worker not placed yet is not
    (:func:`_spares_exhausted`): one mass event, one restart, whether the scheduler had
    bound the worker or not. A rank replaced alone is counted still: its attempt number is
    the count (:func:`replace_ranks`)."""
    if not losses.by_node or losses.failed or losses.vanished:
        return False
    lost = [p for p in latest_attempts(live(pods)) if p.rank in losses.by_node]
    return all(p.phase == PodPhase.PENDING and p.running_since is None for p in lost)


def _spares_exhausted(draft: Draft, lost: Sequence[str]) -> None:
    """Say that the spares do not cover the places ``lost``: the gang restarts (the caller's
    part) on a pool formed again by the admission rule, or the job waits for capacity.

    Also when the lost places are those of workers not placed yet (a node leaving the pool
    under a Pending worker of a generation answering an earlier failure): before, the spares
    filled what they could and the generation stayed short of a node, its last worker
    Pending until ``pendingGrace`` made it a stuck start — a second restart counted for one
    mass event, and the phase's ``pendingRestarts`` retry spent on a node failure. That
    generation never trained: its restart is not counted again (the failure's was)."""
    names = sorted(set(lost))
    what = f"the lost node(s) {', '.join(names)}" if names else "the nodes it lacks"
    message = (
        f"the spares do not cover {what} of phase "
        f"{draft.phase.name}: the gang restarts on a pool formed again from the healthy "
        f"nodes held and free ones (smaller if it must, down to nodes.min "
        f"{draft.phase.nodes.min}), or waits for capacity"
    )
    draft.condition(ConditionType.SPARES_EXHAUSTED, True, "NoSpare", message, WARNING)


def _restart_vanished(draft: Draft, pods: list[PodInfo]) -> None:
    """Every worker of a generation that was created is gone or being deleted, and no
    restart has moved on from it: their nodes deleted and the pods collected with them (a
    node pool recreated, a one-node job's node scaled down), or evicted all at once (a
    control plane cut off from every kubelet past the workers' tolerations). The gang
    restarts as for any vanished worker — counted in ``restarts``, not the restart budget —
    so the next workers are a new generation that resumes (``PHASED_RESUME=true``), never
    the gone one made again from the phase's start. Not while the breaker holds failures:
    no worker is created then, and the restart waits for it to let go."""
    gen = draft.status.restart_generation
    if draft.status.created_generation != gen or draft.breaker_nodes:
        return
    world = draft.status.world_size
    losses = Losses({}, [], list(range(world)), [])
    if _shrink_to_max(draft, pods, losses):
        return  # the resize deleted them, its status write lost: not counted
    if not _count_restart(draft, False):
        return
    _charge_stop(draft, losses, pods)
    gang_restart(draft, f"every worker of generation {gen} is gone")


def _restart_uncreated(draft: Draft, missing: list[int]) -> None:
    """Ranks of the generation never created (a crash between its creates, or creates the
    API server refused) while the running phase's worker was edited since its peers were
    made (:func:`_remade`): made now, they would run the edit beside peers that do not — a
    gang of two templates (another image; with a new ``launcher.port``, a rendezvous
    endpoint nobody listens on). The gang restarts instead, every rank from the edit. Its
    peers never trained (they wait at the rendezvous for the ranks missing), so the restart
    is counted in ``restarts`` only: not the restart budget, no stop charged, no ledger
    entry — as a start made again from an edit (:mod:`phased.core.starts`)."""
    _count_restart(draft, False)
    gang_restart(
        draft,
        f"rank(s) {', '.join(map(str, missing))} of generation "
        f"{draft.status.restart_generation} were never created, and phase "
        f"{draft.phase.name}'s worker was edited since its peers were made: every rank "
        "starts again from the edit",
    )


def _succeeded(pods: list[PodInfo]) -> list[int]:
    """The ranks of the generation whose worker has succeeded."""
    done = {p.rank for p in live(pods) if p.phase == PodPhase.SUCCEEDED}
    return sorted(r for r in done if r is not None)


def rejoinable(draft: Draft, pods: list[PodInfo], lost: Collection[int] = ()) -> bool:
    """Ranks ``lost`` started again alone can rejoin the generation ``pods`` belong to.

    Only with ``restartScope: Worker`` (torchrun over an elastic c10d rendezvous), only
    while no worker of the generation has succeeded: a worker that succeeded has left the
    rendezvous for good (its agent is gone, rank 0's with the rendezvous store), so a rank
    started alone beside it waits out the rendezvous timeout and fails, again at every
    replacement; never for rank 0 (:data:`STORE_RANK`), whose agent hosted the rendezvous
    store (``PET_RDZV_ENDPOINT`` is its pod): its loss ended every other agent, and a rank 0
    started alone hosts an empty store; nor while rank 0's node is in trouble within its
    grace (a suspect, not yet judged failed: :func:`_store_in_trouble`), since its peers then
    fail because the store is unreachable, and a rank started alone could not reach it
    either (while the breaker holds it, nothing is replaced and the ranks wait for its
    verdict); and only while the generation's workers were made from the running phase's
    worker as the spec has it now (:func:`_remade`). The gang restarts instead: a new
    generation of every rank, from the last checkpoint."""
    scope = draft.spec.failure_policy.restart_scope
    return (
        scope == RestartScope.WORKER
        and STORE_RANK not in lost
        and _store_in_trouble(draft, pods) is None
        and not _succeeded(pods)
        and not _remade(draft, pods)
    )


def _store_in_trouble(draft: Draft, pods: list[PodInfo]) -> str | None:
    """The node of rank 0's worker (:data:`STORE_RANK`, the newest attempt), whose agent
    hosts the rendezvous store, when it is a suspect: in trouble, not yet judged failed."""
    for pod in latest_attempts(live(pods)):
        if pod.rank == STORE_RANK and pod.node_name in draft.suspect_nodes:
            return pod.node_name
    return None


def _remade(draft: Draft, pods: list[PodInfo]) -> bool:
    """The running phase's worker (template, launcher, checkpoint settings) was edited since
    the generation's workers were made: a rank made now would not be made as its peers were
    — another image beside theirs, or, with a new ``launcher.port``, a rendezvous endpoint
    nobody listens on. Read from each worker's ``phased.dev/worker-spec`` label (a worker
    made before the label existed is taken as made from the spec as it is)."""
    return any(made_before_edit(draft, p) for p in latest_attempts(live(pods)))


def made_before_edit(draft: Draft, pod: PodInfo) -> bool:
    """``pod`` was made from another worker spec than the running phase's as it is now (its
    ``phased.dev/worker-spec`` label, as this operator or one before it wrote it:
    :func:`worker_specs`; none, from before the label existed: taken as not)."""
    made = pod.labels.get(labels.LABEL_WORKER_SPEC)
    return made is not None and made not in worker_specs(draft.spec, draft.phase)


def _alone_note(draft: Draft, pods: list[PodInfo], lost: Collection[int] = ()) -> str:
    if draft.spec.failure_policy.restart_scope == RestartScope.GANG:
        return ""
    if STORE_RANK in lost:
        return (
            f"; rank {STORE_RANK}'s agent hosted the rendezvous, so no rank started alone "
            "could rejoin it"
        )
    troubled = _store_in_trouble(draft, pods)
    if troubled is not None:
        return (
            f"; rank {STORE_RANK}'s node {troubled}, whose agent hosts the rendezvous, is in "
            "trouble, so no rank started alone could reach it"
        )
    done = _succeeded(pods)
    if done:
        return (
            f"; rank(s) {', '.join(map(str, done))} already succeeded, so a rank started "
            "alone could not rejoin them"
        )
    if _remade(draft, pods):
        return (
            f"; phase {draft.phase.name}'s worker was edited since its workers were made, so "
            "every rank starts again from the edit"
        )
    return ""


def _retry_start(draft: Draft, losses: Losses, pods: list[PodInfo]) -> bool:
    """Workers failing beside ranks of their generation that never started, excused for that
    alone (:func:`_unstarted_peers`; they would be their code's failure otherwise), make a
    failed start when the gang restarts for them (the caller asks only then): the restart
    spends one of the phase's ``pendingRestarts`` retries, as a start stuck past
    ``pendingGrace`` does (:mod:`phased.core.starts`), and with those spent the job fails
    (``WorkersStuckPending``); False then. Before, nothing bounded it: a rank that could
    never start (no node for it, an image no node could pull) beside peers that failed
    before ``pendingGrace`` ran out restarted the gang for ever, each new generation making
    the Pending rank anew, its grace never reached and no budget spent. A rank replaced
    alone leaves the Pending one as it is, its grace running (the stuck start bounds it),
    and spends none. None is spent either when every rank that never started was made
    before an edit of the phase's worker (the fix is tried, as a stuck start's is)."""
    if not losses.failed or losses.by_node or _refused_peers(draft, pods):
        return True
    unstarted = _unstarted_peers(pods)
    if not unstarted or not _code_fault(draft, losses, pods, excused=False):
        return True
    waiting = [p for p in latest_attempts(live(pods)) if p.rank in unstarted]
    if all(made_before_edit(draft, p) for p in waiting):
        return True
    used, allowed = draft.record.pending_restarts, draft.spec.failure_policy.pending_restarts
    if used >= allowed:
        fail(
            draft,
            "WorkersStuckPending",
            f"rank(s) {', '.join(map(str, unstarted))} of phase {draft.phase.name} never "
            f"started, and their peers failed waiting at the rendezvous; the {allowed} "
            "retried start(s) allowed by failurePolicy.pendingRestarts are spent",
        )
        return False
    draft.update_record(pending_restarts=used + 1)
    return True


def _code_fault(
    draft: Draft,
    losses: Losses,
    pods: list[PodInfo],
    *,
    excused: bool = True,
    refusals: bool = True,
) -> bool:
    """Workers failed on healthy nodes, and it was their code's doing (``restartBudget``).

    Not when a node of the generation failed or is in trouble (a suspect, or held by the
    breaker): the workers beside it fail because their collective with the lost peer did.
    Nor when one was in trouble while they ran and is healthy again (a rack the breaker held
    came back, a blip within the grace: :func:`_troubles_beside`): a worker on it ended with
    its node, and the workers beside it with their collective, at its timeout. Nor
    for a rank replaced alone that fails once a peer of its generation has succeeded: the
    peer was done and gone before the replacement could join it, so the replacement had no
    rendezvous to rejoin (:func:`rejoinable`). Nor while the namespace refuses the creates
    of ranks of the generation (:func:`_refused_peers`), nor while a rank of the generation
    has never started (:func:`_unstarted_peers`): the workers that were created wait at the
    rendezvous for peers that never come, and fail at its timeout (:func:`_excused`);
    ``excused=False`` asks whether it would be their code's failure but for that, and
    ``refusals=False`` whether it would be but for the nodes that refused the workers
    (:func:`_node_excused`)."""
    if not losses.failed or losses.by_node or (excused and _excused(draft, pods)):
        return False
    bound = _bound(pods)
    if bound & (draft.suspect_nodes | draft.breaker_nodes) or _troubles_beside(draft, losses, pods):
        return False
    alone = bool(_succeeded(pods))
    refused = refusals and any(p.rejected or p.disruption for p in losses.failed)
    swappable = refused and _refusals_swappable(draft)
    return not all(
        _node_excused(draft, p, swappable) or (alone and _attempt(p) > 0) for p in losses.failed
    )


def _refusal_excused(draft: Draft, losses: Losses, pods: list[PodInfo], worker_fault: bool) -> bool:
    """The restart for ``losses`` is not charged only because nodes rejected or stopped its
    workers (:func:`_node_excused`): no other excuse would have spared the budget (a node of
    the generation in trouble, a rank that never started, ...). Only such a restart counts
    towards the phase's ``admissionRejections`` or ``nodeDisruptions``: before, a worker a
    node shutting down stopped, beside that node NotReady, used one up."""
    return not worker_fault and _code_fault(draft, losses, pods, refusals=False)


def _node_excused(draft: Draft, pod: PodInfo, swappable: bool) -> bool:
    """The worker ended by its node's doing, not its code's: the node's kubelet rejected it
    at admission or stopped it for the node's sake (:func:`refusing_nodes`), and the node can
    trade places with a healthy spare (``swappable``: :func:`_refusals_swappable`), so the
    next worker goes elsewhere. With none, it goes back to the same node: the refusal is
    charged to ``restartBudget`` like a worker failing there, which bounds the retries.

    A phase is excused as many such restarts of each kind as it has spares (``spares.count``,
    counted in its record's ``admissionRejections`` and ``nodeDisruptions``): enough for each
    spare to be tried once. A node that refused a worker is healthy again once its pod is gone
    (a gang restart deletes it), so before, nodes that all reject (a device plugin failing on
    every node) traded places with one another for ever, the gang restarting each time and
    nothing charged; beyond that count a refusal is charged, and the budget bounds it. So is
    a worker evicted wherever it goes because it is the one using up its node's memory."""
    if pod.rejected:
        used = draft.record.admission_rejections
    elif pod.disruption:
        used = draft.record.node_disruptions
    else:
        return False
    return swappable and used < draft.spec.spares.count


def _refusals_swappable(draft: Draft) -> bool:
    """Every active node that refused a worker (:func:`refusing_nodes`) has a healthy spare to
    trade places with (:func:`keep_troubled_out`)."""
    rejecting = refusing_nodes(draft)
    actives = [n for n in draft.held(NodeRole.ACTIVE) if n.name in rejecting]
    spares = usable_spares(_healthy_spares(draft, rejecting), draft.tolerations)
    return len(spares) >= len(actives)


def _refused_peers(draft: Draft, pods: list[PodInfo]) -> bool:
    """``WorkersRefused`` is True (:mod:`phased.core.refusals`) and ranks of the generation
    ``pods`` belong to have no worker: their creates are the ones refused."""
    if not draft.is_true(ConditionType.WORKERS_REFUSED):
        return False
    world = world_of(live(pods), draft.status.world_size, world_limit(draft))
    made = {p.rank for p in pods}
    return any(rank not in made for rank in range(world))


def _unstarted_peers(pods: list[PodInfo]) -> list[int]:
    """The ranks of the generation ``pods`` belong to whose worker (the newest attempt, not
    being deleted) has never started: still Pending (not placed, its image not pulled, its
    node not Ready). Torchrun's rendezvous waits for every rank of the world
    (``PET_NNODES``), so while one has not started no training code ran anywhere."""
    return sorted(
        p.rank
        for p in latest_attempts(live(pods))
        if p.phase == PodPhase.PENDING and p.rank is not None
    )


def _excused(draft: Draft, pods: list[PodInfo]) -> str:
    """Why workers failing now are not the code's doing though their nodes are healthy, or
    "": they waited at the rendezvous for ranks of their generation that never came — whose
    creates the namespace refuses (:func:`_refused_peers`), or whose worker never started
    (:func:`_unstarted_peers`) — and failed at its timeout. Said in the restart's event."""
    if _refused_peers(draft, pods):
        return (
            "; the namespace refuses the creates of ranks of the generation, so its peers "
            "failed waiting at the rendezvous (not charged to restartBudget)"
        )
    unstarted = _unstarted_peers(pods)
    if unstarted:
        return (
            f"; rank(s) {', '.join(map(str, unstarted))} of the generation never started, so "
            "its peers failed waiting at the rendezvous (a failed start, not charged to "
            "restartBudget)"
        )
    return ""


def _bound(pods: list[PodInfo]) -> set[str]:
    """The nodes the generation's workers are on (each rank's newest attempt)."""
    return {p.node_name for p in latest_attempts(live(pods)) if p.node_name}


def _charge_stop(draft: Draft, losses: Losses, pods: list[PodInfo]) -> None:
    """The restart stopped training: a stop (:mod:`.interruptions`) from when its cause
    began, unless a ledger entry still open already runs until training resumes."""
    if any(e.resumed is None for e in draft.ledger):
        return
    bound = _bound(pods)
    starts = [draft.now]
    troubled = [(s.node, s.since) for s in draft.status.suspects]
    troubled += [(h.node, h.since) for h in draft.status.breaker.held]
    starts += [t for node, since in troubled if node in bound and (t := parse_time(since))]
    starts += _troubles_beside(draft, losses, pods).values()
    interruptions.stopped(draft, min(starts), _why(losses))


def _blame_troubles(draft: Draft, losses: Losses, pods: list[PodInfo]) -> None:
    """Mark the troubles this restart came from (:func:`.flapping.blame`): of each node of
    the generation in trouble now, or in trouble while the failed workers ran
    (:func:`_troubles_beside`: the workers beside it failed with their lost peer). A node
    that fails now is answered as a failure, not counted as a flap."""
    bound = _bound(pods)
    created = [p.created for p in pods if p.created is not None]
    blamed = {
        node: min(created, default=draft.now)
        for node in bound & (draft.suspect_nodes | draft.breaker_nodes)
    }
    first = min((p.created for p in losses.failed if p.created is not None), default=draft.now)
    for node in _troubles_beside(draft, losses, pods):
        blamed.setdefault(node, first)
    history = draft.status.troubles
    for node, after in sorted(blamed.items()):
        history = flapping.blame(history, node, after)
    draft.set(troubles=history)


def _troubles_beside(draft: Draft, losses: Losses, pods: list[PodInfo]) -> dict[str, datetime]:
    """The nodes of the generation that were in trouble while the workers that failed ran
    and are healthy again, with when the trouble began: a failed worker's own node, healthy
    again since the worker was created (:func:`_ended_with_its_node`), and a node the
    generation's workers are on whose trouble began after a failed worker was created (and
    before the last of them ended, when their ends are known: one that began later, an
    operator away meanwhile, came after the failure and is no cause of it) and has restarted
    no worker yet (``status.troubles``, kept while flap detection is on: the workers lived
    through it so far, and their collective with the worker there broke with it, to fail at
    its timeout once the node was back). Each such trouble excuses one
    restart: the restart marks it (:func:`_blame_troubles`), and it counts towards the node's
    flapping."""
    found = {
        pod.node_name: _trouble_began(draft, pod)
        for pod in losses.failed
        if pod.node_name and _ended_with_its_node(draft, pod)
    }
    created = [p.created for p in losses.failed if p.created is not None]
    if not created:
        return found
    first, bound = min(created), _bound(pods)
    ends = [p.finished for p in losses.failed]
    last = max(e for e in ends if e is not None) if None not in ends else None
    for entry in draft.status.troubles:
        since = parse_time(entry.since)
        if entry.node not in bound or entry.restarted or since is None or since < first:
            continue
        if last is None or since <= last:
            found.setdefault(entry.node, since)
    return found


def _trouble_began(draft: Draft, pod: PodInfo) -> datetime:
    """When the trouble the worker ended with began: the last one remembered on its node
    since the worker was created, else when the node was healthy again."""
    name = pod.node_name or ""
    created = pod.created or draft.now
    began = [
        t
        for e in draft.status.troubles
        if e.node == name and (t := parse_time(e.since)) is not None and t >= created
    ]
    if began:
        return max(began)
    policy = draft.spec.failure_policy
    resource = gpu_resource(draft.record.gpu_type or "", draft.settings)
    since = healthy_since(draft.nodes[name], policy, resource, draft.phase.gpus_per_node)
    return min(since or draft.now, draft.now)


def _ended_with_its_node(draft: Draft, pod: PodInfo) -> bool:
    """The worker's node became healthy again after the worker was created."""
    node = draft.nodes.get(pod.node_name or "")
    if node is None or pod.created is None:
        return False
    policy = draft.spec.failure_policy
    resource = gpu_resource(draft.record.gpu_type or "", draft.settings)
    since = healthy_since(node, policy, resource, draft.phase.gpus_per_node)
    return since is not None and since > pod.created


def _unreplaced(draft: Draft) -> list[str]:
    """Nodes of open failures that no spare has replaced yet, oldest first."""
    return [e.node for e in draft.ledger if e.replaced_by is None and e.resumed is None]


def _shrink_to_max(draft: Draft, pods: list[PodInfo], losses: Losses) -> bool:
    """``nodes.max`` was lowered below the running world: restart the gang at once at the new
    size (sizing then keeps ``max`` actives and makes the rest spares or gives them back).

    Not a failure: neither ``restarts`` nor the restart budget counts it, and no ledger
    entry is written — unless a failure found in the same pass (``losses``: the workers on
    lost nodes already deleted with no grace) restarts the gang too: that restart is counted
    as it would be without the resize. Raising ``max`` restarts nothing: the pool grows at
    the next start of a generation (a restart or the next phase).

    Workers of the generation gone or being deleted (``losses.vanished``, every one of them
    when called from :func:`_restart_vanished`) are taken as stopped by the resize itself:
    the pass that restarted the gang for it deleted them and was cut short before its
    status write (the operator killed, the write refused), so the next pass finds the old
    generation still the running one, its workers gone. Counted, the resize became a
    restart and a stop charged to the interruption budget whenever its write was lost.

    Not while the breaker holds failures (automatic action is paused and the workers on the
    held nodes are left alone: the resize happens once it clears or a person releases it),
    and not once a worker of the generation has succeeded (its work is done: a restart would
    run the phase again; the boundary sizes the next phase anew).
    """
    if draft.breaker_nodes or any(p.phase == PodPhase.SUCCEEDED for p in live(pods)):
        return False
    limit = draft.phase.nodes.max
    # The workers' world-size labels (those being deleted too), else the status's world size
    # if it is this phase's (after a transition whose status write was lost, it is the
    # previous phase's).
    same = draft.snap.status.phase == draft.phase.name
    world = world_of(pods, draft.snap.status.world_size if same else 0, MAX_NODES)
    if world <= limit:
        return False
    why = f"nodes.max lowered from {world} to {limit}"
    if losses.by_node or losses.failed:
        worker_fault = _code_fault(draft, losses, pods)
        if not worker_fault and not _retry_start(draft, losses, pods):
            return True
        by_refusal = losses if _refusal_excused(draft, losses, pods, worker_fault) else None
        if not _count_restart(draft, worker_fault, by_refusal):
            return True
        _charge_stop(draft, losses, pods)
        _blame_troubles(draft, losses, pods)
        why = f"{why}; {_why(losses)}" + (
            _excused(draft, pods) if losses.failed and not losses.by_node else ""
        )
    draft.event(
        NORMAL,
        "PoolShrinking",
        f"phase {draft.phase.name}: nodes.max lowered to {limit} while {world} workers run; "
        f"restarting the gang on {limit} nodes from the last checkpoint",
    )
    gang_restart(draft, why)
    return True


def _swap_interrupted(draft: Draft) -> bool:
    """A ledger entry has not resumed: its answer (the swap, the restart that follows it)
    may have been cut short, its status write lost."""
    return any(e.resumed is None for e in draft.ledger)


def _why(losses: Losses) -> str:
    parts: list[str] = []
    if losses.by_node:
        parts.append(f"lost node(s) {', '.join(sorted(set(losses.by_node.values())))}")
    if losses.failed:
        parts.append(f"worker(s) failed: {', '.join(map(_failed_as, losses.failed))}")
    if losses.vanished:
        parts.append(f"worker(s) gone: rank {', '.join(map(str, losses.vanished))}")
    return "; ".join(parts)


def _failed_as(pod: PodInfo) -> str:
    if pod.rejected:
        return f"{pod.name} (rejected by node {pod.node_name} at admission: {pod.reason})"
    if pod.disruption:
        return f"{pod.name} (stopped by node {pod.node_name}'s kubelet: {pod.disruption})"
    return pod.name


# --- healed nodes ---------------------------------------------------------------------------


def return_healed(draft: Draft, type_key: str) -> None:
    """Quarantined nodes that stayed healthy long enough go back (``ReturnToSpares``).

    Healthy since the latest transition of its Ready and GPU-fault conditions — when that
    came after its quarantine and after the last pass (``status.accounting.accountedAt``),
    which would have found it healthy then: the recovery is dated. When none did, nothing
    on the node dates it (GPUs back in allocatable, a fault condition removed rather than
    set False, a node Ready all along), and the first pass that found it healthy stands
    for it (``status.healed``). Before, such a node was said healthy since long before its
    quarantine and went back at once, whatever ``healthyBeforeReturn``. A pass that finds
    it unhealthy forgets it: its clock starts again. So does one that found it unhealthy
    after a transition: a node Ready again (its kubelet restarted) while its GPUs were
    still missing was dated by that transition once they came back, and went back as soon
    as ``healthyBeforeReturn`` had passed since it — not since its GPUs came back."""
    policy = draft.spec.failure_policy
    if policy.node_return != NodeReturnPolicy.RETURN_TO_SPARES:
        draft.set(healed=[])
        return
    resource = gpu_resource(type_key, draft.settings)
    steady = parse_duration(policy.healthy_before_return)
    seen = {h.node: parse_time(h.since) for h in draft.status.healed}
    last = parse_time(draft.snap.status.accounting.accounted_at)  # the last pass written
    healed: list[Healed] = []
    for node in draft.held(NodeRole.QUARANTINED):
        dated = healthy_since(node, policy, resource, draft.phase.gpus_per_node)
        if dated is None:
            continue
        note = decode_quarantine(node.annotations.get(labels.ANNOTATION_QUARANTINE))
        quarantined = (note.cordoned or note.detected) if note is not None else None
        undated = quarantined is not None and dated <= quarantined
        # A transition the last pass had seen, when that pass did not find it healthy
        # (it is not in ``seen``), dates some other change: this pass is the first.
        passed = last is not None and dated < last
        first = seen.get(node.name) or (draft.now if undated or passed else dated)
        first = min(first, draft.now)
        healed.append(Healed(node=node.name, since=format_time(first)))
        since = max(dated, first)
        left = steady - (draft.now - since).total_seconds()
        if left > 0:
            draft.later(left)
            continue
        flaps = flapping.quiet_in(draft.status.troubles, node.name, policy, draft.now)
        if flaps is not None:  # healthy for now, but it flapped: not trusted before it ages out
            draft.later(flaps)
            continue
        short = len(draft.held(NodeRole.SPARE)) < draft.spec.spares.count
        # A node relabelled out of the operator's nodeSelector is not the operator's to use;
        # nor is one someone else had cordoned before it was quarantined: that cordon stays.
        theirs = _cordoned_before(node)
        fits = (
            has_type_labels(node, type_key, draft.settings)
            and selects(draft.settings.node_selector, node.labels)
            and not theirs
        )
        if fits and not short and draft.breaker_nodes:
            # The breaker holds failures: a held spare it may yet quarantine still counts
            # among the spares, so whether the node is needed is judged once it lets go.
            continue
        if short and fits and draft.status.state not in (JobState.SUCCEEDED, JobState.FAILED):
            draft.act(UnquarantineNode(node=node.name))
            draft.roles[node.name] = NodeRole.SPARE
            draft.event(NORMAL, "NodeReturned", f"node {node.name} healthy again: back as a spare")
        else:
            # Given back to the cluster whole: its quarantine note and taint gone first (and
            # Phased's cordon), since a release alone keeps a quarantined node's cordon and
            # marks for a person.
            draft.act(UnquarantineNode(node=node.name))
            draft.act(ReleaseNode(node=node.name))
            draft.roles.pop(node.name, None)
            draft.event(
                NORMAL,
                "NodeReleased",
                f"node {node.name} healthy again: "
                + (
                    "released to the cluster, still cordoned (someone else cordoned it before "
                    "Phased quarantined it)"
                    if theirs
                    else "uncordoned and released to the cluster"
                ),
            )
    draft.set(healed=[h for h in healed if draft.roles.get(h.node) == NodeRole.QUARANTINED])


def _cordoned_before(node: NodeInfo) -> bool:
    """The quarantined node's note says it was cordoned by someone else before Phased
    quarantined it (:mod:`phased.core.quarantine`): that cordon is theirs and stays."""
    note = decode_quarantine(node.annotations.get(labels.ANNOTATION_QUARANTINE))
    return note is not None and note.cordoned_before
