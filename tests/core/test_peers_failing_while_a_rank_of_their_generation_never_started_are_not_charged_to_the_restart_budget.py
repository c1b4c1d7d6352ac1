"""A worker that fails while a rank of its generation has never started (its worker still
Pending: unschedulable, an image that cannot be pulled, a node not Ready) is not charged to
``restartBudget``: the launcher waits at the rendezvous for every rank of the world, so no
training code ran, and the peers that did start fail at the rendezvous timeout on healthy
nodes through no fault of their code. The restart is counted in ``restarts`` and the event
says why; the Pending rank is the start's problem (``pendingGrace``). Before, that timeout
was charged as the code's failure, and a small budget failed the job with
``RestartBudgetExceeded`` for a worker that never got a place or an image."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState
from phased.core.model import PodPhase
from tests.core.builders import Cluster, node, phase, spec

RESTARTED = "WorkersRestarted"


def _cluster(scope: str, budget: int) -> Cluster:
    the_spec = spec(
        phase("train", 3, 3),
        spares=1,
        failurePolicy={"restartScope": scope, "restartBudget": budget, "pendingGrace": "30m"},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    return Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(5)})


def _pull_fails(cluster: Cluster, rank: int) -> str:
    """The rank's newest worker is Pending, its image not pulled."""
    name = max(
        (n for n, p in cluster.pods.items() if p.rank == rank and p.generation == 0),
        key=lambda n: (len(n), n),
    )
    cluster.pods[name] = replace(
        cluster.pods[name],
        phase=PodPhase.PENDING,
        running_since=None,
        waiting_reason="ImagePullBackOff",
    )
    return name


def _fail(cluster: Cluster, ranks: tuple[int, ...]) -> None:
    for name, p in list(cluster.pods.items()):
        if p.rank in ranks and p.phase == PodPhase.RUNNING:
            cluster.pods[name] = replace(p, phase=PodPhase.FAILED, exit_code=1)


def _said(plan: object) -> list[str]:
    actions = getattr(plan, "actions", [])
    return [a.message for a in actions if getattr(a, "reason", "") == RESTARTED]


def test_a_gangs_peers_timing_out_at_the_rendezvous_spend_no_restart_budget() -> None:
    cluster = _cluster("Gang", budget=0)
    while not cluster.pods:  # the pool is claimed, then the workers made
        cluster.apply(cluster.decide())
    cluster.schedule()
    pending = _pull_fails(cluster, 2)  # placed, but its image is not pulled
    assert cluster.pods[pending].phase == PodPhase.PENDING
    cluster.advance(600)  # the rendezvous times out
    _fail(cluster, (0, 1))
    plan = cluster.decide()
    cluster.apply(plan)
    assert plan.status.state != JobState.FAILED, plan.status.message
    assert plan.status.worker_restarts == 0 and plan.status.restarts == 1
    assert any("never started" in m for m in _said(plan)), _said(plan)


def test_a_peer_timing_out_beside_a_rank_replaced_alone_that_never_started_is_not_charged() -> None:
    cluster = _cluster("Worker", budget=1)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    _fail(cluster, (2,))  # the code's failure: charged
    cluster.apply(cluster.decide())
    assert cluster.status.worker_restarts == 1
    _pull_fails(cluster, 2)  # its replacement's image is not pulled
    cluster.advance(600)
    _fail(cluster, (1,))  # rank 1 times out waiting for it
    plan = cluster.decide()
    cluster.apply(plan)
    assert plan.status.state != JobState.FAILED, plan.status.message
    assert plan.status.worker_restarts == 1 and plan.status.restarts == 2
    assert any("never started" in m for m in _said(plan)), _said(plan)


def test_a_worker_failing_once_every_rank_started_is_charged_as_before() -> None:
    cluster = _cluster("Gang", budget=0)
    cluster.settle()
    _fail(cluster, (1,))
    plan = cluster.decide()
    assert plan.status.state == JobState.FAILED
    assert "restartBudget" in (plan.status.message or "")
