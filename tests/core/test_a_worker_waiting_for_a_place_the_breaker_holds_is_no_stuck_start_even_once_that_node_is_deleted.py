"""A worker not placed yet waits for the places the breaker holds even when their Node
objects are gone: a held node keeps its place, deleted or not, so the worker is not a stuck
start while the breaker holds. Before, only the nodes that still existed were looked at: a
generation being placed as three of its nodes were deleted had its unplaced workers judged
stuck ``pendingGrace`` after they were made, though the breaker held the deleted nodes'
places for a person's proceed — a restart counted and the phase's ``pendingRestarts``
retry spent, then the job failed as ``WorkersStuckPending``."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import DeletePod
from phased.core.times import format_time
from tests.core.builders import Cluster, events, node, of_type, phase, spec

PENDING_GRACE = 600


def _placing_while_nodes_are_deleted() -> tuple[Cluster, list[str]]:
    """The generation is made; before the scheduler places it, three of the six active
    nodes are deleted; the workers for the three others are placed, and the breaker trips."""
    nodes = {f"n{i}": node(f"n{i}") for i in range(8)}
    cluster = Cluster(spec(phase("train", 4, 6), spares=1), nodes)
    cluster.step()  # the pool is claimed
    cluster.apply(cluster.decide())  # the workers are made, Pending
    assert len(cluster.pods) == 6
    gone = cluster.held(NodeRole.ACTIVE)[:3]
    for name in gone:
        del cluster.nodes[name]
    cluster.schedule()
    assert len(cluster.running()) == 3
    cluster.advance(1)
    plan = cluster.step()
    assert "MassFailure" in events(plan)
    assert sorted(h.node for h in cluster.status.breaker.held) == gone
    return cluster, gone


def test_workers_waiting_for_deleted_held_nodes_are_not_a_stuck_start() -> None:
    cluster, gone = _placing_while_nodes_are_deleted()
    said: list[str] = []
    for _ in range(3 * PENDING_GRACE // 120):
        cluster.advance(120)
        plan = cluster.step()
        said += events(plan)
        assert of_type(plan, DeletePod) == []
    assert "WorkersStuckPending" not in said and "WorkersRestarted" not in said
    assert cluster.status.state == JobState.RECOVERING
    assert cluster.status.restarts == 0 and cluster.status.phases[0].pending_restarts == 0
    assert sorted(h.node for h in cluster.status.breaker.held) == gone


def test_a_proceed_then_answers_the_deleted_nodes_and_the_job_runs_again() -> None:
    cluster, gone = _placing_while_nodes_are_deleted()
    cluster.advance(3 * PENDING_GRACE)
    cluster.step()
    cluster.annotations = {labels.ANNOTATION_PROCEED: format_time(cluster.now)}
    for _ in range(4):
        cluster.advance(40)
        cluster.settle()
    assert sorted(f.node for f in cluster.status.failures) == gone
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.phases[0].pending_restarts == 0
