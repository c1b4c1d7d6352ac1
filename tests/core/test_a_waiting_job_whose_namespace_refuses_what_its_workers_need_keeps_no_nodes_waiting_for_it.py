"""A job waiting in line whose namespace refuses what its workers need (the report Secret or
the checkpoint claim, made before any claim: a ResourceQuota, RBAC, a webhook) cannot claim:
every pass stops at the refused create, before its claims. So its ``WorkersRefused`` status
leaves the line (``waitingFor`` cleared) and the jobs behind it start on the free nodes. Before,
the status as it was kept its need published, and the jobs behind kept free nodes idle for
a job that could not take them for as long as the refusal lasted. Mended, it publishes again
at the place its priority and age give it."""

from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core import refusals
from phased.core.conditions import ConditionType, find
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, EnsureClaim, JobRef, NodeInfo, Plan
from tests.core.builders import SETTINGS, T0, at, nodes, of_type, owned, phase, snapshot, spec

AHEAD = JobRef(namespace="ml", name="big", uid="uid-big", created=T0 - timedelta(days=2))
BEHIND = JobRef(namespace="ml", name="small", uid="uid-small", created=T0 - timedelta(days=1))
RUNNING = JobRef(namespace="ml", name="other", uid="uid-other", created=T0 - timedelta(days=3))
BIG = spec(phase("train", 8, 8), checkpoint={"volume": {"size": "1Ti"}})
SMALL = spec(phase("train", 2, 2))
QUOTA = (
    'persistentvolumeclaims "big-checkpoints" is forbidden: exceeded quota: ml-quota, '
    "limited: requests.storage=500Gi"
)


def _cluster() -> list[NodeInfo]:
    """Six H100 nodes held by a running job, four free: the big job (8) waits, and the
    small one (2) fits beside it only if no one keeps the free nodes."""
    busy = [owned(n, NodeRole.ACTIVE, RUNNING) for n in nodes("b", 6)]
    return [*busy, *nodes("h", 4)]


def _line(status: TrainingJobStatus) -> tuple[Claimant, ...]:
    """What the reconciler hands the other jobs: the big job's published need, if any."""
    if not status.waiting_for:
        return ()
    return (Claimant(AHEAD.uid, 0, AHEAD.created, dict(status.waiting_for)),)


def _big(status: TrainingJobStatus | None, when: float, claim: bool) -> Plan:
    snap = snapshot(BIG, _cluster(), job=AHEAD, status=status, claim_exists=claim)
    return decide(snap, SETTINGS, at(when))


def _small(status_of_big: TrainingJobStatus, when: float) -> Plan:
    snap = snapshot(SMALL, _cluster(), job=BEHIND, waiting=_line(status_of_big))
    return decide(snap, SETTINGS, at(when))


def _waiting() -> TrainingJobStatus:
    waiting = _big(None, 0, claim=True)
    assert waiting.status.state == JobState.WAITING and waiting.status.waiting_for == {"H100": 8}
    assert of_type(_small(waiting.status, 1), ClaimNode) == []
    return waiting.status


def test_its_refused_status_leaves_the_line_and_the_job_behind_starts():
    # Its checkpoint claim is gone (deleted, or checkpoint.volume.size set while it waited):
    # the pass ensures it first, before anything else, and the namespace's quota refuses it.
    plan = _big(_waiting(), 10, claim=False)
    assert isinstance(plan.actions[0], EnsureClaim)
    refused, _ = refusals.refused(_waiting(), QUOTA, at(10), 1)
    cond = find(refused.conditions, ConditionType.WORKERS_REFUSED)
    assert cond is not None and cond.status == "True"
    assert refused.waiting_for == {}
    assert len(of_type(_small(refused, 20), ClaimNode)) == 2


def test_mended_it_publishes_again_and_is_ahead_of_the_younger_job_as_before():
    refused, _ = refusals.refused(_waiting(), QUOTA, at(10), 1)
    mended = _big(refused, 30, claim=True)
    assert mended.status.state == JobState.WAITING
    assert mended.status.waiting_for == {"H100": 8}
    assert of_type(_small(mended.status, 40), ClaimNode) == []


def test_a_job_holding_its_pool_refused_its_workers_keeps_its_pool():
    status = TrainingJobStatus(state=JobState.PENDING, message="phase train starting")
    refused, _ = refusals.refused(status, QUOTA, T0, 1)
    assert refused.waiting_for == {} and refused.state == JobState.PENDING
