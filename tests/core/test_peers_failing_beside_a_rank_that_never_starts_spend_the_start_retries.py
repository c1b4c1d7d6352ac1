"""Workers that fail beside a rank of their generation that never started are not charged to
``restartBudget`` (the rank's absence is excused: tests/core/test_peers_failing_while_...),
but when the gang restarts for them the start has failed: the restart spends one of the
phase's ``pendingRestarts`` retries, and with them spent the job fails
(``WorkersStuckPending``). Before, nothing bounded it: a rank that could never start beside
peers failing before ``pendingGrace`` ran out restarted the gang for ever, each generation
making the Pending rank anew, so its grace never ran out and no budget was spent."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState
from phased.core.model import PodPhase
from tests.core.builders import Cluster, node, phase, spec


def _cluster(scope: str, budget: int, pending_restarts: int = 1) -> Cluster:
    the_spec = spec(
        phase("train", 3, 3),
        spares=1,
        failurePolicy={
            "restartScope": scope,
            "restartBudget": budget,
            "pendingGrace": "30m",
            "pendingRestarts": pending_restarts,
        },
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    return Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(5)})


def _made(cluster: Cluster, generation: int) -> None:
    """Pass until the generation's workers exist, then place them: all run but rank 2,
    whose image is never pulled."""
    for _ in range(12):
        if any(p.generation == generation for p in cluster.pods.values()):
            break
        cluster.apply(cluster.decide())
    cluster.schedule()
    (name,) = [n for n, p in cluster.pods.items() if p.rank == 2 and p.generation == generation]
    cluster.pods[name] = replace(
        cluster.pods[name],
        phase=PodPhase.PENDING,
        running_since=None,
        waiting_reason="ImagePullBackOff",
    )


def _peers_fail(cluster: Cluster, ranks: tuple[int, ...]) -> None:
    for name, p in list(cluster.pods.items()):
        if p.rank in ranks and p.phase == PodPhase.RUNNING:
            cluster.pods[name] = replace(p, phase=PodPhase.FAILED, exit_code=1)


def test_a_gang_restarted_for_a_rank_that_never_starts_spends_its_start_retries_then_fails() -> (
    None
):
    cluster = _cluster("Gang", budget=0, pending_restarts=1)
    _made(cluster, 0)
    cluster.advance(120)  # well within pendingGrace
    _peers_fail(cluster, (0, 1))
    plan = cluster.decide()
    cluster.apply(plan)
    assert plan.status.state != JobState.FAILED, plan.status.message
    assert plan.status.phases[0].pending_restarts == 1
    assert plan.status.worker_restarts == 0 and plan.status.restarts == 1

    _made(cluster, 1)
    cluster.advance(120)
    _peers_fail(cluster, (0, 1))
    plan = cluster.decide()
    assert plan.status.state == JobState.FAILED
    assert "never started" in (plan.status.message or "")
    assert "pendingRestarts" in (plan.status.message or "")
    assert plan.status.worker_restarts == 0


def test_more_start_retries_allow_more_such_restarts() -> None:
    cluster = _cluster("Gang", budget=0, pending_restarts=3)
    for generation in range(3):
        _made(cluster, generation)
        cluster.advance(120)
        _peers_fail(cluster, (0, 1))
        plan = cluster.decide()
        cluster.apply(plan)
        assert plan.status.state != JobState.FAILED, plan.status.message
        assert plan.status.phases[0].pending_restarts == generation + 1


def test_a_rank_replaced_alone_beside_one_that_never_started_spends_no_start_retry() -> None:
    cluster = _cluster("Worker", budget=0)
    _made(cluster, 0)
    cluster.advance(120)
    _peers_fail(cluster, (1,))  # rank 1 gives up waiting; rank 2 keeps its Pending clock
    plan = cluster.decide()
    cluster.apply(plan)
    assert plan.status.state != JobState.FAILED, plan.status.message
    assert plan.status.phases[0].pending_restarts == 0
    assert plan.status.worker_restarts == 0
