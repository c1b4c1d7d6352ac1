"""A node that became active is cleared of its guests: those that came after the claim and
those of a preemptible class, through the Eviction API until the deadline, then by deletion;
never a pod that was there before the claim, the operator's own pod, a DaemonSet's or the
job's own workers."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.decide import decide
from phased.core.guests import RETRY_SECONDS
from phased.core.model import EvictPod, FinishClearing, NodeInfo, NodePod
from phased.core.occupancy import guests
from phased.core.settings import Settings
from phased.core.times import format_time
from phased.kube.convert import node_pod_from_raw
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    events,
    node,
    node_pod,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)

CLAIMED = T0 - timedelta(hours=2)
PROMOTED = T0 - timedelta(seconds=10)  # clearing-since: the spare became active 10 s ago
SPEC = spec(phase("train", 2, 2), spares=1)


def _clearing(n: NodeInfo, since: datetime | None = PROMOTED) -> NodeInfo:
    notes = {labels.ANNOTATION_CLAIMED_AT: format_time(CLAIMED)}
    if since is not None:
        notes[labels.ANNOTATION_CLEARING] = format_time(since)
    return replace(n, annotations={**n.annotations, **notes})


def _running(guests: tuple[NodePod, ...], settings: Settings = SETTINGS, now: datetime = T0):
    """A running job whose node "p" was just promoted from spare and carries guests."""
    active = [owned(node("a"), NodeRole.ACTIVE), _clearing(owned(node("p"), NodeRole.ACTIVE))]
    spare = owned(node("s"), NodeRole.SPARE)
    workers = [
        pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=n.name)
        for i, n in enumerate(active)
    ]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        pool={"active": ["a", "p"], "spares": ["s"]},
    )
    snap = snapshot(SPEC, [*active, spare], workers, status=status, node_pods={"p": guests})
    return decide(snap, settings, now)


AFTER = CLAIMED + timedelta(minutes=5)
BEFORE = CLAIMED - timedelta(minutes=5)


def test_guests_that_came_after_the_claim_are_evicted_and_nothing_else() -> None:
    guests = (
        node_pod("borrower", "p", created=AFTER),
        node_pod("there-first", "p", created=BEFORE),
        node_pod("agent", "p", created=AFTER, daemon=True),
        node_pod("static", "p", created=AFTER, mirror=True),
        node_pod("phased-0", "p", namespace="phased", created=AFTER, operator=True),
        node_pod("done", "p", created=AFTER, terminal=True),
        node_pod("leaving", "p", created=AFTER, deleting=True),
        node_pod("llm-train-g0-1", "p", namespace=JOB.namespace, created=AFTER, controller=JOB.uid),
    )
    plan = _running(guests)
    assert of_type(plan, EvictPod) == [EvictPod("tenant", "borrower", "p", delete=False)]
    assert of_type(plan, FinishClearing) == []
    assert "GuestsEvicted" in events(plan)
    assert "GuestsLeftAlone" in events(plan)  # there-first is reported, not touched
    assert plan.requeue_after is not None and plan.requeue_after <= RETRY_SECONDS


def test_a_guest_created_in_the_claims_own_second_is_evicted() -> None:
    """creationTimestamp has whole seconds: a pod that came 0.2 s after a claim written at
    .700 reads as created at .000, before it. It is a guest all the same."""
    claimed = CLAIMED + timedelta(milliseconds=700)
    found = guests((node_pod("borrower", "p", created=CLAIMED),), JOB, claimed, SETTINGS)
    assert [g.name for g in found.evict] == ["borrower"] and not found.stay


def test_a_pod_forging_the_jobs_uid_in_another_namespace_is_still_a_guest() -> None:
    forged = node_pod("squatter", "p", namespace="tenant", created=AFTER, controller=JOB.uid)
    plan = _running((forged,))
    assert [e.name for e in of_type(plan, EvictPod)] == ["squatter"]


def test_a_copy_of_a_worker_in_the_jobs_namespace_that_the_job_did_not_make_is_a_guest() -> None:
    """It carries the job's labels (its manifest copied to debug a worker) but the job is not
    its controller: no worker, so it leaves like any pod that came after the claim."""
    raw = {
        "metadata": {
            "namespace": JOB.namespace,
            "name": "llm-train-g0-1-copy",
            "creationTimestamp": format_time(AFTER),
            "labels": {labels.LABEL_JOB_UID: JOB.uid, labels.LABEL_RANK: "1"},
        },
        "spec": {"nodeName": "p"},
        "status": {"phase": "Running"},
    }
    plan = _running((node_pod_from_raw(raw),))
    assert [e.name for e in of_type(plan, EvictPod)] == ["llm-train-g0-1-copy"]


def test_a_guest_of_a_preemptible_class_leaves_even_if_it_was_there_first() -> None:
    classes = Settings(preemptible_priority_classes=["best-effort"])
    old = node_pod("batch", "p", created=BEFORE, priority_class="best-effort")
    plan = _running((old,), classes)
    assert [e.name for e in of_type(plan, EvictPod)] == ["batch"]
    assert "GuestsLeftAlone" not in events(plan)


def test_past_the_deadline_guests_are_deleted_with_their_grace_period() -> None:
    """A PodDisruptionBudget may hold an eviction; the training is down meanwhile, so after
    guestEvictionTimeout the guest is deleted (its own grace period, not forced)."""
    guest = (node_pod("borrower", "p", created=AFTER),)
    before = _running(guest, now=PROMOTED + timedelta(seconds=59))
    assert of_type(before, EvictPod) == [EvictPod("tenant", "borrower", "p", delete=False)]
    late = _running(guest, now=PROMOTED + timedelta(seconds=60))
    assert of_type(late, EvictPod) == [EvictPod("tenant", "borrower", "p", delete=True)]
    assert "GuestsDeleted" in events(late)


def test_the_deadline_follows_the_setting() -> None:
    patient = Settings(guest_eviction_timeout="5m")
    guest = (node_pod("borrower", "p", created=AFTER),)
    plan = _running(guest, patient, now=PROMOTED + timedelta(minutes=4))
    assert of_type(plan, EvictPod) == [EvictPod("tenant", "borrower", "p", delete=False)]


def test_with_no_guest_left_the_node_is_no_longer_being_cleared() -> None:
    plan = _running((node_pod("agent", "p", created=AFTER, daemon=True),))
    assert of_type(plan, EvictPod) == []
    assert of_type(plan, FinishClearing) == [FinishClearing("p")]


def test_a_node_whose_pods_were_not_looked_at_waits_for_the_next_pass() -> None:
    active = [owned(node("a"), NodeRole.ACTIVE), _clearing(owned(node("p"), NodeRole.ACTIVE))]
    snap = snapshot(SPEC, active, node_pods={})
    plan = decide(snap, SETTINGS, T0)
    assert of_type(plan, EvictPod) == [] and of_type(plan, FinishClearing) == []


def test_without_a_claim_time_only_preemptible_pods_are_guests() -> None:
    """Nothing proves which pods came after the claim: every other pod is left alone."""
    classes = Settings(preemptible_priority_classes=["best-effort"])
    active = [owned(node("a"), NodeRole.ACTIVE), owned(node("p"), NodeRole.ACTIVE)]
    p = replace(active[1], annotations={labels.ANNOTATION_CLEARING: format_time(PROMOTED)})
    pods = (
        node_pod("batch", "p", created=AFTER, priority_class="best-effort"),
        node_pod("web", "p", created=AFTER),
    )
    plan = decide(snapshot(SPEC, [active[0], p], node_pods={"p": pods}), classes, T0)
    assert [e.name for e in of_type(plan, EvictPod)] == ["batch"]
    assert "GuestsLeftAlone" in events(plan)


def test_a_held_node_that_is_no_longer_active_stops_being_cleared() -> None:
    spare = _clearing(owned(node("s"), NodeRole.SPARE))
    active = [owned(node("a"), NodeRole.ACTIVE), owned(node("b"), NodeRole.ACTIVE)]
    plan = decide(snapshot(SPEC, [*active, spare]), SETTINGS, T0)
    assert FinishClearing("s") in of_type(plan, FinishClearing)
    assert of_type(plan, EvictPod) == []
