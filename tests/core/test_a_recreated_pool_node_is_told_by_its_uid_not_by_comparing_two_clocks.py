"""A pool node deleted and recreated under its name is told from the node the job held by its
object's identity (``metadata.uid``, remembered in ``status.pool.uids`` as each pass read it),
not by comparing two clocks. Before, it was a new object only when its ``creationTimestamp``
(the API server's clock) was later than ``accounting.accountedAt`` (the operator's): with the
operator's clock ahead, or a node view that lagged (the pass that last wrote the status still
saw the old node while the new one already existed), the recreated node looked like one the
job had released itself, and the deletion of a node the job ran on left no ``NodeDeleted``
entry, no event, and no replacement named.

A status written before the identities were remembered (an upgrade) is still read by the
creation time, and a node the job released itself (same object) is never a deletion, even
when the status write that dropped it was lost."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import NodeRole
from phased.core.decide import decide
from phased.core.model import EmitEvent
from tests.core.builders import SETTINGS, Cluster, events, node, nodes, phase, spec

TRAIN = spec(phase("train", 2, 2), spares=1)


def _running() -> Cluster:
    c = Cluster(TRAIN, {n.name: n for n in nodes("h", 3)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    return c


def test_the_pool_remembers_the_identity_of_each_node_it_holds():
    c = _running()
    assert c.status.pool.uids == {n: c.nodes[n].uid for n in ("h00", "h01", "h02")}


def test_a_node_recreated_while_the_operators_clock_runs_ahead_is_a_deleted_node():
    c = _running()
    c.advance(300)
    c.step()
    c.advance(10)
    # The API server's clock is two minutes behind the operator's: the new object's creation
    # reads earlier than the accountedAt of the pass before it.
    c.nodes["h00"] = replace(node("h00"), created=c.now - timedelta(seconds=120))
    c.advance(20)
    plan = c.step()
    assert [(f.node, f.reason) for f in plan.status.failures] == [("h00", "NodeDeleted")]
    assert "NodeFailed" in events(plan)
    assert plan.status.failures[0].replaced_by == "h02"


def test_a_node_recreated_before_a_pass_whose_node_view_lagged_is_a_deleted_node():
    c = _running()
    c.advance(300)
    recreated = replace(node("h01"), created=c.now)
    c.advance(5)
    c.step()  # the view still shows the old h01: this pass writes h01 in the pool again
    c.nodes["h01"] = recreated  # the view catches up
    c.advance(5)
    plan = c.step()
    assert [(f.node, f.reason) for f in plan.status.failures] == [("h01", "NodeDeleted")]


def test_a_status_from_before_the_identities_were_remembered_is_read_by_creation_time():
    c = _running()
    c.status = c.status.model_copy(update={"pool": c.status.pool.model_copy(update={"uids": {}})})
    c.advance(300)
    c.nodes["h00"] = replace(node("h00"), created=c.now)
    c.advance(30)
    plan = c.step()
    assert [(f.node, f.reason) for f in plan.status.failures] == [("h00", "NodeDeleted")]


def test_a_released_node_is_no_deletion_whatever_the_clocks_say():
    c = _running()
    before = c.status  # lists h02 as a spare
    c.the_spec = spec(phase("train", 2, 2), spares=0)  # h02 is given back
    c.advance(30)
    c.step()
    assert "h02" not in c.held(NodeRole.SPARE)
    # The status write that said so was lost, and the node's creation reads later than the
    # lost pass's accountedAt (the API server's clock ahead): still the same object.
    c.status = before
    c.nodes["h02"] = replace(c.nodes["h02"], created=c.now + timedelta(hours=1))
    c.advance(30)
    again = decide(c.snapshot(), SETTINGS, c.now)
    assert again.status.failures == []
    assert not [a for a in again.actions if isinstance(a, EmitEvent) and a.reason == "NodeFailed"]
