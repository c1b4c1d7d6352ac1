"""A node in trouble within its grace gets no worker of a new generation when a healthy spare
can take its place; and every failure's ledger entry names what replaced it, spare or free."""

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.model import CreatePod, NodeCondition
from tests.core.builders import Cluster, events, nodes, phase, spec, with_ready

A, S, Q = NodeRole.ACTIVE, NodeRole.SPARE, NodeRole.QUARANTINED


def _between_phases(spares: int, free: int, **policy):
    """A two-phase job whose first phase has just finished."""
    the_spec = spec(phase("prep", 2, 2), phase("train", 2, 2), spares=spares, failurePolicy=policy)
    c = Cluster(the_spec, {n.name: n for n in nodes("h", 2 + spares + free)})
    c.settle()
    assert len(c.running()) == 2
    c.finish_workers("prep")
    return c


def _train_nodes(c: Cluster) -> set[str]:
    return {p.node_name for p in c.running() if p.phase_name == "train"}


def test_a_node_going_not_ready_at_a_phase_boundary_trades_places_with_the_spare():
    c = _between_phases(spares=1, free=1)
    troubled = c.held(A)[0]
    c.nodes[troubled] = with_ready(c.nodes[troubled], False, c.now)
    c.advance(1)
    plans = c.settle()
    assert "TroubledNodeSwapped" in [e for p in plans for e in events(p)]
    assert len(_train_nodes(c)) == 2 and troubled not in _train_nodes(c)
    assert troubled in c.held(S)
    assert c.status.failures == []  # nothing has failed yet: within its grace

    c.advance(30)  # the grace runs out: a spare's failure, nothing interrupted
    c.settle()
    (entry,) = c.status.failures
    assert (entry.node, entry.resumed) == (troubled, entry.detected)
    assert troubled in c.held(Q)
    assert len(c.held(S)) == 1  # refilled from the free node
    assert all(p.generation == 0 for p in c.running())


def test_a_node_recovering_within_its_grace_stays_on_as_a_spare():
    c = _between_phases(spares=1, free=0)
    troubled = c.held(A)[0]
    c.nodes[troubled] = with_ready(c.nodes[troubled], False, c.now)
    c.advance(1)
    c.settle()
    c.nodes[troubled] = with_ready(c.nodes[troubled], True, c.now)
    c.advance(60)
    c.settle()
    assert c.held(S) == [troubled]
    assert c.status.failures == []


def test_a_gpu_fault_within_its_grace_is_kept_out_of_the_new_generation_too():
    c = _between_phases(spares=1, free=0, gpuFaultGrace="1m")
    troubled = c.held(A)[1]
    xid = NodeCondition("GPUXidError", "True", c.now, message="XID 79")
    c.nodes[troubled] = replace(c.nodes[troubled], conditions=(*c.nodes[troubled].conditions, xid))
    c.advance(1)
    c.settle()
    assert len(_train_nodes(c)) == 2 and troubled not in _train_nodes(c)
    assert c.held(S) == [troubled]


def test_without_a_spare_the_generation_waits_for_the_grace_and_the_free_node_is_the_replacement():
    c = _between_phases(spares=0, free=1)
    troubled = c.held(A)[0]
    free = next(n for n in c.nodes if n not in c.held(A))
    c.nodes[troubled] = with_ready(c.nodes[troubled], False, c.now)
    c.advance(1)
    plans = c.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, CreatePod)]
    c.advance(30)
    c.settle()
    assert _train_nodes(c) == set(c.held(A)) and free in c.held(A)
    (entry,) = c.status.failures
    assert (entry.node, entry.replaced_by) == (troubled, free)
    assert entry.resumed is not None


def test_a_rack_larger_than_the_spares_is_replaced_entry_by_entry():
    the_spec = spec(
        phase("train", 4, 4),
        spares=1,
        failurePolicy={"massFailure": {"maxFailedPercent": 100}, "restartScope": "Gang"},
    )
    c = Cluster(the_spec, {n.name: n for n in nodes("h", 8)})
    c.settle()
    lost = c.held(A)[:3]
    for name in lost:
        c.nodes[name] = with_ready(c.nodes[name], False, c.now)
    c.advance(31)
    c.settle()
    ledger = c.status.failures
    assert sorted(e.node for e in ledger) == sorted(lost)
    replacements = [e.replaced_by for e in ledger]
    assert None not in replacements and len(set(replacements)) == 3
    assert set(replacements) <= set(c.held(A))
    assert all(e.resumed for e in ledger)
