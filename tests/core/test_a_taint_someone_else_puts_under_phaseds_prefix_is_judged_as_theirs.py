"""Phased's own taints are three — ``phased.dev/pool``, ``phased.dev/spare`` and
``phased.dev/quarantined`` — not every key under ``phased.dev/``: an admin who keys their own
taints under that prefix (``phased.dev/maintenance``, beside a ``phased.dev/pool=gpu``
selector label) put them there, and a node the job holds that carries one its workers do
not tolerate is judged as under any taint of someone else's: never promoted, given back
once no worker runs there (``TaintedNodeReleased``), the taint kept. Before, such a spare
was promoted and the worker waited Pending under the taint, and the node was never given
back."""

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.model import EmitEvent, SetNodeRole, Taint
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

ADMINS = Taint("phased.dev/maintenance", "firmware", "NoSchedule")


def _running() -> Cluster:
    c = Cluster(spec(phase("train", 2, 2), spares=1), {n.name: n for n in nodes("h", 4)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    return c


def _settle(c: Cluster) -> None:
    for _ in range(12):
        c.advance(30)
        plan = c.step()
        if not any(not isinstance(a, EmitEvent) for a in plan.actions):
            return
    raise AssertionError("not quiet")


def test_a_spare_carrying_an_admins_taint_under_the_prefix_is_not_promoted_and_leaves():
    c = _running()
    c.nodes["h02"] = replace(c.nodes["h02"], taints=(*c.nodes["h02"].taints, ADMINS))
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    c.advance(600)  # past notReadyGrace
    _settle(c)
    promoted = [a.node for a in c.log if isinstance(a, SetNodeRole) and a.role == NodeRole.ACTIVE]
    assert "h02" not in promoted
    assert "h02" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)
    assert c.nodes["h02"].taints == (ADMINS,)  # Phased's marks gone, the admin's kept
    said = [a.message for a in c.log if isinstance(a, EmitEvent)]
    assert any("h02" in m and "phased.dev/maintenance:NoSchedule" in m for m in said)
    assert sorted(p.node_name or "" for p in c.running()) == ["h01", "h03"]


def test_phaseds_own_taints_on_the_nodes_it_holds_give_nothing_back():
    c = _running()
    _settle(c)
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    assert not [a for a in c.log if getattr(a, "reason", "") == "TaintedNodeReleased"]
