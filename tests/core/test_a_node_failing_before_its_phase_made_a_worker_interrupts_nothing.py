"""A node that fails before the phase made any worker — found at a boundary, once the last
phase's workers succeeded, or while a pool is formed — interrupted no worker: it is
quarantined and replaced as any failed node, but its ledger entry is resumed at detection.
What follows is the phase's start: waiting in line for its nodes is waiting (counted in the
phase's ``waitingSeconds``), not an interruption. Before, the entry stayed open until the
new generation ran, and a next phase that waited three hours in line for its nodes spent
them from the interruption budget (``InterruptionBudgetExceeded``) and said it was
recovering."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.conditions import ConditionType
from phased.core.times import format_time
from tests.core.builders import Cluster, node, nodes, phase, spec, with_ready

NOT_READY_GRACE = 30


def _boundary(next_min: int) -> tuple[Cluster, str]:
    """Phase a ran on three nodes and a spare; its workers succeed as h00 goes dark, and the
    pass that sees both comes after h00's grace."""
    the_spec = spec(phase("a", 3, 3), phase("b", next_min, next_min), spares=1)
    cluster = Cluster(the_spec, {n.name: n for n in nodes("h", 6)})
    cluster.settle()
    cluster.advance(600)
    cluster.finish_workers("a")
    cluster.nodes["h00"] = with_ready(cluster.nodes["h00"], False, cluster.now)
    detected = format_time(cluster.now)
    cluster.advance(NOT_READY_GRACE + 10)
    return cluster, detected


def test_a_node_failing_at_a_boundary_the_next_phase_starts_past():
    cluster, detected = _boundary(3)
    cluster.settle()
    assert cluster.status.phase == "b" and len(cluster.running()) == 3
    assert cluster.held(NodeRole.QUARANTINED) == ["h00"]
    (entry,) = cluster.status.failures
    assert entry.resumed == detected and entry.interruption_seconds == 0
    assert entry.replaced_by in cluster.held(NodeRole.ACTIVE)
    assert cluster.status.interruption.used_seconds == 0
    assert cluster.status.state == JobState.RUNNING


def test_a_node_failing_at_a_boundary_the_next_phase_then_waits_in_line():
    cluster, detected = _boundary(6)  # five nodes are left: b waits for a sixth
    cluster.settle()
    assert cluster.status.phase == "b" and cluster.status.state == JobState.WAITING
    (entry,) = cluster.status.failures
    assert entry.resumed == detected

    cluster.advance(3 * 3600)
    cluster.settle()
    cluster.nodes["h09"] = node("h09")
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING and len(cluster.running()) == 6
    (entry,) = cluster.status.failures
    assert entry.resumed == detected and entry.interruption_seconds == 0
    assert cluster.status.interruption.used_seconds == 0
    exceeded = [
        c.status
        for c in cluster.status.conditions
        if c.type == ConditionType.INTERRUPTION_BUDGET_EXCEEDED
    ]
    assert exceeded == ["False"]
    assert cluster.status.phases[1].waiting_seconds >= 3 * 3600
