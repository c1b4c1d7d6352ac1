"""``pendingRestarts`` bounds failed starts in a row, not over a whole phase: once every rank
of a generation runs (or has succeeded), the start succeeded and the phase's count goes back
to 0. Before, a phase kept every failed start it ever had: on a run of months, a registry
outage in its first week and another a month later (each a start stuck past
``pendingGrace``, each recovered) failed the job with ``WorkersStuckPending``. The count is
kept while a rank has no worker yet (a restart between its deletions and its creates) and
while one is still Pending, so a start that keeps failing is still bounded."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole, PhaseRecord, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import PodInfo, PodPhase, Snapshot
from phased.core.times import format_time
from tests.core.builders import SETTINGS, T0, at, node, owned, phase, pod, snapshot, spec


def _job(pods: list[PodInfo], used: int = 1) -> Snapshot:
    the_spec = spec(phase("train", 2, 2), failurePolicy={"pendingRestarts": 1})
    actives = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(2)]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        restart_generation=1,
        created_generation=1,
        phases=[
            PhaseRecord(
                name="train",
                start_time=format_time(at(-3600)),
                gpu_type="H100",
                pending_restarts=used,
            )
        ],
        pool={"active": ["a0", "a1"]},
    )
    return snapshot(the_spec, actives, pods, status)


def _workers(*ranks: int) -> list[PodInfo]:
    return [
        pod(f"llm-train-g1-{i}", "train", i, world=2, node_name=f"a{i}", generation=1)
        for i in ranks
    ]


def _pending(p: PodInfo) -> PodInfo:
    return replace(p, phase=PodPhase.PENDING, running_since=None, created=at(-30))


def test_a_generation_whose_every_rank_runs_gives_the_retries_back() -> None:
    plan = decide(_job(_workers(0, 1)), SETTINGS, T0)
    assert plan.status.phases[0].pending_restarts == 0


def test_the_count_is_kept_while_a_rank_is_still_pending() -> None:
    first, second = _workers(0, 1)
    plan = decide(_job([first, _pending(second)]), SETTINGS, T0)
    assert plan.status.phases[0].pending_restarts == 1


def test_the_count_is_kept_while_a_rank_has_no_worker_yet() -> None:
    plan = decide(_job(_workers(0)), SETTINGS, T0)
    assert plan.status.phases[0].pending_restarts == 1


def test_a_later_stuck_start_is_retried_once_more_and_the_next_one_after_it_fails() -> None:
    first, second = _workers(0, 1)
    stuck = replace(second, phase=PodPhase.PENDING, running_since=None, created=at(-700))
    stuck = replace(stuck, waiting_reason="ImagePullBackOff")
    plan = decide(_job([first, stuck], used=0), SETTINGS, T0)
    assert plan.status.state == JobState.RUNNING
    assert plan.status.phases[0].pending_restarts == 1
    plan = decide(_job([first, stuck], used=1), SETTINGS, T0)
    assert plan.status.state == JobState.FAILED
    failed = [c for c in plan.status.conditions if c.type == "Failed"]
    assert failed and failed[0].reason == "WorkersStuckPending"
