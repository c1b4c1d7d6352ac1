"""A worker the kubelet stopped for its node's sake and left Failed — evicted under node
pressure, killed for the node's graceful shutdown (its pod's ``DisruptionTarget`` condition)
— did not fail by its code. While a healthy spare can take the node's place, the node trades
places with it before the next worker is made, and nothing is charged to ``restartBudget``;
the phase's ``nodeDisruptions`` counts it. Before, it was judged a code fault: a budget spent,
and the next generation placed back on the node that was shutting down or out of memory.
With no spare the next worker goes back to the same node and the stop is charged, and a
phase is excused as many such restarts as it has spares: a worker evicted wherever it goes
(it is what uses up its node's memory) spends the budget in the end."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import PodInfo, PodPhase
from tests.core.builders import with_ready
from tests.core.refusing import Refusing, gang

SAID = "TerminationByKubelet: The node was low on resource: memory."


def _evicted(pod: PodInfo) -> PodInfo:
    return replace(pod, phase=PodPhase.FAILED, exit_code=137, reason="Error", disruption=SAID)


def test_a_gang_whose_worker_its_node_evicted_starts_again_without_it_uncharged() -> None:
    job = Refusing(gang(spares=1), rank=1, refuse=_evicted)
    job.run(12)
    cluster = job.cluster
    assert cluster.status.state == JobState.RUNNING, cluster.status.message
    assert cluster.status.worker_restarts == 0
    assert cluster.status.restarts == 1
    assert cluster.status.phases[0].node_disruptions == 1
    assert cluster.status.phases[0].admission_rejections == 0
    assert job.bad in cluster.held(NodeRole.SPARE)
    running = {p.node_name for p in cluster.running()}
    assert running == set(cluster.held(NodeRole.ACTIVE)) and len(running) == 3
    swapped = [e for e in job.events if e.startswith("TroubledNodeSwapped")]
    assert any(f"stopped a worker for its own sake ({SAID})" in e for e in swapped), job.events
    restarted = [e for e in job.events if e.startswith("WorkersRestarted")]
    assert any(f"stopped by node {job.bad}'s kubelet" in e for e in restarted), restarted


def test_a_rank_its_node_evicted_is_replaced_alone_on_the_spare_uncharged() -> None:
    job = Refusing(gang(spares=1, restartScope="Worker"), rank=1, refuse=_evicted)
    job.run(12)
    cluster = job.cluster
    assert cluster.status.state == JobState.RUNNING, cluster.status.message
    assert cluster.status.worker_restarts == 0
    assert cluster.status.restart_generation == 0  # rank 1 alone, not the gang
    assert job.bad in cluster.held(NodeRole.SPARE)
    assert {p.rank for p in cluster.running()} == {0, 1, 2}
    assert {p.node_name for p in cluster.running()} == set(cluster.held(NodeRole.ACTIVE))


def test_with_no_spare_to_take_its_place_an_evicting_node_spends_the_budget() -> None:
    job = Refusing(gang(spares=0), rank=1, refuse=_evicted)
    job.run(12)
    cluster = job.cluster
    assert cluster.status.state == JobState.FAILED
    assert cluster.status.worker_restarts == 1
    assert cluster.status.phases[0].node_disruptions == 0


def test_a_worker_evicted_wherever_it_goes_is_excused_once_a_spare_then_charged() -> None:
    cluster = gang(spares=3, restartBudget=2)
    for _ in range(200):
        cluster.step()
        for name, p in cluster.pods.items():
            if p.rank == 1 and p.phase == PodPhase.RUNNING:
                cluster.pods[name] = _evicted(p)
        cluster.advance(1)
        if cluster.status.state == JobState.FAILED:
            break
    assert cluster.status.state == JobState.FAILED, cluster.status.restarts
    assert "restartBudget" in (cluster.status.message or "")
    assert cluster.status.phases[0].node_disruptions == 3
    assert cluster.status.restarts == 3 + 2 + 1


def test_a_worker_that_exits_on_its_own_is_still_its_codes_failure() -> None:
    """The same exit code with no word from the kubelet: the code's failure, charged."""
    cluster = gang(spares=1)
    for _ in range(12):
        cluster.step()
        for name, p in cluster.pods.items():
            if p.rank == 1 and p.phase == PodPhase.RUNNING:
                cluster.pods[name] = replace(p, phase=PodPhase.FAILED, exit_code=137)
        cluster.advance(1)
    assert cluster.status.state == JobState.FAILED
    assert cluster.status.worker_restarts == 1


def test_a_stop_another_excuse_covers_uses_up_none_of_its_kind() -> None:
    """A node of the gang is NotReady within its grace while another node stops its worker:
    the restart is excused by the node in trouble already, so ``nodeDisruptions`` keeps its
    count for a stop that only the kubelet's word could excuse."""
    cluster = gang(spares=1)
    cluster.settle()
    troubled = next(p for p in cluster.pods.values() if p.rank == 0).node_name or ""
    cluster.nodes[troubled] = with_ready(cluster.nodes[troubled], False, cluster.now)
    victim = next(p for p in cluster.pods.values() if p.rank == 1)
    cluster.pods[victim.name] = _evicted(victim)
    cluster.advance(1)
    cluster.settle()
    assert cluster.status.worker_restarts == 0
    assert cluster.status.restarts == 1
    assert cluster.status.phases[0].node_disruptions == 0
