from phased.api.v1alpha1 import Accounting, FailureRecord, JobState, NodeRole, TrainingJobStatus
from phased.core.accounting import interruption
from phased.core.decide import decide
from phased.core.model import PodPhase
from phased.core.times import format_time
from tests.core.builders import SETTINGS, T0, at, node, owned, phase, pod, snapshot, spec


def _snap(status):
    held = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(2)] + [
        owned(node("s0"), NodeRole.SPARE)
    ]
    pods = [
        pod("llm-train-g0-0", "train", 0, world=2, node_name="a0"),
        pod("llm-train-g0-1", "train", 1, world=2, node_name="a1", state=PodPhase.PENDING),
    ]
    the_spec = spec(phase("train", 2, 2, expectedDuration="10h"), spares=1)
    return snapshot(the_spec, held, pods, status, service_exists=True)


def test_the_first_call_only_starts_the_clock():
    plan = decide(_snap(TrainingJobStatus(phase="train", world_size=2)), SETTINGS, T0)
    assert plan.status.accounting.accounted_at == "2026-03-01T12:00:00Z"
    assert plan.status.accounting.gpu_hours == 0


def test_an_hour_is_charged_to_the_phase_and_the_job():
    status = TrainingJobStatus(
        phase="train",
        world_size=2,
        state=JobState.RUNNING,
        accounting=Accounting(accounted_at=format_time(T0)),
    )
    plan = decide(_snap(status), SETTINGS, at(3600))
    acc = plan.status.accounting
    assert (acc.active_gpu_hours, acc.spare_gpu_hours, acc.busy_gpu_hours) == (16, 8, 8)
    assert acc.cost == 24 * 2.5
    assert plan.status.phases[0].gpu_hours == 24 and plan.status.phases[0].cost == 60
    assert plan.status.utilization.allocation == 33.33 and plan.status.utilization.active == 50
    assert plan.status.utilization.current == 33.33 and plan.status.utilization_percent == 33.33
    assert acc.estimated_remaining_cost == 3 * 8 * 10 * 2.5


def test_waiting_time_accumulates_on_the_phase():
    status = TrainingJobStatus(
        phase="train", state=JobState.WAITING, accounting=Accounting(accounted_at=format_time(T0))
    )
    plan = decide(snapshot(spec(phase("train", 4, 4)), [], status=status), SETTINGS, at(120))
    assert plan.status.phases[0].waiting_seconds == 120


def _entry(i, start, end):
    return FailureRecord(
        id=i,
        node=f"n{i}",
        reason="NodeNotReady",
        detected=format_time(at(start)),
        resumed=format_time(at(end)) if end is not None else None,
    )


def test_overlapping_interruptions_are_merged():
    ledger = [_entry(1, 0, 100), _entry(2, 50, 150), _entry(3, 400, 430)]
    spent = interruption(ledger, "2h", at(1000))
    assert spent.used_seconds == 180 and spent.used == "3m" and spent.open_since is None


def test_an_open_interruption_runs_to_now():
    spent = interruption([_entry(1, 0, 100), _entry(2, 90, None)], "2h", at(500))
    assert spent.used_seconds == 500 and spent.open_since == format_time(T0)


def test_exceeding_the_interruption_budget_warns_and_the_run_continues():
    status = TrainingJobStatus(
        phase="train", world_size=2, state=JobState.RUNNING, failures=[_entry(1, -8000, -500)]
    )
    plan = decide(_snap(status), SETTINGS, T0)
    (cond,) = [c for c in plan.status.conditions if c.type == "InterruptionBudgetExceeded"]
    assert cond.status == "True"
    assert "InterruptionBudgetExceeded" in [getattr(a, "reason", "") for a in plan.actions]
    assert plan.status.state != JobState.FAILED
