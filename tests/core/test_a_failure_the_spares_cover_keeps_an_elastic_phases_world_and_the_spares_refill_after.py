"""A failure the spares cover keeps an elastic phase's world: the spares promoted for the
places lost stay active, and the spares refill afterwards.

Before, the gang restart after the swap formed the pool again by the admission rule
(``nodes.min`` actives, then the spares, then actives up to ``max``), which turned the
promoted spares back into spares: one covered failure shrank a job of 4 (min 2, max 4,
2 spares) to 3, two halved it to 2, keeping idle spares, and the ledger named as the failed
node's replacement a node that was a spare again. A pool that cannot make its world (the
spares do not cover the places lost and no free node does) is still formed by the admission
rule: an elastic job shrinks within ``[min, max]`` keeping its spares."""

from __future__ import annotations

from datetime import timedelta

from phased.api.v1alpha1 import NodeRole
from tests.core.builders import Cluster, nodes, phase, spec, with_ready


def _running(count: int) -> Cluster:
    """A job of min 2, max 4 with 2 spares on ``count`` nodes, settled at world 4 (the
    breaker out of the way: several of its few nodes fail at once here)."""
    the_spec = spec(
        phase("train", 2, 4),
        spares=2,
        failurePolicy={"massFailure": {"maxFailedPercent": 100}},
    )
    cluster = Cluster(the_spec, {n.name: n for n in nodes("n", count)})
    _settle(cluster)
    assert cluster.status.world_size == 4
    return cluster


def _settle(cluster: Cluster, passes: int = 12) -> None:
    for _ in range(passes):
        cluster.step()
        cluster.now += timedelta(seconds=5)


def _fail(cluster: Cluster, *names: str) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.now += timedelta(seconds=15)
    _settle(cluster)


def test_one_covered_failure_keeps_the_world_and_names_a_node_that_serves() -> None:
    cluster = _running(6)
    spares = cluster.held(NodeRole.SPARE)
    _fail(cluster, "n00")
    assert cluster.status.world_size == 4
    assert len(cluster.held(NodeRole.ACTIVE)) == 4 and len(cluster.held(NodeRole.SPARE)) == 1
    (entry,) = cluster.status.failures
    assert entry.replaced_by in spares and entry.replaced_by in cluster.held(NodeRole.ACTIVE)


def test_two_covered_failures_do_not_halve_the_job_and_a_free_node_refills_a_spare() -> None:
    cluster = _running(7)  # one free node beside the pool
    _fail(cluster, "n00", "n01")
    assert cluster.status.world_size == 4
    assert len(cluster.held(NodeRole.ACTIVE)) == 4
    assert len(cluster.held(NodeRole.SPARE)) == 1  # the free node, claimed as a spare
    replaced = {e.replaced_by for e in cluster.status.failures}
    assert replaced <= set(cluster.held(NodeRole.ACTIVE)) and None not in replaced


def test_a_pool_that_cannot_make_its_world_is_still_formed_by_the_admission_rule() -> None:
    cluster = _running(6)
    _fail(cluster, "n00", "n01", "n02")  # 3 places lost, 2 spares, no free node: 3 healthy
    assert cluster.status.world_size == 2  # min actives, then the spares
    assert len(cluster.held(NodeRole.SPARE)) == 1
