"""A quarantined node that heals under ``ReturnToSpares`` while the breaker holds failures
is kept (still quarantined) until the breaker lets go: then it rejoins the spares if they
are short of it, or is released. Before, the return judged the spares by their count, a
failed spare the breaker held among them: the healed node was released to the cluster, and
when a person's proceed quarantined the held spare the job was a spare short, with the
node it had just given away the one it needed."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import ReleaseNode
from phased.core.times import format_time
from tests.core.builders import Cluster, nodes, phase, spec, with_ready


def _held_spare_and_a_healed_node() -> tuple[Cluster, str, str]:
    """h0 failed and was quarantined (its spare promoted, another claimed); then the new
    spare failed within the window, which trips the breaker; then h0 healed and stayed
    healthy past ``healthyBeforeReturn`` while the breaker held the spare."""
    cluster = Cluster(
        spec(
            phase("train", 2, 2),
            spares=1,
            failurePolicy={"nodeReturn": "ReturnToSpares", "healthyBeforeReturn": "10m"},
        ),
        {n.name: n for n in nodes("h", 4)},
    )
    cluster.settle()
    first = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[first] = with_ready(cluster.nodes[first], False, cluster.now)
    for _ in range(6):
        cluster.advance(10)
        cluster.settle()
    assert cluster.held(NodeRole.QUARANTINED) == [first]
    [spare] = cluster.held(NodeRole.SPARE)
    cluster.nodes[spare] = with_ready(cluster.nodes[spare], False, cluster.now)
    for _ in range(6):
        cluster.advance(10)
        cluster.settle()
    assert [h.node for h in cluster.status.breaker.held] == [spare]
    cluster.nodes[first] = with_ready(cluster.nodes[first], True, cluster.now)
    cluster.advance(11 * 60)
    cluster.settle()
    return cluster, first, spare


def _released(cluster: Cluster, name: str) -> bool:
    return any(isinstance(a, ReleaseNode) and a.node == name for a in cluster.log)


def test_the_healed_node_is_kept_while_the_breaker_holds_a_failed_spare() -> None:
    cluster, healed, spare = _held_spare_and_a_healed_node()
    assert [h.node for h in cluster.status.breaker.held] == [spare]
    assert cluster.held(NodeRole.QUARANTINED) == [healed]
    assert not _released(cluster, healed)


def test_a_proceed_that_quarantines_the_held_spare_makes_the_healed_node_the_spare() -> None:
    cluster, healed, spare = _held_spare_and_a_healed_node()
    cluster.annotations = {labels.ANNOTATION_PROCEED: format_time(cluster.now)}
    cluster.advance(10)
    cluster.settle()
    assert cluster.held(NodeRole.QUARANTINED) == [spare]
    assert cluster.held(NodeRole.SPARE) == [healed]
    assert not _released(cluster, healed)


def test_a_held_spare_that_recovers_leaves_the_healed_node_to_be_released() -> None:
    cluster, healed, spare = _held_spare_and_a_healed_node()
    cluster.nodes[spare] = with_ready(cluster.nodes[spare], True, cluster.now)
    cluster.advance(10)
    cluster.settle()
    assert not cluster.status.breaker.held
    assert cluster.held(NodeRole.SPARE) == [spare]
    assert _released(cluster, healed)
    assert cluster.nodes[healed].owner_uid is None and not cluster.nodes[healed].unschedulable
