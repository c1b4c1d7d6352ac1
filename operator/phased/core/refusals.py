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
"""

from __future__ import annotations

from datetime import datetime

from phased.api.v1alpha1 import JobState, TrainingJobStatus
from phased.core.conditions import ConditionType, find, set_condition
from phased.core.draft import WARNING
from phased.core.model import EmitEvent

REASON = "WorkersRefused"
_MESSAGE_LIMIT = 600


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
    update: dict[str, object] = {"conditions": list(change.conditions), "waiting_for": {}}
    if status.state not in (JobState.SUCCEEDED, JobState.FAILED):
        update["message"] = message
    if status.state == JobState.RUNNING:
        update["state"] = JobState.PENDING  # not all of its workers exist
    news = change.flipped or before is None or before.message != why
    event = EmitEvent(type=WARNING, reason=REASON, message=message) if news else None
    return status.model_copy(update=update), event
