"""The phase flow: where the job is, when a phase is done, how a job ends.

The position is read from the status *and* from the pods: the phase index is the larger of
``status.phase_index`` and the highest phase any worker pod belongs to, and the generation
the larger of the status's and the pods', so a status write lost after a transition does
not lose the transition. Pods of finished phases are kept (they hold no resources, keep
their logs, and are this record); the owner reference removes them with the job. A worker
whose sidecar outlives it does hold its node, and is deleted once the job has moved on from
it (:func:`lingering`).

``restart_generation`` counts within a phase: a new phase starts at generation 0, and its
first workers get ``PHASED_RESUME=false``.

``maxDuration`` counts from the phase's ``start_time``, which is set when its first workers
are created, so time spent waiting for capacity does not eat into it.

A new generation (after a gang restart, or a new phase's first) is created once the job's
workers that were asked to stop have left its active nodes (:func:`stopping_until`): created
beside them, a new worker whose node they still hold fails to schedule, and the scheduler
then backs off from it (1 s doubling to 10 s a pod), so it ran seconds after its node came
free. A worker still stopping past its grace (``metadata.deletionTimestamp``) and
``STOP_MARGIN_S`` is no longer waited for: the generation is created and the scheduler
places each worker as its node frees (a node that never does is a stuck start, see
:mod:`phased.core.starts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import (
    MAX_NODES,
    CompletionMode,
    JobState,
    NodeRole,
    PhaseState,
    TrainingJobStatus,
)
from phased.core import interruptions, labels
from phased.core.conditions import ConditionType
from phased.core.draft import NORMAL, WARNING, Draft
from phased.core.model import DeletePod, PodInfo, PodPhase, ReleaseNode
from phased.core.podlabels import MAX_GENERATION, label_int
from phased.core.times import format_time, parse_time, shifted

TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED})
ENDED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
# After its grace a kubelet kills what is left, reports the pod ended and lets it go.
STOP_MARGIN_S = 10.0
DEFAULT_GRACE_S = 30  # a pod's terminationGracePeriodSeconds unless its spec says otherwise


def world_of(pods: list[PodInfo], fallback: int, limit: int) -> int:
    """The generation's world size from its pods' labels, never above ``limit`` (the
    phase's ``nodes.max``, or :func:`world_limit`): a label beyond it is ignored, and so is
    a fallback beyond it."""
    sizes = [
        size
        for size in (label_int(pod, labels.LABEL_WORLD_SIZE) for pod in pods)
        if size is not None and 1 <= size <= limit
    ]
    return max(sizes) if sizes else min(max(0, fallback), limit)


def world_limit(draft: Draft) -> int:
    """The largest world the running phase's generation may have: its ``nodes.max``, or the
    world the written status says the phase's generation was made with when ``max`` was
    lowered under it since (its ranks up to that world were made by Phased, as
    :func:`phased.core.podlabels.trusted` keeps them workers). Until the resize restarts
    the gang — it waits while the breaker holds failures or once a worker has succeeded —
    the generation is still that whole world: read at the new ``max``, a phase whose
    first ranks had succeeded was complete while the others still ran."""
    limit = draft.phase.nodes.max
    written = draft.snap.status
    if written.phase == draft.phase.name:
        limit = max(limit, min(written.world_size, MAX_NODES))
    return limit


def derive_position(draft: Draft) -> None:
    """Phase index and generation from the status and the pods (see the module docstring)."""
    names = [p.name for p in draft.spec.phases]
    status = draft.status
    index, generation = recorded_position(status, draft.pods, names)
    for earlier in range(status.phase_index, index):  # a transition whose status write was lost
        record = draft.records[earlier]
        if record.state != PhaseState.SUCCEEDED:
            draft.records[earlier] = record.model_copy(
                update={"state": PhaseState.SUCCEEDED, "end_time": format_time(draft.now)}
            )
    # The newest generation whose workers were made: the status's, or the pods' own.
    created = status.created_generation if index == status.phase_index else None
    made_gens = [p.generation for p in draft.pods if p.phase_name == names[index]]
    if made_gens:
        created = max(created or 0, *made_gens)
    draft.set(
        phase_index=index,
        phase=names[index],
        restart_generation=generation,
        created_generation=created,
    )
    # The world the generation's workers were made with (a status write lost after their
    # creation, or a create the API refused, left the size before it).
    made = [p for p in draft.pods if p.phase_name == names[index] and p.generation == generation]
    world = world_of(made, 0, world_limit(draft))
    if world:
        draft.set(world_size=world)
    _restart_counts(draft)


def _restart_counts(draft: Draft) -> None:
    """The restart counts are at least what the newest workers were made with: a status
    write lost after a restart neither forgets it nor gives its budget back."""
    restarts, worker = draft.status.restarts, draft.status.worker_restarts
    for pod in draft.pods:
        restarts = max(restarts, _bounded(label_int(pod, labels.LABEL_RESTARTS)))
        worker = max(worker, _bounded(label_int(pod, labels.LABEL_WORKER_RESTARTS)))
    draft.set(restarts=restarts, worker_restarts=worker)


def _bounded(value: int | None) -> int:
    return value if value is not None and 0 <= value <= MAX_GENERATION else 0


def interrupted_generation(status: TrainingJobStatus) -> int:
    """The generation a failure found now interrupts: the newest whose workers were made
    (``created_generation``). Between a gang restart and the creation of its next
    generation the status already names that next one, which no failure can interrupt (its
    workers answer the failures): a node failing there interrupted the one being stopped.
    Before, its ledger entry named the next generation, and waited to be resumed by a report
    of a later one still (or of a rank replaced in it): it stayed open while the workers
    trained, the job Recovering, its interruption charged on."""
    created = status.created_generation
    gen = status.restart_generation
    return gen if created is None else min(created, gen)


def next_generation(draft: Draft) -> int:
    """The generation new workers of the phase get: never one whose workers were made
    before (a lost status write after a gang restart must not start the old one again)."""
    used = [p.generation for p in draft.phase_pods()]
    gen = draft.status.restart_generation
    return max(gen, max(used) + 1) if gen in used else gen


def latest_attempts(pods: list[PodInfo]) -> list[PodInfo]:
    """Per rank, the newest attempt: a failed worker that was replaced is the record of a
    restart, no longer a worker."""
    newest: dict[int | None, PodInfo] = {}
    for pod in pods:
        best = newest.get(pod.rank)
        if best is None or _attempt(pod) > _attempt(best):
            newest[pod.rank] = pod
    return [p for p in pods if p.rank is None or newest[p.rank] is p]


def _attempt(pod: PodInfo) -> int:
    return label_int(pod, labels.LABEL_ATTEMPT) or 0


def live(pods: list[PodInfo]) -> list[PodInfo]:
    return [p for p in pods if not p.deleting]


def stopping_until(draft: Draft) -> datetime | None:
    """Until when a new generation waits for the job's workers still stopping on its active
    nodes (None: none is). A worker stops from the delete that gave it a grace until it
    ends or is gone; one deleted with no grace (its node is lost) is gone at once, and one
    on a node no longer active holds nothing the new generation needs."""
    active = {n for n, r in draft.roles.items() if r == NodeRole.ACTIVE}
    asked = {a.name: a for a in draft.actions if isinstance(a, DeletePod) and not a.force}
    deletable = {p.name for p in lingering(draft)}
    deadlines: list[datetime] = []
    for pod in draft.pods:
        if pod.node_name not in active or (pod.phase in ENDED and not pod.lingering):
            continue
        if pod.stop_by is not None:
            deadlines.append(pod.stop_by)
        elif pod.lingering and pod.name not in asked:
            # Ended, but its sidecars hold the node until it is deleted (:func:`lingering`):
            # by this pass, or by the next, at once, once this one's status write has put
            # what replaces it on record.
            deadlines.append(shifted(draft.now, DEFAULT_GRACE_S))
            if pod.name not in deletable:
                draft.later(0)
        elif pod.name in asked:  # deleted by this very plan
            grace = asked[pod.name].grace_seconds
            deadlines.append(shifted(draft.now, DEFAULT_GRACE_S if grace is None else grace))
    if not deadlines:
        return None
    return shifted(max(deadlines), STOP_MARGIN_S)


def lingering(draft: Draft) -> list[PodInfo]:
    """The job's workers whose ``worker`` container has ended while a sidecar of the pod (a
    container that is no init container) runs on (:attr:`PodInfo.lingering`), once what
    took over from them is on record: the sidecar would keep the pod, and its node's GPUs,
    forever. A worker is kept while its ending is still what the job is judged by — the
    newest attempt of its rank in the running generation of the current phase (a rank that
    succeeded before its peers, one that failed while the breaker holds the restart) — and
    deleted, stopping its sidecars, once a newer attempt of its rank, a newer generation or
    phase is on record (in the status read or in the workers, never only in the status this
    pass writes: if that write is lost, the ended worker is still there to say what
    happened), or once the job has ended."""
    pods = [p for p in live(list(draft.pods)) if p.lingering]
    if not pods or draft.status.state in TERMINAL:
        return sorted(pods, key=lambda p: p.name)
    names = [p.name for p in draft.spec.phases]
    index, generation = recorded_position(draft.snap.status, draft.pods, names)
    newest: dict[tuple[str, int, int], int] = {}
    for pod in draft.pods:
        key = (pod.phase_name, pod.generation, _rank(pod))
        newest[key] = max(newest.get(key, 0), _attempt(pod))
    out = []
    for pod in pods:
        at = names.index(pod.phase_name) if pod.phase_name in names else -1
        current = (
            at == index
            and pod.generation >= generation
            and _attempt(pod) >= newest[(pod.phase_name, pod.generation, _rank(pod))]
        )
        if not current:
            out.append(pod)
    return sorted(out, key=lambda p: p.name)


def recorded_position(
    status: TrainingJobStatus, pods: Sequence[PodInfo], names: list[str]
) -> tuple[int, int]:
    """The phase index and generation on record: the status's, or the workers' own where
    they are further on (a status write lost after a transition)."""
    seen = [names.index(p.phase_name) for p in pods if p.phase_name in names]
    index = min(max([status.phase_index, *seen]), len(names) - 1)
    generation = status.restart_generation if index == status.phase_index else 0
    generation = max([generation, *(p.generation for p in pods if p.phase_name == names[index])])
    return index, generation


def stop_lingering(draft: Draft) -> None:
    """Delete the workers :func:`lingering` names that no rule of this pass deleted."""
    deleted = draft.deleted_pods()
    for pod in lingering(draft):
        if pod.name not in deleted:
            draft.act(
                DeletePod(pod.name, reason="its worker container ended; its sidecars stopped")
            )


def _rank(pod: PodInfo) -> int:
    return -1 if pod.rank is None else pod.rank


def generation_pods(draft: Draft) -> list[PodInfo]:
    gen = draft.status.restart_generation
    return [p for p in draft.phase_pods() if p.generation == gen]


def phase_complete(draft: Draft) -> bool:
    """The current generation satisfies the phase's completion rule."""
    pods = live(generation_pods(draft))
    if not pods:
        return False
    succeeded = {p.rank for p in pods if p.phase == PodPhase.SUCCEEDED}
    if draft.phase.completion.mode == CompletionMode.RANK_ZERO_SUCCEEDED:
        return 0 in succeeded
    world = world_of(pods, draft.status.world_size, world_limit(draft))
    return world > 0 and all(r in succeeded for r in range(world))


def stop_phase_pods(draft: Draft, reason: str) -> None:
    """Delete the current phase's workers that still run or wait."""
    for pod in live(draft.phase_pods()):
        if pod.phase in (PodPhase.PENDING, PodPhase.RUNNING, PodPhase.UNKNOWN):
            draft.act(DeletePod(name=pod.name, reason=reason))


def close_open_failures(draft: Draft) -> None:
    """Failures and stops still open when a phase or the job ends are closed at that
    instant."""
    interruptions.close(draft)
    stamp = format_time(draft.now)
    for i, entry in enumerate(draft.ledger):
        if entry.resumed is None:
            start = parse_time(entry.detected) or draft.now
            draft.ledger[i] = entry.model_copy(
                update={
                    "resumed": stamp,
                    "interruption_seconds": (draft.now - start).total_seconds(),
                }
            )


def advance(draft: Draft) -> None:
    """Close the current phase and move to the next, or end the job."""
    phase = draft.phase
    if phase.completion.mode == CompletionMode.RANK_ZERO_SUCCEEDED:
        stop_phase_pods(draft, f"rank 0 of phase {phase.name} succeeded")
    # A phase completed before (the phases after it were removed by an edit while the job
    # waited for the next): its record and its announcement stand as they were.
    if draft.record.state != PhaseState.SUCCEEDED or draft.record.end_time is None:
        draft.update_record(
            state=PhaseState.SUCCEEDED,
            end_time=format_time(draft.now),
            nodes=len(draft.held(NodeRole.ACTIVE)),
        )
        draft.event(NORMAL, "PhaseCompleted", f"phase {phase.name} completed")
    close_open_failures(draft)
    draft.condition(ConditionType.SPARES_EXHAUSTED, False, "PhaseCompleted", "")
    if draft.index + 1 >= len(draft.spec.phases):
        draft.set(
            state=JobState.SUCCEEDED,
            completion_time=format_time(draft.now),
            message=(f"all {len(draft.spec.phases)} phases completed"),
        )
        draft.event(NORMAL, "JobSucceeded", f"all {len(draft.spec.phases)} phases completed")
        return
    nxt = draft.spec.phases[draft.index + 1]
    draft.set(
        phase_index=draft.index + 1,
        phase=nxt.name,
        restart_generation=0,
        created_generation=None,
        world_size=0,
    )


def timed_out(draft: Draft) -> bool:
    """The phase ran past ``maxDuration`` (and ask to be woken when it would)."""
    limit = draft.phase.max_duration
    start = parse_time(draft.record.start_time)
    if limit is None or start is None:
        return False
    deadline = shifted(start, parse_duration(limit))
    if deadline <= draft.now:
        return True
    draft.later((deadline - draft.now).total_seconds())
    return False


def fail(draft: Draft, reason: str, message: str) -> None:
    """The job fails: the phase and the job are Failed, the condition and event say why.

    It leaves the line at once (``waiting_for`` cleared): a job failed while it waited for
    capacity (``admission.onTimeout: Fail``) published its need in the same pass, and the
    jobs behind it kept free nodes for it until a later pass settled it."""
    draft.update_record(state=PhaseState.FAILED, end_time=format_time(draft.now))
    close_open_failures(draft)
    draft.set(
        state=JobState.FAILED,
        completion_time=format_time(draft.now),
        message=message,
        waiting_for={},
    )
    draft.condition(ConditionType.FAILED, True, reason, message, WARNING, event_reason=reason)


def settle(draft: Draft) -> bool:
    """A finished job stops its workers and gives back every active and spare node.

    Quarantined nodes stay quarantined (see :mod:`phased.core.decide`). Returns whether the
    job already holds nothing (``Plan.finished``).
    """
    for pod in live(list(draft.snap.pods)):
        if pod.phase in (PodPhase.PENDING, PodPhase.RUNNING, PodPhase.UNKNOWN):
            draft.act(DeletePod(name=pod.name, reason=f"job {draft.status.state.value}"))
    held = draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE)
    for node in held:
        draft.act(ReleaseNode(node=node.name))
        draft.roles.pop(node.name, None)
    draft.set(waiting_for={}, suspects=[])
    return not held
