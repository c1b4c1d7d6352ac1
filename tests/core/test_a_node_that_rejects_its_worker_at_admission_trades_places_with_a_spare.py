"""A node whose kubelet rejects a worker at admission (the pod Failed before any container
started, ``Pod was rejected: ...``: a device plugin failing to allocate its GPUs, resources
taken by pods the scheduler does not know of) is the node's doing, not the worker's code's.
While a healthy spare can take its place, the node trades places with it before the next
worker is made, and nothing is charged to ``restartBudget``. Before, the rejection was
judged a code fault: a budget spent on each, the next generation placed back on the same
node and rejected again, until the job failed. With no spare to take its place the next
worker goes back to the same node, and the rejection is charged as a failure there: the
budget bounds the retries."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import PodInfo, PodPhase
from tests.core.refusing import Refusing, gang

REASON = "UnexpectedAdmissionError"


def _rejected(pod: PodInfo) -> PodInfo:
    return replace(pod, phase=PodPhase.FAILED, rejected=True, reason=REASON, running_since=None)


def test_a_gang_rejected_on_one_node_starts_again_without_it_uncharged() -> None:
    job = Refusing(gang(spares=1), rank=1, refuse=_rejected)
    job.run(12)
    cluster = job.cluster
    assert cluster.status.state == JobState.RUNNING, cluster.status.message
    assert cluster.status.worker_restarts == 0
    assert job.bad in cluster.held(NodeRole.SPARE)
    running = {p.node_name for p in cluster.running()}
    assert running == set(cluster.held(NodeRole.ACTIVE)) and len(running) == 3
    swapped = [e for e in job.events if e.startswith("TroubledNodeSwapped")]
    assert any(f"rejected a worker at admission ({REASON})" in e for e in swapped), job.events
    restarted = [e for e in job.events if e.startswith("WorkersRestarted")]
    assert any(f"rejected by node {job.bad} at admission" in e for e in restarted), restarted


def test_a_rank_rejected_on_its_node_is_replaced_alone_on_the_spare_uncharged() -> None:
    job = Refusing(gang(spares=1, restartScope="Worker"), rank=1, refuse=_rejected)
    job.run(12)
    cluster = job.cluster
    assert cluster.status.state == JobState.RUNNING, cluster.status.message
    assert cluster.status.worker_restarts == 0
    assert cluster.status.restart_generation == 0  # rank 1 alone, not the gang
    assert job.bad in cluster.held(NodeRole.SPARE)
    ranks = {p.rank for p in cluster.running()}
    assert ranks == {0, 1, 2}
    assert {p.node_name for p in cluster.running()} == set(cluster.held(NodeRole.ACTIVE))


def test_with_no_spare_to_take_its_place_a_rejecting_node_spends_the_budget() -> None:
    job = Refusing(gang(spares=0), rank=1, refuse=_rejected)
    job.run(12)
    cluster = job.cluster
    assert cluster.status.state == JobState.FAILED
    assert cluster.status.worker_restarts == 1


def test_nodes_that_all_reject_are_excused_once_a_spare_then_charged() -> None:
    """Every node rejects rank 1's worker (a device plugin failing everywhere): a node is
    healthy again once its rejected pod is gone, so the swaps could go round for ever. The
    phase is excused as many restarts as it has spares, then rejections are charged and the
    budget ends it."""
    cluster = gang(spares=4, restartBudget=3)
    for _ in range(200):
        cluster.step()
        for name, p in cluster.pods.items():
            if p.rank == 1 and p.phase == PodPhase.RUNNING:
                cluster.pods[name] = _rejected(p)
        cluster.advance(1)
        if cluster.status.state == JobState.FAILED:
            break
    assert cluster.status.state == JobState.FAILED, cluster.status.restarts
    assert "restartBudget" in (cluster.status.message or "")
    assert cluster.status.phases[0].admission_rejections == 4
    assert cluster.status.restarts == 4 + 3 + 1
