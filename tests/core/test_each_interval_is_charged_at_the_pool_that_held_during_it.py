"""Accounting per interval: the pool that held during it, the phase it served, and time no
operator watched said out loud."""

import pytest

from phased.api.v1alpha1 import Accounting, JobState, NodeRole, TrainingJobStatus, UsageBasis
from phased.core.decide import decide
from phased.core.times import format_time
from tests.core.builders import (
    SETTINGS,
    T0,
    Cluster,
    at,
    events,
    node,
    nodes,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)


def _status(basis, phase_name="train", index=0, **acc):
    return TrainingJobStatus(
        phase=phase_name,
        phase_index=index,
        world_size=2,
        state=JobState.RUNNING,
        accounting=Accounting(accounted_at=format_time(T0), basis=basis, **acc),
    )


def _pool():
    held = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(2)]
    held.append(owned(node("s0"), NodeRole.SPARE))
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i}") for i in range(2)]
    return held, pods


def test_the_interval_is_charged_at_the_pool_the_last_pass_left_not_the_one_seen_now():
    held, pods = _pool()  # now: 2 active, 1 spare, 2 Running
    basis = UsageBasis(phase="train", gpu_type="H100", active_nodes=1, gpus_per_node=8)
    the_spec = spec(phase("train", 1, 2), spares=1)
    plan = decide(snapshot(the_spec, held, pods, _status(basis)), SETTINGS, at(60))
    acc = plan.status.accounting
    minute = 60 / 3600
    assert acc.active_gpu_hours == 8 * minute
    assert (acc.spare_gpu_hours, acc.busy_gpu_hours) == (0, 0)
    assert plan.status.phases[0].gpu_hours == 8 * minute


def test_the_pass_records_the_pool_it_leaves_for_the_next_interval():
    held, pods = _pool()
    the_spec = spec(phase("train", 1, 2), spares=1)
    plan = decide(snapshot(the_spec, held, pods, _status(None)), SETTINGS, at(60))
    assert plan.status.accounting.basis == UsageBasis(
        phase="train",
        gpu_type="H100",
        active_nodes=2,
        spare_nodes=1,
        running_workers=2,
        gpus_per_node=8,
    )


def test_the_interval_after_a_phase_boundary_goes_to_the_phase_the_pool_served():
    held, _ = _pool()
    the_spec = spec(phase("prep", 1, 2), phase("train", 1, 2), spares=1)
    basis = UsageBasis(phase="prep", gpu_type="H100", active_nodes=2, gpus_per_node=8)
    status = _status(basis, phase_name="train", index=1)
    plan = decide(snapshot(the_spec, held, [], status), SETTINGS, at(60))
    prep, train = plan.status.phases
    assert prep.gpu_hours == 16 * 60 / 3600 and train.gpu_hours == 0


def test_time_no_operator_watched_is_charged_and_said():
    held, pods = _pool()
    basis = UsageBasis(phase="train", gpu_type="H100", active_nodes=2, gpus_per_node=8)
    the_spec = spec(phase("train", 1, 2), spares=1)
    plan = decide(snapshot(the_spec, held, pods, _status(basis)), SETTINGS, at(3600))
    assert plan.status.accounting.unobserved_seconds == 3600
    assert plan.status.accounting.active_gpu_hours == 16
    assert events(plan).count("AccountingGap") == 1
    quiet = decide(snapshot(the_spec, held, pods, _status(basis)), SETTINGS, at(30))
    assert quiet.status.accounting.unobserved_seconds == 0
    assert "AccountingGap" not in events(quiet)


def test_a_walk_through_growth_and_a_failure_charges_exactly_what_was_held():
    """Integrate the simulator's pool second by second and compare with the account."""
    c = Cluster(
        spec(
            phase("train", 2, 3),
            spares=1,
            failurePolicy={"notReadyGrace": "5s", "massFailure": {"maxFailedPercent": 50}},
        ),
        {n.name: n for n in nodes("n", 5)},
    )
    held_gpu_seconds = 0.0
    c.step()
    for i in range(20):
        if i == 8:
            c.nodes["n00"] = with_ready(c.nodes["n00"], False, c.now)
        before = 8 * (len(c.held(NodeRole.ACTIVE)) + len(c.held(NodeRole.SPARE)))
        c.advance(10)
        held_gpu_seconds += before * 10
        c.step()
    acc = c.status.accounting
    assert acc.gpu_hours * 3600 == pytest.approx(held_gpu_seconds)
    assert [e.node for e in c.status.failures] == ["n00"]
    assert len(c.running()) == 3
