"""A running generation's worker the scheduler has not placed yet waits for no grace when its
node falls ill within it: the node trades places with a healthy spare and the worker is
placed there. A worker already on the ill node waits for the grace, as before."""

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.model import CreatePod, DeletePod, PodPhase, SetNodeRole
from tests.core.builders import Cluster, events, nodes, of_type, phase, spec, with_ready

A, S = NodeRole.ACTIVE, NodeRole.SPARE


def _running(scope: str = "Gang") -> Cluster:
    the_spec = spec(
        phase("train", 2, 2),
        spares=2,
        failurePolicy={"notReadyGrace": "30s", "restartScope": scope},
        launcher={"type": "Torchrun", "rendezvous": "C10d" if scope == "Worker" else "Static"},
    )
    c = Cluster(the_spec, {n.name: n for n in nodes("h", 4)})
    c.settle()
    assert len(c.running()) == 2
    return c


def _unplaced_on_ill_node(c: Cluster, rank: int) -> str:
    """The worker of ``rank`` back to unplaced (Pending, no node), as when its node went
    NotReady before the scheduler bound it; that node is now NotReady. Returns the node."""
    (worker,) = [p for p in c.pods.values() if p.rank == rank]
    ill = worker.node_name
    assert ill is not None
    c.pods[worker.name] = replace(worker, node_name=None, phase=PodPhase.PENDING)
    c.nodes[ill] = with_ready(c.nodes[ill], False, c.now)
    c.advance(1)
    return ill


def test_the_ill_node_trades_places_with_a_spare_and_the_worker_runs_there_at_once():
    c = _running()
    ill = _unplaced_on_ill_node(c, 0)
    plan = c.step()
    assert "TroubledNodeSwapped" in events(plan)
    assert of_type(plan, DeletePod) == [] and of_type(plan, CreatePod) == []
    roles = {a.node: a.role for a in of_type(plan, SetNodeRole)}
    assert roles[ill] == S and list(roles.values()).count(A) == 1
    assert plan.status.restarts == 0 and plan.status.failures == []
    # The scheduler places the waiting worker on the node that took the ill one's place.
    assert len(c.running()) == 2 and ill not in {p.node_name for p in c.running()}
    assert ill in c.held(S)


def test_the_ill_node_fails_as_a_spare_when_its_grace_runs_out_and_nothing_restarts():
    c = _running()
    ill = _unplaced_on_ill_node(c, 1)
    c.settle()
    c.advance(60)
    c.settle()
    (entry,) = c.status.failures
    assert entry.node == ill and entry.resumed == entry.detected  # a spare's: nothing stopped
    assert c.status.restarts == 0 and all(p.generation == 0 for p in c.running())


def test_with_restart_scope_worker_too():
    c = _running("Worker")
    ill = _unplaced_on_ill_node(c, 1)
    plan = c.step()
    assert "TroubledNodeSwapped" in events(plan)
    assert len(c.running()) == 2 and ill not in {p.node_name for p in c.running()}


def test_a_worker_already_on_the_ill_node_waits_for_the_grace():
    c = _running()
    on = sorted(p.node_name for p in c.running() if p.node_name)[0]
    c.nodes[on] = with_ready(c.nodes[on], False, c.now)
    c.advance(1)
    plan = c.step()
    assert "TroubledNodeSwapped" not in events(plan)
    assert of_type(plan, SetNodeRole) == [] and of_type(plan, DeletePod) == []
    assert on in c.held(A)


def test_no_swap_without_a_healthy_spare():
    c = _running()
    for spare in c.held(S):
        c.nodes[spare] = with_ready(c.nodes[spare], False, c.now)
    ill = _unplaced_on_ill_node(c, 0)
    plan = c.step()
    assert "TroubledNodeSwapped" not in events(plan)
    assert ill in c.held(A)
