"""A job whose spares alone failed together — enough to trip the breaker — is Running, not
Recovering: its workers train on, and only the held spares wait (the ``MassFailure``
condition names them). Before, the job said "recovering from node failure" for as long as
the breaker held spares no worker ran on. Held active nodes still make it Recovering."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from tests.core.builders import Cluster, nodes, phase, spec, with_ready


def _pool() -> Cluster:
    cluster = Cluster(spec(phase("train", 4, 4), spares=3), {n.name: n for n in nodes("h", 12)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _fail(cluster: Cluster, names: list[str]) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    for _ in range(6):
        cluster.advance(10)
        cluster.settle()


def test_three_of_three_spares_failing_together_trip_the_breaker_and_the_job_runs_on() -> None:
    cluster = _pool()
    spares = cluster.held(NodeRole.SPARE)
    workers = cluster.running()
    _fail(cluster, spares)
    mass = next(c for c in cluster.status.conditions if c.type == "MassFailure")
    assert mass.status == "True"
    assert sorted(h.node for h in cluster.status.breaker.held) == sorted(spares)
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.message == "phase train running on 4 nodes"
    assert cluster.running() == workers


def test_a_held_active_node_still_makes_the_job_recovering() -> None:
    cluster = _pool()
    _fail(cluster, [*cluster.held(NodeRole.SPARE)[:2], cluster.held(NodeRole.ACTIVE)[0]])
    assert cluster.status.breaker.held
    assert cluster.status.state == JobState.RECOVERING
