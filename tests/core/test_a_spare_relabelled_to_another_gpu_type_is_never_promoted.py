"""A spare relabelled to another GPU type (a person, or GPU discovery, rewrote its type
labels) can no longer serve the phase: it leaves the pool with a ``NodeTypeChanged`` Warning
before any spare is promoted — also when a node of the pool fails in the same pass (the
relabel and the failure seen together, or the relabel made while the breaker held). The
spare promoted is one of the phase's type, and the ledger names it as the replacement.
Before, the relabelled spare was promoted (``SparePromoted``, ``replacedBy`` naming it),
then released as a misfit in the same pass when the pool was formed again, and another
spare took its place: the ledger named as the failed node's replacement a node the job no
longer held."""

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.model import EmitEvent, NodeInfo, ReleaseNode, SetNodeRole
from tests.core.builders import H100_LABELS, H200_LABELS, Cluster, nodes, phase, spec, with_ready


def _relabel(n: NodeInfo) -> NodeInfo:
    kept = {k: v for k, v in n.labels.items() if k not in H100_LABELS}
    return replace(n, labels={**kept, **H200_LABELS})


def _said(c: Cluster, reason: str, since: int) -> list[str]:
    return [a.message for a in c.log[since:] if isinstance(a, EmitEvent) and a.reason == reason]


def test_a_failure_seen_with_the_relabel_promotes_a_spare_of_the_phases_type() -> None:
    c = Cluster(spec(phase("train", 2, 2), spares=2), {n.name: n for n in nodes("h", 5)})
    c.settle()
    assert (c.held(NodeRole.ACTIVE), c.held(NodeRole.SPARE)) == (["h00", "h01"], ["h02", "h03"])
    before = len(c.log)
    c.nodes["h02"] = _relabel(c.nodes["h02"])  # the spare nearest by name
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    for _ in range(6):
        c.advance(30)
        c.step()

    promoted = [
        a.node for a in c.log[before:] if isinstance(a, SetNodeRole) and a.role == NodeRole.ACTIVE
    ]
    assert promoted == ["h03"]
    assert _said(c, "SparePromoted", before) == ["spare h03 promoted to active, replacing h00"]
    [changed] = _said(c, "NodeTypeChanged", before)
    assert "h02" in changed and "H200" in changed
    assert any(isinstance(a, ReleaseNode) and a.node == "h02" for a in c.log[before:])
    [entry] = c.status.failures
    assert (entry.node, entry.replaced_by) == ("h00", "h03")
    assert c.held(NodeRole.ACTIVE) == ["h01", "h03"]
    assert "h02" not in c.held(NodeRole.SPARE)
    assert sorted(p.node_name or "" for p in c.running()) == ["h01", "h03"]


def test_a_relabelled_spare_alone_never_stands_in_for_the_failed_node() -> None:
    c = Cluster(spec(phase("train", 2, 2), spares=1), {n.name: n for n in nodes("h", 4)})
    c.settle()
    assert (c.held(NodeRole.ACTIVE), c.held(NodeRole.SPARE)) == (["h00", "h01"], ["h02"])
    before = len(c.log)
    c.nodes["h02"] = _relabel(c.nodes["h02"])
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    for _ in range(6):
        c.advance(30)
        c.step()

    assert not any(
        isinstance(a, SetNodeRole) and a.node == "h02" and a.role == NodeRole.ACTIVE
        for a in c.log[before:]
    )
    assert not any("h02" in m for m in _said(c, "SparePromoted", before))
    [entry] = c.status.failures
    assert entry.replaced_by != "h02"
    assert "h02" not in {*c.held(NodeRole.ACTIVE), *c.held(NodeRole.SPARE)}
    assert sorted(p.node_name or "" for p in c.running()) == ["h01", "h03"]
