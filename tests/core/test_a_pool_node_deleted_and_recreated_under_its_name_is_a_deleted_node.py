"""A pool node deleted and re-created under the same name (a cloud's auto-repair replaces the
machine and keeps the name; or the operator was away while it happened) is a deleted node,
as if the gap between the two had been seen: a ledger entry ``NodeDeleted``, a ``NodeFailed``
event, the spare promoted as its replacement. The new Node object is a stranger: nothing is
written on it. A node the job gave back itself is no failure, even when the status that
said so was lost."""

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.decide import decide
from phased.core.model import EmitEvent, JobRef, QuarantineNode, SetNodeRole
from tests.core.builders import SETTINGS, Cluster, events, node, nodes, of_type, owned, phase, spec

TRAIN = spec(phase("train", 2, 2), spares=1)


def _running() -> Cluster:
    c = Cluster(TRAIN, {n.name: n for n in nodes("h", 3)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    return c


def test_an_active_node_recreated_under_its_name_is_recorded_and_answered_as_deleted():
    c = _running()
    c.advance(300)
    c.nodes["h00"] = replace(node("h00"), created=c.now)  # a new object: no marks, just made
    c.advance(30)
    plan = c.step()
    assert [(f.node, f.reason, f.cordoned) for f in plan.status.failures] == [
        ("h00", "NodeDeleted", None)
    ]
    assert "NodeFailed" in events(plan)
    assert plan.status.failures[0].replaced_by == "h02"
    assert of_type(plan, QuarantineNode) == []
    assert "h00" not in [a.node for a in of_type(plan, SetNodeRole)]


def test_a_spare_recreated_under_its_name_is_a_spares_deletion_that_interrupts_nothing():
    c = _running()
    c.advance(300)
    c.nodes["h02"] = replace(node("h02"), created=c.now)
    c.advance(30)
    plan = c.step()
    [entry] = plan.status.failures
    assert (entry.node, entry.reason) == ("h02", "NodeDeleted")
    assert entry.resumed == entry.detected  # nothing was interrupted
    assert c.status.restart_generation == 0


def test_a_node_the_job_released_is_no_failure_even_when_that_status_write_was_lost():
    c = _running()
    before = c.status  # lists h02 as a spare
    c.the_spec = spec(phase("train", 2, 2), spares=0)  # spares lowered: h02 is given back
    c.advance(30)
    plan = c.step()
    assert "h02" not in c.held(NodeRole.SPARE)
    c.status = before  # ... and the status write that said so was lost
    c.advance(30)
    again = decide(c.snapshot(), SETTINGS, c.now)
    assert again.status.failures == []
    assert not [a for a in again.actions if isinstance(a, EmitEvent) and a.reason == "NodeFailed"]
    assert plan.status.failures == []


def test_a_recreated_node_another_job_claimed_first_is_still_a_deleted_node():
    c = _running()
    c.advance(300)
    fresh = replace(node("h00"), created=c.now)
    c.nodes["h00"] = owned(fresh, NodeRole.ACTIVE, JobRef("ml", "other", "uid-other"))
    c.advance(30)
    plan = c.step()
    assert [(f.node, f.reason) for f in plan.status.failures] == [("h00", "NodeDeleted")]
    assert "h00" not in [
        getattr(a, "node", None) for a in plan.actions if not isinstance(a, EmitEvent)
    ]
