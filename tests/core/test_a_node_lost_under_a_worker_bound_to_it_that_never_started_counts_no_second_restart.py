"""A node lost under a worker of the running generation that had not started yet (Pending,
bound to the node: its image still pulling) lost no training, as a node lost under a worker
not placed yet did not. The worker cannot move (it is bound), so the gang restarts on a spare
(or on a pool formed again when the spares do not cover it) — but that restart is not
counted in ``restarts``, nor against ``restartBudget``: the generation never trained, and a
rack's second node failing while the generation answering its first is still starting is
one mass event, one restart, whether the scheduler had bound the worker or not. A worker
that was running when its node was lost counts a restart as ever. Before, the bound worker
counted a second restart where the unbound one counted none."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.model import PodPhase
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

POLICY = {"notReadyGrace": "10s", "massFailure": {"maxFailedPercent": 100}}


def _starting_after_a_failure(spares: int, min_nodes: int = 4, free: int = 1) -> Cluster:
    """Four workers on n00..n03; n00 fails and generation 1 is made, its workers Pending."""
    cluster = Cluster(
        spec(phase("train", min_nodes, 4), spares=spares, failurePolicy=POLICY),
        {n.name: n for n in nodes("n", 4 + spares + free)},
    )
    cluster.settle()
    _fail(cluster, "n00")
    for _ in range(6):
        cluster.apply(cluster.decide())
        if any(p.generation == 1 for p in cluster.pods.values()):
            break
        cluster.advance(1)
    assert cluster.status.restarts == 1
    return cluster


def _fail(cluster: Cluster, name: str) -> None:
    cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(11)


def _bind(cluster: Cluster, node: str, phase: PodPhase = PodPhase.PENDING) -> None:
    """The scheduler binds a worker of generation 1 to ``node`` (started or not)."""
    made = sorted((p for p in cluster.pods.values() if p.generation == 1), key=lambda p: p.name)
    pod = made[1]
    assert pod.phase == PodPhase.PENDING and pod.node_name is None
    running = cluster.now if phase == PodPhase.RUNNING else None
    cluster.pods[pod.name] = replace(pod, node_name=node, phase=phase, running_since=running)


def _settle(cluster: Cluster) -> None:
    for _ in range(3):
        cluster.settle()
        cluster.advance(31)  # the survivor grace of a gang restart, if any


def test_the_node_of_a_bound_worker_not_started_restarts_the_gang_uncounted() -> None:
    cluster = _starting_after_a_failure(spares=2)
    _bind(cluster, "n01")
    _fail(cluster, "n01")
    _settle(cluster)

    assert cluster.status.restarts == 1
    assert cluster.status.worker_restarts == 0
    workers = [
        p for p in cluster.pods.values() if p.generation == cluster.status.restart_generation
    ]
    assert len(workers) == 4 and all(p.phase == PodPhase.RUNNING for p in workers)
    assert "n01" not in {p.node_name for p in workers}
    assert [(e.node, e.resumed is not None) for e in cluster.status.failures] == [
        ("n00", True),
        ("n01", True),
    ]


def test_so_does_one_the_spares_do_not_cover() -> None:
    cluster = _starting_after_a_failure(spares=1, min_nodes=3, free=0)  # no spare left
    assert cluster.held(NodeRole.SPARE) == []
    _bind(cluster, "n01")
    _fail(cluster, "n01")
    _settle(cluster)

    assert cluster.status.restarts == 1
    assert cluster.status.worker_restarts == 0
    assert "n01" in cluster.held(NodeRole.QUARANTINED)


def test_a_worker_running_when_its_node_is_lost_counts_a_restart() -> None:
    cluster = _starting_after_a_failure(spares=2)
    _bind(cluster, "n01", PodPhase.RUNNING)
    _fail(cluster, "n01")
    _settle(cluster)

    assert cluster.status.restarts == 2
    assert cluster.status.worker_restarts == 0
