"""Only a job that could claim keeps free nodes for itself in line: a waiting job whose spec
became invalid, or that is being deleted, stops publishing its need, so the jobs behind it
start; mended, it publishes again at the place its priority and age give it."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo, Plan
from phased.core.settings import Settings, WorkerPolicy
from tests.core.builders import SETTINGS, T0, at, nodes, of_type, owned, phase, snapshot, spec

AHEAD = JobRef(namespace="ml", name="big", uid="uid-big", created=T0 - timedelta(days=2))
BEHIND = JobRef(namespace="ml", name="small", uid="uid-small", created=T0 - timedelta(days=1))
RUNNING = JobRef(namespace="ml", name="other", uid="uid-other", created=T0 - timedelta(days=3))
BIG = spec(phase("train", 8, 8))
SMALL = spec(phase("train", 2, 2))


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


def _small(status_of_big: TrainingJobStatus, when: float) -> Plan:
    snap = snapshot(SMALL, _cluster(), job=BEHIND, waiting=_line(status_of_big))
    return decide(snap, SETTINGS, at(when))


def test_the_big_job_waiting_keeps_the_free_nodes_from_the_small_one():
    big = decide(snapshot(BIG, _cluster(), job=AHEAD), SETTINGS, T0)
    assert big.status.state == JobState.WAITING and big.status.waiting_for == {"H100": 8}
    small = _small(big.status, 1)
    assert of_type(small, ClaimNode) == [] and small.status.state == JobState.WAITING


def test_a_waiting_job_whose_spec_became_invalid_keeps_nothing_waiting_for_it():
    waiting = decide(snapshot(BIG, _cluster(), job=AHEAD), SETTINGS, T0)
    # A person edits the spec into one that does not parse: the big job cannot claim.
    invalid = decide(
        snapshot(None, _cluster(), job=AHEAD, status=waiting.status, spec_error="bad spec"),
        SETTINGS,
        at(10),
    )
    assert invalid.status.state == JobState.INVALID
    assert invalid.status.waiting_for == {}
    small = _small(invalid.status, 20)
    assert len(of_type(small, ClaimNode)) == 2


def test_a_waiting_job_whose_spec_the_operator_refuses_keeps_nothing_waiting_for_it():
    waiting = decide(snapshot(BIG, _cluster(), job=AHEAD), SETTINGS, T0)
    # The operator's settings allow only images of another registry.
    picky = Settings(workers=WorkerPolicy(allowed_image_prefixes=["corp.example/"]))
    invalid = decide(snapshot(BIG, _cluster(), job=AHEAD, status=waiting.status), picky, at(10))
    assert invalid.status.state == JobState.INVALID
    assert invalid.status.waiting_for == {}


def test_mended_it_publishes_again_and_is_ahead_of_the_younger_job_as_before():
    waiting = decide(snapshot(BIG, _cluster(), job=AHEAD), SETTINGS, T0)
    invalid = decide(
        snapshot(None, _cluster(), job=AHEAD, status=waiting.status, spec_error="bad spec"),
        SETTINGS,
        at(10),
    )
    mended = decide(snapshot(BIG, _cluster(), job=AHEAD, status=invalid.status), SETTINGS, at(20))
    assert mended.status.state == JobState.WAITING
    assert mended.status.waiting_for == {"H100": 8}
    assert of_type(_small(mended.status, 30), ClaimNode) == []


def test_a_waiting_job_being_deleted_keeps_nothing_waiting_for_it():
    waiting = decide(snapshot(BIG, _cluster(), job=AHEAD), SETTINGS, T0)
    gone = replace(AHEAD, deleting=True)
    deleting = decide(snapshot(BIG, _cluster(), job=gone, status=waiting.status), SETTINGS, at(10))
    assert deleting.status.waiting_for == {}
    assert len(of_type(_small(deleting.status, 20), ClaimNode)) == 2
