"""While the breaker holds an active node whose worker has already succeeded, nothing is
interrupted: that rank did its part, and its peers train on. The hold opens no stop, the job
stays Running, and it does not keep a stop open once the nodes whose workers do train came
back. Before, such a node counted as training held: the job said "recovering from node
failure" and was charged an interruption for as long as the breaker held it — for a node
deleted, until a person's proceed."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import PodPhase
from tests.core.builders import Cluster, nodes, phase, spec, with_ready


def _pool() -> Cluster:
    cluster = Cluster(spec(phase("train", 4, 4), spares=1), {n.name: n for n in nodes("h", 8)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    cluster.advance(600)
    return cluster


def _succeed_rank(cluster: Cluster, rank: int) -> str:
    done = next(p for p in cluster.pods.values() if p.rank == rank)
    cluster.pods[done.name] = replace(done, phase=PodPhase.SUCCEEDED, exit_code=0)
    assert done.node_name is not None
    return done.node_name


def _down(cluster: Cluster, names: list[str], ready: bool = False) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], ready, cluster.now)


def _pass(cluster: Cluster, times: int = 6) -> None:
    for _ in range(times):
        cluster.advance(10)
        cluster.settle()


def test_a_held_node_whose_worker_succeeded_beside_a_held_spare_interrupts_nothing() -> None:
    cluster = _pool()
    finished = _succeed_rank(cluster, 3)
    spare = cluster.held(NodeRole.SPARE)[0]
    _down(cluster, [finished, spare])
    _pass(cluster)
    mass = next(c for c in cluster.status.conditions if c.type == "MassFailure")
    assert mass.status == "True"
    assert sorted(h.node for h in cluster.status.breaker.held) == sorted([finished, spare])
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.interruption.stops == []
    assert cluster.status.interruption.used_seconds == 0
    assert len(cluster.running()) == 3


def test_a_held_node_whose_worker_succeeded_does_not_prolong_a_stop() -> None:
    cluster = _pool()
    finished = _succeed_rank(cluster, 3)
    training = next(p.node_name for p in cluster.running() if p.rank == 0)
    assert training is not None
    _down(cluster, [finished, training])
    _pass(cluster)
    assert sorted(h.node for h in cluster.status.breaker.held) == sorted([finished, training])
    assert cluster.status.state == JobState.RECOVERING
    (stop,) = cluster.status.interruption.stops
    assert stop.resumed is None

    _down(cluster, [training], ready=True)  # its worker lived through the blip
    _pass(cluster)
    assert [h.node for h in cluster.status.breaker.held] == [finished]  # still held
    (stop,) = cluster.status.interruption.stops
    assert stop.resumed is not None
    assert cluster.status.state == JobState.RUNNING
    used = cluster.status.interruption.used_seconds
    _pass(cluster)
    assert cluster.status.interruption.used_seconds == used
