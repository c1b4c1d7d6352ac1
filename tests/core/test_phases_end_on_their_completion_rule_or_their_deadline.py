from phased.api.v1alpha1 import JobState, NodeRole, PhaseRecord, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import ClaimNode, DeletePod, PodPhase, ReleaseNode
from phased.core.times import format_time
from tests.core.builders import (
    SETTINGS,
    T0,
    at,
    events,
    node,
    nodes,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)


def _snap(the_spec, states, status=None, free=()):
    held = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(len(states))]
    pods = [
        pod(
            f"llm-{the_spec.phases[0].name}-g0-{i}",
            the_spec.phases[0].name,
            i,
            world=len(states),
            node_name=f"a{i}",
            state=s,
        )
        for i, s in enumerate(states)
    ]
    status = status or TrainingJobStatus(
        phase=the_spec.phases[0].name, state=JobState.RUNNING, world_size=len(states)
    )
    return snapshot(the_spec, [*held, *free], pods, status, service_exists=True)


def test_rank_zero_success_ends_the_phase_and_stops_the_rest():
    the_spec = spec(phase("validate", 2, 2, completion={"mode": "RankZeroSucceeded"}))
    plan = decide(_snap(the_spec, [PodPhase.SUCCEEDED, PodPhase.RUNNING]), SETTINGS, T0)
    assert [d.name for d in of_type(plan, DeletePod)] == ["llm-validate-g0-1"]
    assert plan.status.state == JobState.SUCCEEDED and events(plan) == [
        "PhaseCompleted",
        "JobSucceeded",
    ]


def test_all_succeeded_waits_for_every_rank():
    the_spec = spec(phase("train", 2, 2))
    plan = decide(_snap(the_spec, [PodPhase.SUCCEEDED, PodPhase.RUNNING]), SETTINGS, T0)
    assert plan.status.state == JobState.RUNNING and "PhaseCompleted" not in events(plan)


def test_the_pool_follows_the_next_phase():
    the_spec = spec(phase("train", 3, 3), phase("validate", 2, 2, gpu_types=["H200"]))
    free = nodes("k", 2, gpu="H200")
    plan = decide(_snap(the_spec, [PodPhase.SUCCEEDED] * 3, free=free), SETTINGS, T0)
    assert plan.status.phase == "validate" and plan.status.restart_generation == 0
    assert sorted(r.node for r in of_type(plan, ReleaseNode)) == ["a0", "a1", "a2"]
    assert sorted(c.node for c in of_type(plan, ClaimNode)) == ["k00", "k01"]


def test_a_phase_past_its_max_duration_fails_the_job():
    the_spec = spec(phase("train", 2, 2, maxDuration="1h"))
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        phases=[PhaseRecord(name="train", start_time=format_time(T0))],
    )
    early = decide(_snap(the_spec, [PodPhase.RUNNING] * 2, status), SETTINGS, at(600))
    assert early.requeue_after == 3000
    late = decide(_snap(the_spec, [PodPhase.RUNNING] * 2, status), SETTINGS, at(3600))
    assert late.status.state == JobState.FAILED
    assert [c.reason for c in late.status.conditions if c.type == "Failed"] == ["PhaseTimedOut"]
    assert len(of_type(late, DeletePod)) == 2 and len(of_type(late, ReleaseNode)) == 2
