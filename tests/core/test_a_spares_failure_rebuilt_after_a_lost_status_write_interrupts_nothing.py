"""A spare's failure interrupts no worker: its ledger entry is resumed at detection, with no
interruption. When the status write of the pass that quarantined it was lost, the entry is
rebuilt from the node's quarantine note on the next pass, and the status that pass reads
(the last one written) lists the node among the spares: the rebuilt entry is resumed at
detection too. Before, it was rebuilt open, so the job charged the spare's whole
``notReadyGrace`` and more to the interruption budget while its workers trained on, and a
job recovering from another failure meanwhile was charged from the spare's detection."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from tests.core.builders import Cluster, nodes, phase, spec, with_ready


def _spare_failed(lose: bool) -> Cluster:
    cluster = Cluster(spec(phase("train", 2, 2), spares=2), {n.name: n for n in nodes("h", 5)})
    cluster.settle()
    cluster.advance(60)
    spare = cluster.held(NodeRole.SPARE)[0]
    cluster.nodes[spare] = with_ready(cluster.nodes[spare], False, cluster.now)
    cluster.advance(301)
    before = cluster.status
    cluster.step()
    assert cluster.held(NodeRole.QUARANTINED) == [spare]
    if lose:
        cluster.status = before  # the write after the quarantine never landed
    cluster.advance(5)
    cluster.settle()
    return cluster


def test_the_rebuilt_entry_of_a_spare_is_resumed_at_its_detection() -> None:
    cluster = _spare_failed(lose=True)
    (entry,) = cluster.status.failures
    assert entry.resumed == entry.detected and entry.interruption_seconds == 0.0
    assert cluster.status.interruption.used_seconds == 0.0


def test_it_is_the_entry_the_written_pass_would_have_kept() -> None:
    kept, rebuilt = _spare_failed(lose=False), _spare_failed(lose=True)
    (a,), (b,) = kept.status.failures, rebuilt.status.failures
    assert (a.node, a.detected, a.resumed) == (b.node, b.detected, b.resumed)
    assert kept.status.interruption.used_seconds == rebuilt.status.interruption.used_seconds
