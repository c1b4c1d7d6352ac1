"""A node the job holds that a person relabels so that it no longer matches the operator's
``nodeSelector`` is still the job's (it carries the job's marks, and the operator still sees
it), and it is given back cleanly: released with its marks removed, its worker moved to a
spare, said with a ``NodeLeftSelector`` event — not taken for a deleted node (no ledger
entry, no replacement of a failure). A node out of the selector is never claimed. A node in
trouble is answered as a failure first, nothing moves while the breaker holds, and a healed
quarantined node out of the selector is released, not made a spare again."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import (
    ClaimNode,
    DeletePod,
    EmitEvent,
    NodeInfo,
    PodPhase,
    ReleaseNode,
    SetNodeRole,
)
from phased.core.settings import Settings
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

SELECTED = Settings(node_selector="pool=gpu")
TRAIN = spec(phase("train", 2, 2), spares=1)


def _in_pool(n: NodeInfo, pool: str = "gpu") -> NodeInfo:
    return replace(n, labels={**n.labels, "pool": pool})


def _running(free: int = 1, the_spec=TRAIN) -> Cluster:  # type: ignore[no-untyped-def]
    """h00, h01 active and running, h02 the spare, ``free`` more selected nodes."""
    c = Cluster(the_spec, {n.name: _in_pool(n) for n in nodes("h", 3 + free)}, settings=SELECTED)
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    assert len(c.running()) == 2
    return c


def _relabel(c: Cluster, name: str) -> None:
    """A person takes the node back: ``kubectl label node <name> pool=cpu --overwrite``."""
    c.nodes[name] = _in_pool(c.nodes[name], "cpu")


def _settle(c: Cluster) -> None:
    for _ in range(12):
        c.advance(30)
        plan = c.step()
        if not any(not isinstance(a, EmitEvent) for a in plan.actions):
            return
    raise AssertionError("not quiet")


def _said(c: Cluster, reason: str) -> list[str]:
    return [a.message for a in c.log if isinstance(a, EmitEvent) and a.reason == reason]


def _unmarked(node: NodeInfo) -> bool:
    return not any(k.startswith(labels.PREFIX) for k in node.labels) and not any(
        t.key.startswith(labels.PREFIX) for t in node.taints
    )


def test_an_active_node_relabelled_out_is_released_and_its_worker_moves_to_the_spare() -> None:
    c = _running(free=1)
    worker = next(p.name for p in c.pods.values() if p.node_name == "h00")
    _relabel(c, "h00")
    c.advance(30)
    plan = c.step()
    assert ReleaseNode("h00") in plan.actions
    assert next(a.name for a in plan.actions if isinstance(a, DeletePod)) == worker
    promoted = [a for a in plan.actions if isinstance(a, SetNodeRole)]
    assert [(a.node, a.role) for a in promoted] == [("h02", NodeRole.ACTIVE)]
    _settle(c)
    assert _unmarked(c.nodes["h00"])
    assert c.held(NodeRole.ACTIVE) == ["h01", "h02"] and c.held(NodeRole.SPARE) == ["h03"]
    assert sorted(p.node_name or "" for p in c.running()) == ["h01", "h02"]
    assert c.status.state == JobState.RUNNING
    # Not a failure: no ledger entry, no NodeFailed, no restart budget spent.
    assert c.status.failures == [] and not _said(c, "NodeFailed")
    assert c.status.restarts == 1 and c.status.worker_restarts == 0
    (said,) = _said(c, "NodeLeftSelector")
    assert "h00" in said and "pool=gpu" in said
    assert "h00" not in c.status.pool.active + c.status.pool.spares


def test_a_spare_relabelled_out_is_released_and_a_selected_free_node_replaces_it() -> None:
    c = _running(free=1)
    _relabel(c, "h02")
    _settle(c)
    assert _unmarked(c.nodes["h02"])
    assert c.held(NodeRole.SPARE) == ["h03"]
    assert c.status.restart_generation == 0 and len(c.running()) == 2  # nothing restarted
    assert c.status.failures == [] and len(_said(c, "NodeLeftSelector")) == 1


def test_a_node_out_of_the_selector_is_never_claimed_even_unmarked() -> None:
    c = _running(free=0)
    c.nodes["x00"] = _in_pool(nodes("x", 1)[0], "cpu")  # free, unmarked, of the type
    _relabel(c, "h02")  # the spare leaves: the job wants another spare
    before = len(c.log)
    _settle(c)
    assert ReleaseNode("h02") in c.log[before:]
    assert not [a for a in c.log[before:] if isinstance(a, ClaimNode)]
    assert c.held(NodeRole.SPARE) == []
    assert c.status.failures == []


def test_a_relabelled_node_in_trouble_is_answered_as_a_failure_first() -> None:
    c = _running(free=1)
    _relabel(c, "h00")
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    c.advance(1)
    c.step()  # within its grace: a suspect, kept for failure handling
    assert "h00" in c.held(NodeRole.ACTIVE) and not _said(c, "NodeLeftSelector")
    c.advance(600)  # past notReadyGrace
    _settle(c)
    assert [f.node for f in c.status.failures] == ["h00"]
    assert c.held(NodeRole.QUARANTINED) == ["h00"]  # a broken node keeps its quarantine


def test_nothing_moves_while_the_breaker_holds_failures() -> None:
    c = _running(free=1)
    # Both actives go dark at once: the breaker trips and holds them.
    for name in ("h00", "h01"):
        c.nodes[name] = with_ready(c.nodes[name], False, c.now)
    c.advance(600)
    c.step()
    assert c.status.breaker.held
    _relabel(c, "h02")
    c.advance(30)
    plan = c.step()
    assert not [a for a in plan.actions if isinstance(a, ReleaseNode)]
    assert "h02" in c.held(NodeRole.SPARE)


def test_a_healed_quarantined_node_out_of_the_selector_is_released_not_made_a_spare() -> None:
    returning = spec(
        phase("train", 2, 2),
        spares=1,
        failurePolicy={"nodeReturn": "ReturnToSpares", "healthyBeforeReturn": "10m"},
    )
    c = _running(free=0, the_spec=returning)
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    c.advance(600)
    _settle(c)
    assert c.held(NodeRole.QUARANTINED) == ["h00"] and c.held(NodeRole.SPARE) == []
    _relabel(c, "h00")
    c.nodes["h00"] = with_ready(c.nodes["h00"], True, c.now)
    c.advance(3600)
    _settle(c)
    returned = [a for a in c.log if isinstance(a, EmitEvent) and a.reason == "NodeReturned"]
    assert not returned  # not made a spare: uncordoned and released to the cluster
    assert ReleaseNode("h00") in c.log
    assert "h00" not in c.held(NodeRole.SPARE) + c.held(NodeRole.ACTIVE)
    assert not c.nodes["h00"].unschedulable and not c.nodes["h00"].owner_uid


def test_without_a_selector_every_node_is_in_scope() -> None:
    c = Cluster(TRAIN, {n.name: n for n in nodes("h", 4)})
    c.settle()
    c.nodes["h00"] = _in_pool(c.nodes["h00"], "cpu")
    _settle(c)
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"]
    assert all(p.phase == PodPhase.RUNNING for p in c.running())
