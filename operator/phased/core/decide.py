"""``decide``: snapshot + settings + now → plan. The one entry point of the pure core.

Order of one call for a valid, live job: account the interval since the last call; fold the
workers' checkpoint reports into the status; recover ledger entries from quarantine notes;
find the position (phase, generation) from status and pods; ensure the checkpoint claim and
report Secret; time-out and completion checks (possibly advancing several phases, each
after its final checkpoint when workers report); failure detection and quarantine (or the
breaker's hold); give back spares relabelled to another GPU type, and held nodes a person
relabelled out of the operator's ``nodeSelector`` or cordoned; keep the running generation whole
(promote, restart); answer workers stuck Pending; take healed nodes back; size the pool and
start the next generation; clear guests from the job's nodes; checkpoint staleness; then
resumption, interruption, conditions, summary (see :mod:`phased.core.checkpoints`).

Deletion (``job.deleting``): every worker is deleted explicitly (owner references would
cascade, but the pods must leave the nodes before the nodes are given back) and every
active and spare node is released; the interval since the last pass is charged, as on any
pass. Quarantined nodes are *not* released: they keep their ``phased.dev/job-uid`` label,
role ``quarantined``, cordon and quarantine note (which names the job), outliving the job,
so no other job gets a broken node and a person can see where it came from.
``Plan.finished`` becomes True once the job holds no active or spare node and none of its
pods is still running (pods already terminating are left to finish).

Finished jobs (Succeeded or Failed) likewise stop their workers and release their active
and spare nodes; ``Plan.finished`` is True once they hold none.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from phased.api.durations import format_duration, parse_duration
from phased.api.v1alpha1 import (
    BasisGPUNode,
    JobState,
    NodeRole,
    PhaseState,
    TrainingJobStatus,
    UsageBasis,
)
from phased.core import accounting, checkpoints, interruptions
from phased.core.conditions import ConditionType, find, set_condition
from phased.core.draft import NORMAL, WARNING, Draft
from phased.core.edits import edit_problems
from phased.core.guests import clear_guests, mark_vacant
from phased.core.model import (
    CreatePod,
    DeletePod,
    EmitEvent,
    Plan,
    PodInfo,
    PodPhase,
    ReleaseNode,
    Snapshot,
)
from phased.core.ownership import holds
from phased.core.phases import (
    TERMINAL,
    advance,
    derive_position,
    fail,
    generation_pods,
    live,
    phase_complete,
    settle,
    stop_lingering,
    timed_out,
    world_limit,
    world_of,
)
from phased.core.podlabels import made_by_job
from phased.core.pools import CPU_TYPE, gpu_kind
from phased.core.recovery import (
    handle_failures,
    recover_ledger,
    resume_done_workers,
    return_healed,
    tend_generation,
)
from phased.core.refusals import RETURNED, give_back_refused, returned_message
from phased.core.scope import release_out_of_scope
from phased.core.settings import Settings
from phased.core.sizing import (
    phase_type,
    recover_phase_start,
    release_changed_spares,
    release_cordoned,
    release_misfits,
    size_and_start,
)
from phased.core.starts import tend_starts
from phased.core.tampered import say_marks_changed
from phased.core.times import format_time, parse_time, seconds_between
from phased.core.validate import spec_problems


def decide(snapshot: Snapshot, settings: Settings, now: datetime) -> Plan:
    """Decide what to do about one TrainingJob. Pure: reads only its arguments.

    No clock, no API, no I/O: the same snapshot, settings and ``now`` always give the same
    plan, and a plan whose actions the cluster has absorbed leads to a plan with nothing
    new. The effects — claiming and releasing nodes, pods, the Service, events, the status
    write and the requeue — are performed by :mod:`phased.reconcile`, which applies
    ``Plan.actions`` in order through the kube layer and then writes ``Plan.status`` once.

    The core's clock never goes back: a ``now`` earlier than ``accounting.accountedAt``
    (the operator's clock stepped back, a new replica's runs behind) is taken as that
    instant, so no interval is charged twice, no interruption time is taken back and no
    stamp is written earlier than one already written.
    """
    now = _not_before_accounted(snapshot, now)
    # Pods that only carry the job's labels are not its workers (phased.core.podlabels).
    workers = tuple(p for p in snapshot.pods if made_by_job(snapshot.job, p))
    snapshot = replace(snapshot, pods=workers)
    if snapshot.job.deleting:
        return _deleting(snapshot, settings, now)
    spec = snapshot.spec
    if spec is None:
        return _invalid(
            snapshot, settings, snapshot.spec_error or "the spec could not be read", now
        )
    problems = spec_problems(spec, settings)
    if problems:
        return _invalid(snapshot, settings, "; ".join(problems), now)
    refused = edit_problems(spec, snapshot.status, snapshot.pods, snapshot.job)
    if refused:
        return _invalid(snapshot, settings, "; ".join(refused), now)
    draft = Draft.for_snapshot(snapshot, spec, settings, now)
    _start(draft)
    say_marks_changed(draft)
    # Reports first: an entry rebuilt from a quarantine note reckons its lost work from the
    # checkpoints reported, as the pass that answered the failure did.
    checkpoints.fold_reports(draft)
    recover_ledger(draft)
    checkpoints.recover_told(draft)
    if draft.status.state in TERMINAL:
        _account(draft)
        return _finish(draft, finished=settle(draft))
    derive_position(draft)
    _account(draft)
    checkpoints.prepare(draft)
    # Workers that met the completion rule did the phase's work: the deadline passing while
    # the boundary waits (for their final checkpoint, or for this pass) does not fail it.
    if not phase_complete(draft) and timed_out(draft):
        fail(
            draft,
            "PhaseTimedOut",
            f"phase {draft.phase.name} ran past its maxDuration {draft.phase.max_duration}",
        )
        return _finish(draft, finished=settle(draft))
    while phase_complete(draft):
        if checkpoints.final_checkpoint_due(draft):
            break
        advance(draft)
        if draft.status.state in TERMINAL:
            return _finish(draft, finished=settle(draft))
    type_key = phase_type(draft)
    recover_phase_start(draft, type_key)
    if not live(generation_pods(draft)):
        release_misfits(draft, type_key)
    handle_failures(draft, type_key)
    release_changed_spares(draft, type_key)
    release_out_of_scope(draft)
    release_cordoned(draft)
    if give_back_refused(draft):
        return _finish(draft)  # refused too long: the pool is given back, and it waits
    tend_generation(draft)
    if draft.status.state not in TERMINAL:
        tend_starts(draft)
    if draft.status.state in TERMINAL:
        return _finish(draft, finished=settle(draft))
    return_healed(draft, type_key)
    size_and_start(draft, type_key)
    mark_vacant(draft)
    clear_guests(draft)
    checkpoints.check_staleness(draft)
    return _finish(draft)


def _not_before_accounted(snapshot: Snapshot, now: datetime) -> datetime:
    reached = parse_time(snapshot.status.accounting.accounted_at)
    return now if reached is None else max(now, reached)


def _start(draft: Draft) -> None:
    if draft.status.start_time is None:
        draft.set(start_time=format_time(draft.now))
    _unreadable(draft)
    draft.condition(ConditionType.INVALID_SPEC, False, "Valid", "")
    if draft.status.state == JobState.INVALID:
        draft.set(state=JobState.PENDING, message="")


def _unreadable(draft: Draft) -> None:
    """Status fields that do not parse are said, and left alone (never written over)."""
    fields = draft.snap.unreadable_status
    draft.condition(
        ConditionType.STATUS_UNREADABLE,
        bool(fields),
        "FieldsUnreadable" if fields else "Readable",
        (
            f"status field(s) {', '.join(fields)} could not be read; Phased decides from what "
            "the cluster shows and leaves them as they are: correct or remove them "
            "(kubectl edit --subresource=status)"
            if fields
            else ""
        ),
        WARNING,
    )


def _account(draft: Draft) -> None:
    """Charge the interval since ``accounted_at`` at the pool that held during it.

    That pool is ``accounting.basis``: what the previous call left (its roles and Running
    workers after its actions), charged to the phase it served. Statuses written before the
    basis existed fall back to the pool observed now. An interval longer than
    :func:`_unobserved_after` had no operator watching: it is charged all the same (the
    nodes were held), added to ``unobservedSeconds`` and named by an ``AccountingGap`` event.
    """
    acc = draft.status.accounting
    last = parse_time(acc.accounted_at)
    seconds = seconds_between(last, draft.now)
    observed = _usage(draft, _running(draft))
    basis = _from_basis(draft) or (draft.index, observed)
    index, usage = basis
    part = accounting.Slice.of(usage, seconds, draft.settings)
    if last is not None:
        record = accounting.add_to_phase(draft.records[index], part)
        if draft.status.state == JobState.WAITING:
            record = record.model_copy(update={"waiting_seconds": record.waiting_seconds + seconds})
        draft.records[index] = record
        if seconds > _unobserved_after(draft.settings):
            acc = acc.model_copy(update={"unobserved_seconds": acc.unobserved_seconds + seconds})
            draft.actions.append(_gap(seconds, last, usage))
    acc = accounting.add_to_job(
        acc,
        part if last is not None else _ZERO,
        draft.now,
        draft.settings.currency,
    )
    elapsed = seconds_between(parse_time(draft.record.start_time), draft.now)
    acc = acc.model_copy(
        update={
            "estimated_remaining_cost": accounting.estimate_remaining_cost(
                draft.spec, draft.index, elapsed, draft.record.gpu_type, draft.settings
            )
        }
    )
    util = accounting.utilization(acc, observed)
    draft.set(accounting=acc, utilization=util, utilization_percent=util.allocation)


def _unobserved_after(settings: Settings) -> float:
    """Passes run at least every resync interval; three of them missed is a gap."""
    return 3.0 * float(parse_duration(settings.resync_interval))


def _gap(seconds: float, last: datetime, usage: accounting.Usage) -> EmitEvent:
    return EmitEvent(
        WARNING,
        "AccountingGap",
        f"no operator watched this job for {format_duration(seconds)} "
        f"(since {format_time(last)}); the interval is charged at the pool it held "
        f"before: {usage.active_nodes} active, {usage.spare_nodes} spare nodes",
    )


def _type_key(draft: Draft) -> str:
    return draft.record.gpu_type or (
        CPU_TYPE if draft.phase.is_cpu_only else draft.phase.gpu_types[0].value
    )


def _running(draft: Draft) -> list[PodInfo]:
    return [p for p in live(generation_pods(draft)) if p.phase == PodPhase.RUNNING]


def _usage(draft: Draft, running: list[PodInfo]) -> accounting.Usage:
    """The pool held and the Running workers on its active nodes: a worker the API still
    shows Running on a node the job no longer holds (deleted, its pod not collected yet)
    uses no GPU the job pays for, and counted it made busy exceed reserved."""
    active = draft.held(NodeRole.ACTIVE)
    names = {n.name for n in active}
    return accounting.Usage(
        active_nodes=len(active),
        spare_nodes=len(draft.held(NodeRole.SPARE)),
        running_workers=sum(1 for p in running if p.node_name in names),
        gpus_per_node=draft.phase.gpus_per_node,
        type_key=_type_key(draft),
        gpu_nodes=_gpu_nodes(draft) if _type_key(draft) == CPU_TYPE else (),
    )


def _from_basis(draft: Draft) -> tuple[int, accounting.Usage] | None:
    """The phase index (in the current spec) and the usage the stored basis describes."""
    basis = draft.status.accounting.basis
    names = [p.name for p in draft.spec.phases]
    if basis is None:
        return None
    if basis.phase in names:
        return names.index(basis.phase), _basis_usage(basis)
    if basis.phase and basis.phase == draft.carried_from:  # renamed: the record followed
        return draft.index, _basis_usage(basis)
    return None


def _basis_usage(basis: UsageBasis) -> accounting.Usage:
    return accounting.Usage(
        active_nodes=basis.active_nodes,
        spare_nodes=basis.spare_nodes,
        running_workers=basis.running_workers,
        gpus_per_node=basis.gpus_per_node,
        type_key=basis.gpu_type,
        gpu_nodes=tuple(accounting.GPUNode(g.gpu_type, g.gpus, g.active) for g in basis.gpu_nodes),
    )


def _record_basis(draft: Draft) -> None:
    """Store the pool this call leaves behind: the next interval is charged at it."""
    deleted = draft.deleted_pods()
    running = [p for p in _running(draft) if p.name not in deleted]
    usage = _usage(draft, running)
    basis = UsageBasis(
        phase=draft.phase.name,
        gpu_type=usage.type_key,
        active_nodes=usage.active_nodes,
        spare_nodes=usage.spare_nodes,
        running_workers=usage.running_workers,
        gpus_per_node=usage.gpus_per_node,
        gpu_nodes=[
            BasisGPUNode(gpu_type=g.type_key, gpus=g.gpus, active=g.active) for g in usage.gpu_nodes
        ],
    )
    acc = draft.status.accounting.model_copy(update={"basis": basis})
    draft.set(accounting=acc)


_ZERO = accounting.Slice(0.0, 0.0, 0.0, 0.0)


def _gpu_nodes(draft: Draft) -> tuple[accounting.GPUNode, ...]:
    """The GPU nodes a CPU phase holds (only with ``cpu.allowGpuNodes``, or for the instant
    before a boundary releases them): billed as GPU nodes."""
    found: list[accounting.GPUNode] = []
    for role in (NodeRole.ACTIVE, NodeRole.SPARE):
        for node in draft.held(role):
            kind = gpu_kind(node, draft.settings)
            if kind is not None:
                found.append(accounting.GPUNode(kind[0], kind[1], role == NodeRole.ACTIVE))
    return tuple(found)


def _mark_resumed(draft: Draft) -> None:
    """Open failures end when every rank of the running generation is Running again (or has
    succeeded) — dated at its workers' last start, as the pods say it
    (:func:`interruptions.gang_started`), should a pass after that one find it — or, when
    workers report checkpoints, at the first report of a worker started after them. Those
    that interrupted nothing (a node whose worker had succeeded, a phase that had made no
    worker yet) are resumed at detection."""
    resume_done_workers(draft)
    if checkpoints.judged(draft):
        for i, entry in enumerate(draft.ledger):
            if entry.resumed is not None or entry.cordoned is None:
                continue
            resumed = checkpoints.resumed_at(draft, entry)
            if resumed is not None:
                start = parse_time(entry.detected) or resumed
                draft.ledger[i] = entry.model_copy(
                    update={
                        "resumed": format_time(resumed),
                        "interruption_seconds": seconds_between(start, resumed),
                    }
                )
        return
    if not _whole(draft):
        return
    pods = live(generation_pods(draft))
    for i, entry in enumerate(draft.ledger):
        if entry.resumed is None:
            start = parse_time(entry.detected) or draft.now
            resumed = interruptions.gang_started(draft, pods, start, entry.generation)
            draft.ledger[i] = entry.model_copy(
                update={
                    "resumed": format_time(resumed),
                    "interruption_seconds": seconds_between(start, resumed),
                }
            )


def _refusal_over(draft: Draft, state: JobState) -> None:
    """``WorkersRefused`` (phased.core.refusals) turns False with the first plan whose creates
    land (a plan is written only once all its actions landed), or once the job needs no
    workers: it waits holding nothing, or has ended."""
    created = any(isinstance(a, CreatePod) for a in draft.actions)
    if not draft.is_true(ConditionType.WORKERS_REFUSED):
        cond = find(draft.conditions, ConditionType.WORKERS_REFUSED)
        if created and cond is not None and cond.reason == RETURNED:  # tried again: admitted
            draft.condition(ConditionType.WORKERS_REFUSED, False, "Created", "")
            draft.set(pool_returns=0)
        return  # False already: its reason (Created, NotNeeded, PoolReturned) stays
    if created:
        draft.condition(ConditionType.WORKERS_REFUSED, False, "Created", "")
        draft.set(pool_returns=0)
    elif state in TERMINAL or state == JobState.WAITING:
        draft.condition(ConditionType.WORKERS_REFUSED, False, "NotNeeded", "")


def _whole(draft: Draft) -> bool:
    """Every rank of the running generation is Running or has Succeeded (a rank that
    succeeded was not interrupted: it has done its part), and this pass touched no worker."""
    touched = any(_is_pod_action(a) for a in draft.actions)
    pods = live(generation_pods(draft))
    world = world_of(pods, draft.status.world_size, world_limit(draft))
    running = {p.rank for p in pods if p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED)}
    return not touched and world > 0 and all(r in running for r in range(world))


def _is_pod_action(action: object) -> bool:
    return isinstance(action, CreatePod | DeletePod)


def _interruption(draft: Draft) -> None:
    policy = draft.spec.failure_policy
    end = parse_time(draft.status.completion_time)
    for i, entry in enumerate(draft.ledger):
        if entry.resumed is None:
            start = parse_time(entry.detected) or draft.now
            draft.ledger[i] = entry.model_copy(
                update={"interruption_seconds": seconds_between(start, end or draft.now)}
            )
    before = draft.status.interruption
    stops, folded = accounting.fold(
        draft.ledger,
        before.stops,
        before.folded_seconds,
        draft.now,
        end,
        keep=interruptions.MAX_STOPS,
    )
    spent = accounting.interruption(
        draft.ledger, policy.interruption_budget, draft.now, end, stops, folded
    )
    draft.set(interruption=spent)
    over = spent.used_seconds > spent.budget_seconds
    message = (
        f"interruptions used {spent.used} of the {policy.interruption_budget} budget"
        if over
        else ""
    )
    draft.condition(
        ConditionType.INTERRUPTION_BUDGET_EXCEEDED,
        over,
        "BudgetExceeded" if over else "WithinBudget",
        message,
        WARNING,
    )


def _state(draft: Draft) -> JobState:
    if draft.status.state in TERMINAL:
        return draft.status.state
    if draft.waiting:
        return JobState.WAITING
    if any(e.resumed is None for e in draft.ledger) or _training_held(draft):
        return JobState.RECOVERING
    created = any(_is_pod_action(a) for a in draft.actions)
    pods = live(generation_pods(draft))
    if any(p.phase == PodPhase.PENDING for p in pods) and not created:
        return JobState.PENDING  # workers not started yet (WorkersPending says if stuck)
    if pods or created:
        return JobState.RUNNING
    return JobState.PENDING


def _training_held(draft: Draft) -> bool:
    """The breaker holds a node other than a spare the job still holds: an active node, or
    one deleted since (its place is kept, and no role can be read from it any more). Spares
    it holds stop no training, and a job whose spares alone failed runs on (``MassFailure``
    says what is held). Nor does an active node whose worker has succeeded: that rank did
    its part, and its peers train on."""
    spares = {n for n, role in draft.roles.items() if role == NodeRole.SPARE}
    done = interruptions.done_nodes(live(generation_pods(draft)), draft.status.breaker.held)
    return bool(draft.breaker_nodes - spares - done)


def _finish(draft: Draft, finished: bool = False) -> Plan:
    stop_lingering(draft)
    if draft.status.state not in TERMINAL:
        _mark_resumed(draft)
        interruptions.resume(draft, live(generation_pods(draft)), _whole(draft))
    else:
        if draft.is_true(ConditionType.CHECKPOINT_STALE):
            draft.condition(ConditionType.CHECKPOINT_STALE, False, "JobFinished", "")
        _breaker_done(draft)
    _record_basis(draft)
    _interruption(draft)
    state = _state(draft)
    _refusal_over(draft, state)
    active = draft.held(NodeRole.ACTIVE)
    spares = draft.held(NodeRole.SPARE)
    quarantined = sorted(n for n, r in draft.roles.items() if r == NodeRole.QUARANTINED)
    if state not in TERMINAL:
        phase_state = {
            JobState.WAITING: PhaseState.WAITING,
            JobState.PENDING: PhaseState.PENDING,
        }.get(state, PhaseState.RUNNING)
        draft.update_record(
            state=phase_state,
            nodes=len(active),
            max_nodes_seen=max(draft.record.max_nodes_seen, len(active)),
        )
    draft.set(
        state=state,
        message=draft.status.message if state in TERMINAL else _message(draft, state),
        active_nodes=len(active),
        spare_nodes=len(spares),
        quarantined_nodes=len(quarantined),
        pool=draft.status.pool.model_copy(
            update={
                "active": [n.name for n in active],
                "spares": [n.name for n in spares],
                "quarantined": quarantined,
                "uids": {n.name: n.uid for n in [*active, *spares] if n.uid},
            }
        ),
    )
    return draft.plan(finished=finished)


def _breaker_done(draft: Draft) -> None:
    """A job that ended while the breaker held failures gave their nodes back with the rest
    of its pool: the breaker holds nothing any more, and says so once."""
    if not draft.is_true(ConditionType.MASS_FAILURE):
        return
    names = ", ".join(h.node for h in draft.status.breaker.held) or "none"
    message = (
        f"the job ended ({draft.status.state.value}) while the breaker held {names}: "
        "they were given back unanswered with the rest of its pool"
    )
    draft.condition(ConditionType.MASS_FAILURE, False, "JobFinished", message)
    draft.event(NORMAL, "MassFailureCleared", message)
    draft.set(breaker=draft.status.breaker.model_copy(update={"held": []}))


def _message(draft: Draft, state: JobState) -> str:
    phase = draft.phase.name
    if state == JobState.WAITING:
        returned = returned_message(draft)
        if returned is not None:
            return returned
        for cond in draft.conditions:
            if cond.type == ConditionType.CAPACITY_SHORT:
                return cond.message
    if state == JobState.RECOVERING:
        return f"phase {phase}: recovering from node failure"
    if draft.awaiting_final:
        return f"phase {phase}: workers done, waiting for their final checkpoint"
    if state == JobState.RUNNING:
        return f"phase {phase} running on {draft.status.world_size} nodes"
    pods = live(generation_pods(draft))
    waiting = sum(1 for p in pods if p.phase == PodPhase.PENDING)
    if waiting:
        return f"phase {phase}: {waiting} of {len(pods)} workers not started yet"
    return f"phase {phase}: preparing the pool"


# --- jobs that are not running --------------------------------------------------------------


def _invalid(snapshot: Snapshot, settings: Settings, error: str, now: datetime) -> Plan:
    """Invalid spec: say so (condition, one event per problem found), touch nothing else.

    Nothing else means nothing: running workers keep running, held nodes stay held, the
    position (phase, index, generation) and the history are kept as they were, so putting
    the spec back lets the job carry on where it was. A finished job stays Succeeded or
    Failed whatever is wrong with the spec (the condition says what): taken for ``Invalid``,
    the spec put back made it a job to run again (``_start``), so a Failed job claimed nodes
    and started a new generation. The nodes it holds are still charged
    (:func:`_charge_hold`). Only its need for nodes goes (``waiting_for``): a job that cannot
    claim keeps no free node idle for itself in the line; mended, it publishes again, and its
    place (priority, age) is where it was.
    """
    status, actions = _charge_hold(snapshot.status, settings, now)
    state = status.state if status.state in TERMINAL else JobState.INVALID
    before = find(status.conditions, ConditionType.INVALID_SPEC)
    change = set_condition(
        status.conditions,
        ConditionType.INVALID_SPEC,
        True,
        "InvalidSpec",
        error,
        now,
        snapshot.job.generation,
    )
    if change.flipped or (before is not None and before.message != error):
        actions.append(EmitEvent(WARNING, "InvalidSpec", error))  # a new problem is said too
    new = status.model_copy(
        update={
            "state": state,
            "message": error,
            "conditions": list(change.conditions),
            "observed_generation": snapshot.job.generation,
            "waiting_for": {},
            "spares_wanted": {},
        }
    )
    return Plan(actions=tuple(actions), status=new)


def _charge_hold(
    status: TrainingJobStatus, settings: Settings, now: datetime
) -> tuple[TrainingJobStatus, list[EmitEvent]]:
    """Charge a held job's interval since ``accounted_at`` at ``accounting.basis``.

    Nothing moves while the job is held, so the pool the last pass left is the pool that
    holds: charged to the job and to the phase record it served, as :func:`_account` does,
    so the figures keep up with the nodes held and a long hold is not taken for a gap
    (``AccountingGap`` is for intervals no pass watched). No basis (an older status): left
    for the next pass to charge.
    """
    acc = status.accounting
    last = parse_time(acc.accounted_at)
    basis = acc.basis
    if basis is None or last is None:
        return status, []
    seconds = seconds_between(last, now)
    usage = _basis_usage(basis)
    part = accounting.Slice.of(usage, seconds, settings)
    records = [
        accounting.add_to_phase(r, part) if r.name == basis.phase else r for r in status.phases
    ]
    events: list[EmitEvent] = []
    if seconds > _unobserved_after(settings):
        acc = acc.model_copy(update={"unobserved_seconds": acc.unobserved_seconds + seconds})
        events.append(_gap(seconds, last, usage))
    acc = accounting.add_to_job(acc, part, now, settings.currency)
    return status.model_copy(update={"accounting": acc, "phases": records}), events


def _deleting(snapshot: Snapshot, settings: Settings, now: datetime) -> Plan:
    """Delete the workers, release active and spare nodes; quarantined nodes stay.

    The interval since the last pass is charged at the pool it left, as every pass charges
    it (the nodes were held until this pass lets them go), and the basis left is an empty
    pool: once the releases land the job holds nothing, so a later pass of the deletion
    charges nothing more. A pass whose actions fail writes no status, and the next charges
    again from the last one written."""
    actions: list[DeletePod | ReleaseNode | EmitEvent] = []
    running = [p for p in snapshot.pods if not p.deleting]
    for pod in running:
        node = snapshot.nodes.get(pod.node_name) if pod.node_name is not None else None
        force = pod.node_name is not None and (node is None or not node.ready)
        actions.append(DeletePod(pod.name, force=force, reason="TrainingJob deleted"))
    uid = snapshot.job.uid
    held = [
        n
        for n in (snapshot.nodes[name] for name in sorted(snapshot.nodes.labelled(uid)))
        if holds(n, uid, settings.installation) and n.role in (NodeRole.ACTIVE, NodeRole.SPARE)
    ]
    actions.extend(ReleaseNode(n.name) for n in held)
    # A job on its way out claims nothing: no free node is kept for it in the line.
    status: TrainingJobStatus = snapshot.status.model_copy(
        update={
            "observed_generation": snapshot.job.generation,
            "waiting_for": {},
            "spares_wanted": {},
        }
    )
    status, gaps = _charge_hold(status, settings, now)
    actions.extend(gaps)
    basis = status.accounting.basis
    if basis is not None:
        left = UsageBasis(phase=basis.phase, gpu_type=basis.gpu_type)
        status = status.model_copy(
            update={"accounting": status.accounting.model_copy(update={"basis": left})}
        )
    return Plan(actions=tuple(actions), status=status, finished=not held and not running)
