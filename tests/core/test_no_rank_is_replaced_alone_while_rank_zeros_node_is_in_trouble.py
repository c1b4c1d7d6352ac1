"""``restartScope: Worker`` replaces a lost rank alone only while the rendezvous store it
must rejoin is there: the store is hosted by rank 0's torchrun agent (``PET_RDZV_ENDPOINT``
is its pod). While rank 0's node is in trouble within its grace (a suspect, not yet judged
failed), its peers fail because the store is unreachable, and a rank started alone could not
reach it either. The gang restarts instead (a new rendezvous), not charged to
``restartBudget``: the peers failed because rank 0's node was in trouble. Before, each peer
was replaced alone, its replacement failed in turn, and the ranks churned until the grace
ran out and rank 0's node was judged failed."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState
from phased.core.model import CreatePod, PodPhase
from tests.core.builders import Cluster, node, of_type, phase, spec, with_ready

RESTARTED = "WorkersRestarted"


def _cluster() -> Cluster:
    the_spec = spec(
        phase("train", 3, 3),
        spares=1,
        failurePolicy={"restartScope": "Worker", "restartBudget": 0, "notReadyGrace": "5m"},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(5)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _rank(cluster: Cluster, rank: int) -> str:
    return next(p.name for p in cluster.running() if p.rank == rank)


def test_peers_failing_while_rank_zeros_node_is_suspected_restart_the_gang_uncharged() -> None:
    cluster = _cluster()
    store = cluster.pods[_rank(cluster, 0)].node_name
    assert store is not None
    cluster.nodes[store] = with_ready(cluster.nodes[store], False, cluster.now)
    cluster.advance(10)  # well within notReadyGrace: rank 0's node is only suspected
    for rank in (1, 2):
        name = _rank(cluster, rank)
        cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=1)
    plan = cluster.step()
    alone = [
        c.manifest["metadata"]["name"]
        for c in of_type(plan, CreatePod)
        if c.manifest["metadata"]["name"].startswith("llm-train-g0-")
    ]
    assert alone == [], "a rank was started alone beside a store its node cannot serve"
    assert cluster.status.restart_generation == 1
    said = [a.message for a in plan.actions if getattr(a, "reason", "") == RESTARTED]
    assert any("generation 0 -> 1" in m and "rendezvous" in m for m in said), said
    assert cluster.status.state != JobState.FAILED, cluster.status.message
    assert cluster.status.worker_restarts == 0
    assert cluster.status.restarts == 1


def test_a_peer_failing_beside_a_healthy_rank_zero_is_still_replaced_alone() -> None:
    cluster = _cluster()
    other = cluster.pods[_rank(cluster, 1)].node_name
    assert other is not None
    cluster.nodes[other] = with_ready(cluster.nodes[other], False, cluster.now)
    cluster.advance(10)  # rank 1's node in trouble; rank 0's, with the store, is fine
    name = _rank(cluster, 2)
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=1)
    plan = cluster.step()
    created = sorted(c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod))
    assert created == ["llm-train-g0-2-a1"]
    assert cluster.status.restart_generation == 0
    assert cluster.status.worker_restarts == 0
