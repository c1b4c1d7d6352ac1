"""A quarantined node goes back (``ReturnToSpares``) once healthy for ``healthyBeforeReturn``.
Its conditions date the recovery when one turned after its quarantine (Ready again, a fault
condition set False). Nothing dates GPUs back in allocatable, a fault condition removed
rather than set False, or a node that stayed Ready all along: then the first pass that found
it healthy stands for it, remembered in ``status.healed``, and a pass that finds it unhealthy
again forgets it. Before, such a node was said healthy since its Ready transition, long
before its quarantine, and went back at once: a node whose GPUs fell off the bus was a spare
again the moment the device plugin counted them back. A transition after the quarantine
dates nothing either when a pass after it did not find the node healthy (Ready again while
its GPUs were still missing): that pass saw the node unhealthy, so its recovery came later."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from phased.api.v1alpha1 import Accounting, Healed, JobState, NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import NodeCondition, NodeInfo, Plan, Taint, UnquarantineNode
from phased.core.quarantine import QuarantineNote, encode_quarantine
from phased.core.times import format_time
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    at,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)

QUARANTINED_AT = at(-1200)


def _quarantined(ready_since: datetime, **changes: object) -> NodeInfo:
    """q0 as a GPU drop's quarantine left it 20 minutes ago (cordoned, tainted, noted)."""
    note = QuarantineNote.for_action(
        JOB.uid, "GPUCapacityDropped", "gpus gone", QUARANTINED_AT, QUARANTINED_AT
    )
    q = with_ready(owned(node("q0"), NodeRole.QUARANTINED), True, ready_since)
    return replace(
        q,
        unschedulable=True,
        taints=(*q.taints, Taint(labels.TAINT_QUARANTINE, JOB.uid)),
        annotations={labels.ANNOTATION_QUARANTINE: encode_quarantine(note)},
        **changes,  # type: ignore[arg-type]
    )


def _decide(q: NodeInfo, healed: list[Healed] | None = None, last: datetime | None = None) -> Plan:
    """One pass over q0; ``last``: when the pass before it ran (``accountedAt``)."""
    the_spec = spec(
        phase("train", 1, 1),
        spares=1,
        failurePolicy={"nodeReturn": "ReturnToSpares", "healthyBeforeReturn": "10m"},
    )
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=1,
        healed=healed or [],
        accounting=Accounting(accounted_at=format_time(last) if last else None),
    )
    held = [owned(node("a0"), NodeRole.ACTIVE), q]
    pods = [pod("llm-train-g0-0", "train", 0, node_name="a0")]
    return decide(snapshot(the_spec, held, pods, status, service_exists=True), SETTINGS, T0)


def test_gpus_back_with_nothing_to_date_it_wait_from_the_first_pass_that_saw_them() -> None:
    # Ready for two hours, all along: its GPUs came back, which no condition dates.
    plan = _decide(_quarantined(at(-7200)))
    assert of_type(plan, UnquarantineNode) == []
    assert plan.status.healed == [Healed(node="q0", since=format_time(T0))]
    assert plan.requeue_after == 600


def test_once_healthy_that_long_since_a_pass_saw_it_it_goes_back() -> None:
    plan = _decide(_quarantined(at(-7200)), [Healed(node="q0", since=format_time(at(-600)))])
    assert [u.node for u in of_type(plan, UnquarantineNode)] == ["q0"]
    assert plan.status.healed == []  # a spare again: nothing left to remember


def test_a_pass_that_finds_it_unhealthy_again_forgets_it() -> None:
    short = _quarantined(at(-7200), allocatable={"cpu": 96, "nvidia.com/gpu": 4})
    plan = _decide(short, [Healed(node="q0", since=format_time(at(-600)))])
    assert of_type(plan, UnquarantineNode) == []
    assert plan.status.healed == []


def test_a_fault_condition_removed_rather_than_set_false_dates_nothing_either() -> None:
    # Its GPU fault condition turned True after the Ready transition, and was then removed.
    q = _quarantined(at(-7200))
    assert q.condition("GPUXidError") is None
    plan = _decide(q)
    assert of_type(plan, UnquarantineNode) == []
    assert plan.requeue_after == 600


def test_a_recovery_a_condition_dates_after_the_quarantine_counts_from_that_date() -> None:
    # Ready again 10 minutes ago, after its quarantine: back at once, as before.
    plan = _decide(_quarantined(at(-600)))
    assert [u.node for u in of_type(plan, UnquarantineNode)] == ["q0"]
    fault = NodeCondition("GPUXidError", "False", at(-600))
    plan = _decide(_quarantined(at(-7200), conditions=(*_quarantined(at(-7200)).conditions, fault)))
    assert [u.node for u in of_type(plan, UnquarantineNode)] == ["q0"]


def test_a_transition_a_pass_saw_that_did_not_find_it_healthy_dates_nothing() -> None:
    """Ready again 15 minutes ago, after its quarantine (its kubelet restarted), while its
    GPUs were still missing: the pass a minute ago did not find it healthy. Its GPUs are
    back now, and it waits ``healthyBeforeReturn`` from now, not from that transition."""
    plan = _decide(_quarantined(at(-900)), last=at(-60))
    assert of_type(plan, UnquarantineNode) == []
    assert plan.status.healed == [Healed(node="q0", since=format_time(T0))]
    assert plan.requeue_after == 600


def test_a_transition_after_the_last_pass_still_dates_the_recovery() -> None:
    # Ready again 10 minutes ago; the pass before this one ran 15 minutes ago (the operator
    # was down): nothing saw it unhealthy since, and it goes back at once.
    plan = _decide(_quarantined(at(-600)), last=at(-900))
    assert [u.node for u in of_type(plan, UnquarantineNode)] == ["q0"]
