"""A spare promoted to replace a failed node that falls ill itself before the new workers
were placed is swapped for another spare (``TroubledNodeSwapped``); the failure it was to
answer is then answered by the spare that took its place: the ledger entry's ``replacedBy``
names that node, which carries the ``phased.dev/replaces`` note (so an entry rebuilt after a
lost status write names it too), and the node swapped out carries none. Before, the entry
named as the replacement the node swapped out — one that never ran a worker of the job and
was quarantined a moment later — and the node that did replace it was written nowhere."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.ledger import decode_replaces
from phased.core.model import SetNodeRole
from phased.core.times import format_time
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

POLICY = {"notReadyGrace": "30s", "massFailure": {"maxFailedPercent": 100}}


def _promoted_then_ill() -> tuple[Cluster, str, str]:
    """A failure answered by a spare that goes NotReady before a worker is placed on it:
    the cluster, the failed node and the spare promoted for it."""
    cluster = Cluster(
        spec(phase("train", 4, 4), spares=2, failurePolicy=POLICY),
        {n.name: n for n in nodes("h", 7)},
    )
    cluster.settle()
    cluster.advance(600)
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(31)
    plan = cluster.decide()  # answered: quarantined, a spare promoted, the gang restarted
    cluster.apply(plan)
    (promoted,) = [a.node for a in plan.actions if isinstance(a, SetNodeRole)]
    assert cluster.status.failures[0].replaced_by == promoted
    # The promoted spare goes NotReady before any new worker was placed on it.
    cluster.nodes[promoted] = with_ready(cluster.nodes[promoted], False, cluster.now)
    cluster.advance(5)
    return cluster, lost, promoted


def _answered(cluster: Cluster, lost: str, promoted: str) -> None:
    for _ in range(6):
        cluster.advance(15)
        cluster.settle()

    assert promoted in cluster.held(NodeRole.QUARANTINED)
    first, second = cluster.status.failures
    assert (first.node, second.node) == (lost, promoted)
    taker = first.replaced_by
    assert taker is not None and taker != promoted
    assert taker in cluster.held(NodeRole.ACTIVE)
    assert taker in {p.node_name for p in cluster.running()}
    note = decode_replaces(cluster.nodes[taker].annotations.get(labels.ANNOTATION_REPLACES))
    assert note is not None and note[0] == lost
    assert first.replaced == format_time(note[1])
    assert labels.ANNOTATION_REPLACES not in cluster.nodes[promoted].annotations
    assert first.resumed is not None and len(cluster.running()) == 4


def test_the_failure_is_answered_by_the_spare_that_took_the_ill_replacements_place() -> None:
    cluster, lost, promoted = _promoted_then_ill()
    cluster.settle()
    _answered(cluster, lost, promoted)


def test_a_lost_status_write_after_the_swap_names_the_same_replacement() -> None:
    cluster, lost, promoted = _promoted_then_ill()
    written = cluster.status
    cluster.step()  # the swap lands on the nodes; its status write is lost
    assert any(
        labels.ANNOTATION_REPLACES in n.annotations
        for name, n in cluster.nodes.items()
        if name != promoted
    )
    cluster.status = written
    cluster.settle()
    _answered(cluster, lost, promoted)
