"""A worker not placed yet waits for the job's active nodes no worker of its generation is on.
While one of them is not Ready — held by the breaker, or in trouble within its grace — the
worker is not stuck Pending: the scheduler has nowhere else to put it, and the breaker keeps
that place for it. Its ``pendingGrace`` runs from when such a node was Ready again, when that
is after the worker was made. Before, a rack going dark while a generation was being placed
made its unplaced workers a stuck start ``pendingGrace`` after they were made, however long
the breaker held: a gang restart while the breaker held, a restart counted and the phase's
``pendingRestarts`` retry spent on a network outage — and, with the retries spent, the job
failed as ``WorkersStuckPending``."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import DeletePod, PodPhase
from tests.core.builders import Cluster, events, node, of_type, phase, spec, with_ready

NOT_READY_GRACE = 30
PENDING_GRACE = 600


def _placing_while_a_rack_goes_dark() -> tuple[Cluster, list[str]]:
    """The generation is made; before the scheduler places it, three of the six active nodes
    go dark; the workers for the three others are placed, and the breaker trips."""
    nodes = {f"n{i}": node(f"n{i}") for i in range(8)}
    cluster = Cluster(spec(phase("train", 4, 6), spares=1), nodes)
    cluster.step()  # the pool is claimed
    cluster.apply(cluster.decide())  # the workers are made, Pending
    assert len(cluster.pods) == 6
    dark = cluster.held(NodeRole.ACTIVE)[:3]
    for name in dark:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.schedule()
    assert len(cluster.running()) == 3
    cluster.advance(NOT_READY_GRACE + 1)
    plan = cluster.step()
    assert "MassFailure" in events(plan)
    return cluster, dark


def _hold(cluster: Cluster, seconds: int) -> list[str]:
    said: list[str] = []
    for _ in range(seconds // 120):
        cluster.advance(120)
        plan = cluster.step()
        said += events(plan)
        assert of_type(plan, DeletePod) == []
    return said


def test_workers_waiting_for_held_nodes_are_not_a_stuck_start_however_long_it_holds() -> None:
    cluster, dark = _placing_while_a_rack_goes_dark()
    said = _hold(cluster, 3 * PENDING_GRACE)
    assert "WorkersStuckPending" not in said and "WorkersRestarted" not in said
    assert cluster.status.state != JobState.FAILED
    assert cluster.status.restarts == 0 and cluster.status.phases[0].pending_restarts == 0
    for name in dark:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.advance(5)
    plans = cluster.settle()
    said = [e for plan in plans for e in events(plan)]
    assert "MassFailureCleared" in said and "WorkersStuckPending" not in said
    cluster.advance(10)
    cluster.step()  # the workers placed on the nodes back are Running
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.restart_generation == 0 and cluster.status.restarts == 0
    assert cluster.status.phases[0].pending_restarts == 0
    assert sorted(p.node_name or "" for p in cluster.running())[:3] == dark


def test_their_grace_runs_from_when_the_held_nodes_were_ready_again() -> None:
    cluster, dark = _placing_while_a_rack_goes_dark()
    _hold(cluster, 2 * PENDING_GRACE)
    for name in dark:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.advance(5)
    cluster.apply(cluster.decide())  # the breaker lets go; the workers are still not placed
    cluster.advance(PENDING_GRACE - 60)
    plan = cluster.decide()
    assert "WorkersStuckPending" not in events(plan)
    cluster.advance(120)
    plan = cluster.decide()
    assert "WorkersStuckPending" in events(plan)
    unplaced = [p for p in cluster.pods.values() if p.phase == PodPhase.PENDING]
    assert len(unplaced) == 3
