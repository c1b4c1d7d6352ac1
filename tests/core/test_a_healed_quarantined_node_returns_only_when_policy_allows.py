from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import ReleaseNode, Taint, UnquarantineNode
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    at,
    landed,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)


def _snap(policy, healthy_since, spares=1):
    q = with_ready(owned(node("q0"), NodeRole.QUARANTINED), True, healthy_since)
    q = replace(  # as a quarantine leaves it: cordoned, tainted, with its note
        q,
        unschedulable=True,
        taints=(*q.taints, Taint(labels.TAINT_QUARANTINE, JOB.uid)),
        annotations={labels.ANNOTATION_QUARANTINE: "{}"},
    )
    held = [owned(node("a0"), NodeRole.ACTIVE), q]
    the_spec = spec(
        phase("train", 1, 1),
        spares=spares,
        failurePolicy={"nodeReturn": policy, "healthyBeforeReturn": "10m"},
    )
    pods = [pod("llm-train-g0-0", "train", 0, node_name="a0")]
    status = TrainingJobStatus(phase="train", state=JobState.RUNNING, world_size=1)
    return snapshot(the_spec, held, pods, status, service_exists=True)


def test_quarantine_policy_keeps_the_node_until_a_person_acts():
    plan = decide(_snap("Quarantine", at(-3600)), SETTINGS, T0)
    assert of_type(plan, UnquarantineNode) == [] and of_type(plan, ReleaseNode) == []


def test_return_to_spares_waits_for_steady_health():
    plan = decide(_snap("ReturnToSpares", at(-60)), SETTINGS, T0)
    assert of_type(plan, UnquarantineNode) == [] and plan.requeue_after == 540


def test_return_to_spares_fills_a_short_spare_pool():
    plan = decide(_snap("ReturnToSpares", at(-600)), SETTINGS, T0)
    assert [u.node for u in of_type(plan, UnquarantineNode)] == ["q0"]


def test_a_healed_node_nobody_needs_is_released_to_the_cluster_whole():
    """Not only the job's labels: a release alone keeps a quarantined node's cordon, role and
    note for a person (as the operator's release does), so it would never be used again."""
    snap = _snap("ReturnToSpares", at(-600), spares=0)
    plan = decide(snap, SETTINGS, T0)
    assert [r.node for r in of_type(plan, ReleaseNode)] == ["q0"]
    after = landed(snap, plan).nodes["q0"]
    assert not after.unschedulable
    assert not [k for k in after.labels if k.startswith(labels.PREFIX)]
    assert not [t for t in after.taints if t.key.startswith(labels.PREFIX)]
    assert not after.annotations
