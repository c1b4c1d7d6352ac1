"""A node the job holds for a phase that has started, relabelled to another GPU type with all
its GPUs still there (a person, or GPU discovery, rewrote its type labels), can no longer serve
the phase: it is given back to the cluster, not quarantined (nothing failed) — and said, with a
Warning ``NodeTypeChanged`` naming the node and what its type labels say now. An active one
keeps its running worker until the generation ends for another reason (its GPUs serve the
training meanwhile), then leaves when the pool is formed again; a spare leaves at once. Before,
it left the pool silently: a node the job had run on was gone with no event and no word in the
status, and a person found the job on fewer nodes and no reason why.

A node whose type changed before its phase started (a boundary) is no news: it never served
the phase, and released as a misfit it says nothing."""

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.model import EmitEvent, NodeInfo, PodPhase, QuarantineNode, ReleaseNode
from tests.core.builders import H100_LABELS, H200_LABELS, Cluster, nodes, phase, spec


def _running(spares: int = 1) -> Cluster:
    c = Cluster(spec(phase("train", 2, 2), spares=spares), {n.name: n for n in nodes("h", 4)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    return c


def _relabel(n: NodeInfo, new: dict[str, str]) -> NodeInfo:
    kept = {k: v for k, v in n.labels.items() if k not in H100_LABELS}
    return replace(n, labels={**kept, **new})


def _said(c: Cluster, reason: str) -> list[str]:
    return [a.message for a in c.log if isinstance(a, EmitEvent) and a.reason == reason]


def _released(c: Cluster, name: str) -> bool:
    return any(isinstance(a, ReleaseNode) and a.node == name for a in c.log)


def _walk(c: Cluster, seconds: float, steps: int) -> None:
    for _ in range(steps):
        c.advance(seconds)
        c.step()


def test_an_active_node_relabelled_to_another_type_is_said_when_the_next_restart_gives_it_back():
    c = _running()
    c.nodes["h00"] = _relabel(c.nodes["h00"], H200_LABELS)
    _walk(c, 10, 2)
    assert "h00" in c.held(NodeRole.ACTIVE)  # its worker trains on, nothing said yet
    assert not _said(c, "NodeTypeChanged")
    failed = next(p.name for p in c.pods.values() if p.node_name == "h01")
    c.pods[failed] = replace(c.pods[failed], phase=PodPhase.FAILED, exit_code=1)
    _walk(c, 30, 4)
    assert _released(c, "h00")
    [message] = _said(c, "NodeTypeChanged")
    assert "h00" in message and "H200" in message and "H100" in message
    assert c.status.failures == [] and not [a for a in c.log if isinstance(a, QuarantineNode)]
    assert "h00" not in {*c.status.pool.active, *c.status.pool.spares}
    running = {p.node_name for p in c.running() if p.generation == 1}
    assert len(running) == 2 and "h00" not in running  # the gang runs whole without it


def test_a_spare_relabelled_to_no_configured_type_is_given_back_at_once_and_said():
    c = _running()
    c.nodes["h02"] = _relabel(c.nodes["h02"], {})
    _walk(c, 10, 2)
    assert _released(c, "h02")
    [message] = _said(c, "NodeTypeChanged")
    assert "h02" in message and "no configured GPU type" in message
    assert c.held(NodeRole.SPARE) == ["h03"]  # refilled


def test_a_node_whose_type_changed_before_its_phase_started_is_released_without_a_word():
    the_spec = spec(phase("a", 2, 2), phase("b", 2, 2, ["H200"]))
    c = Cluster(the_spec, {n.name: n for n in [*nodes("h", 2), *nodes("g", 2, gpu="H200")]})
    c.settle()
    c.finish_workers("a")
    _walk(c, 10, 4)
    assert c.status.phase == "b"
    assert _released(c, "h00") and _released(c, "h01")
    assert not _said(c, "NodeTypeChanged")
