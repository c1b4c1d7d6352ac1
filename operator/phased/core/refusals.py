"""Workers the API server refuses to create: said on the job, retried until admitted.

A worker create — or the create of what the workers need in the job's namespace: their
Service, the report Secret, the checkpoint claim — can be refused by what guards the
namespace rather than by the spec: a ResourceQuota it would exceed, Pod Security Admission's
level for the namespace, RBAC, an admission webhook. Only the namespace's owner can mend
those (a larger quota, another level), and a quota frees as other pods end, so the job is
not held as ``Invalid`` (that is for refusals only a new spec can mend: 422). The pass that
was refused stops where it was, as at any failed action, and its plan's status is not
written (it would say workers run that do not).
Instead the status as it was is written with ``WorkersRefused`` True and the API server's
message, the job's message says it, and a Warning event says it once per refusal (again only
when the message changes). The reconciler tries again with its backoff (up to 30 s); the
first pass whose creates all land turns the condition False (``Created``).

A job waiting in line so refused cannot claim: the checkpoint claim and the report Secret
are made before any node is claimed, and the pass stops at their refusal. Its status leaves
the line (``waitingFor`` cleared), so the jobs behind it take the free nodes they kept for it;
once mended, its next pass publishes its need again, at the place its priority and age give
it (before, the status as it was kept its need published for as long as the refusal lasted).

A refusal that lasts gives the pool back (:func:`give_back_refused`): once ``WorkersRefused``
has been True for ``failurePolicy.pendingGrace`` while no worker of the running generation
trains (none Running with all its peers: every create refused, or the ones that landed
waiting for peers that were not), the job stops those workers, releases its active nodes and
spares, and waits out of line for ``pendingGrace`` (``WorkersRefused`` False, reason
``PoolReturned``, with one Warning event ``PoolReturned``); then it forms its pool again and
tries once more. Before, a job whose namespace refused its workers (a quota spent, a
webhook denying them) held its nodes idle for as long as the refusal lasted, however long.
Each give-back in a row doubles the wait, to at most eight ``pendingGrace``
(:func:`returned_wait`; ``status.poolReturns`` counts them, 0 again once the creates land):
before, the wait was ``pendingGrace`` every time, and a namespace refusing for days made the
job claim, hold idle and give back nodes from the line every other ``pendingGrace``.
Everything it needs is in the status: the condition's transition is when the refusal began,
and then when the pool was given back (``poolReturns``: for how long). The return is
written before the nodes go: the give-back's pass stops the workers and writes it with the
pool still listed, and the next pass, at once, releases the pool (as it releases whatever a
pass killed mid-way left held). Before, the nodes went first, and a pass killed before its
status write left nothing saying the pool had been given back: formed again at once, the
return uncounted and not waited out.

The workers that did get created meanwhile may fail at the rendezvous timeout, waiting for the
ranks refused: such a restart is counted, but not to ``restartBudget`` — it is the namespace's
refusal, not the code's (``phased.core.recovery._refused_peers``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.conditions import ConditionType, find, set_condition
from phased.core.draft import WARNING, Draft
from phased.core.model import DeletePod, EmitEvent, PodPhase, ReleaseNode
from phased.core.phases import ENDED, generation_pods, live, world_of
from phased.core.times import format_time, parse_time

REASON = "WorkersRefused"
RETURNED = "PoolReturned"  # WorkersRefused's reason while the job waits to try again
_MESSAGE_LIMIT = 600
_MOST_GRACES = 8  # the longest wait after a give-back, in pendingGraces


def refused(
    status: TrainingJobStatus, why: str, now: datetime, generation: int
) -> tuple[TrainingJobStatus, EmitEvent | None]:
    """``status`` (as last written) once the API server refused a worker for ``why``; and
    the Warning event to post, if this refusal is news."""
    why = why[:_MESSAGE_LIMIT]
    message = f"the API server refuses the job's workers: {why}"
    before = find(status.conditions, ConditionType.WORKERS_REFUSED)
    change = set_condition(
        status.conditions, ConditionType.WORKERS_REFUSED, True, "Refused", why, now, generation
    )
    # A job in line cannot claim while refused (the claim and Secret are made before any
    # claim, and the pass stops there): it leaves the line, as an invalid one does.
    update: dict[str, object] = {
        "conditions": list(change.conditions),
        "waiting_for": {},
        "spares_wanted": {},
    }
    if status.state not in (JobState.SUCCEEDED, JobState.FAILED):
        update["message"] = message
    if status.state == JobState.RUNNING:
        update["state"] = JobState.PENDING  # not all of its workers exist
    news = change.flipped or before is None or before.message != why
    event = EmitEvent(type=WARNING, reason=REASON, message=message) if news else None
    return status.model_copy(update=update), event


def give_back_refused(draft: Draft) -> bool:
    """A refusal that lasted ``pendingGrace`` gives the pool back, and the job waits as long
    before it tries again (module docstring). True while it waits: the pool is not formed."""
    if draft.breaker_nodes or draft.status.state in (JobState.SUCCEEDED, JobState.FAILED):
        return False
    cond = find(draft.conditions, ConditionType.WORKERS_REFUSED)
    since = parse_time(cond.last_transition_time) if cond is not None else None
    if cond is None or since is None:
        return False
    grace = parse_duration(draft.spec.failure_policy.pending_grace)
    elapsed = (draft.now - since).total_seconds()
    left = grace - elapsed
    if cond.status == "False" and cond.reason == RETURNED:
        out = returned_wait(grace, draft.status.pool_returns) - elapsed
        if out <= 0:
            return False  # tried again: the pool is formed as for any waiting job
        _release_pool(draft)  # a pass killed while giving it back, or a node come back
        _wait(draft, out)
        return True
    if cond.status != "True" or left > 0 or _training(draft) or not _pool(draft):
        if cond.status == "True" and left > 0:
            draft.later(left)
        return False
    # The return is written before the nodes go: this pass stops the workers and writes it,
    # the next (at once) releases the pool in the branch above. Released first, a pass cut
    # before its status write left nothing in the cluster saying the pool had been given
    # back: the next pass formed it again at once, the return uncounted and not waited out.
    held = len(_pool(draft))
    stopped = _stop_workers(draft)
    returns = draft.status.pool_returns + 1
    wait = returned_wait(grace, returns)
    draft.set(pool_returns=returns)
    again = format_time(draft.now + timedelta(seconds=wait))
    message = (
        f"the API server refused the job's workers for {draft.spec.failure_policy.pending_grace}"
        f" ({cond.message}): its {held} node(s) are given back"
        + (f", the {stopped} worker(s) it could create stopped" if stopped else "")
        + f"; it tries again at {again}"
    )
    draft.condition(ConditionType.WORKERS_REFUSED, False, RETURNED, message)
    draft.event(WARNING, RETURNED, message)
    _wait(draft, wait)
    draft.later(0)  # the pass that releases the pool
    return True


def returned_wait(grace: float, returns: int) -> float:
    """How long a job waits out of line after its pool was given back for the ``returns``-th
    time in a row (``status.poolReturns``): ``pendingGrace``, doubling with each give-back
    to at most ``_MOST_GRACES`` times it, so a namespace refusing for days does not make the
    job claim nodes from the line, fail and give them back every ``pendingGrace``."""
    return grace * min(1 << min(max(returns - 1, 0), _MOST_GRACES), _MOST_GRACES)


def returned_message(draft: Draft) -> str | None:
    """The message of a job waiting to try again after its pool was given back (None once
    the wait is over: it then waits, if it must, as any job does)."""
    cond = find(draft.conditions, ConditionType.WORKERS_REFUSED)
    if cond is None or cond.status != "False" or cond.reason != RETURNED:
        return None
    since = parse_time(cond.last_transition_time)
    grace = parse_duration(draft.spec.failure_policy.pending_grace)
    wait = returned_wait(grace, draft.status.pool_returns)
    if since is None or (draft.now - since).total_seconds() >= wait:
        return None
    return cond.message


def _pool(draft: Draft) -> list[str]:
    return [n for n, r in draft.roles.items() if r in (NodeRole.ACTIVE, NodeRole.SPARE)]


def _training(draft: Draft) -> bool:
    """The running generation trains: every rank's worker exists, and one runs or is done."""
    pods = live(generation_pods(draft))
    world = world_of(pods, draft.status.world_size, draft.phase.nodes.max)
    ranks = {p.rank for p in pods}
    whole = world > 0 and all(r in ranks for r in range(world))
    return whole and any(p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED) for p in pods)


def _stop_workers(draft: Draft) -> int:
    """The workers that did get created wait for peers that never will be: stopped. Their
    generation is not made again (the next workers are a new one); nothing trained, so no
    restart is counted."""
    pods = [p for p in live(generation_pods(draft)) if p.phase not in ENDED]
    grace = parse_duration(draft.spec.failure_policy.survivor_grace_period)
    for pod in pods:
        draft.act(
            DeletePod(pod.name, reason="workers refused: pool given back", grace_seconds=grace)
        )
    if generation_pods(draft):
        draft.set(restart_generation=draft.status.restart_generation + 1)
    return len(pods)


def _release_pool(draft: Draft) -> None:
    for name in sorted(_pool(draft)):
        draft.act(ReleaseNode(node=name))
        draft.roles.pop(name, None)


def _wait(draft: Draft, seconds: float) -> None:
    draft.waiting = True
    draft.set(waiting_for={})  # it takes no node meanwhile: it keeps none idle in line
    draft.later(seconds)
