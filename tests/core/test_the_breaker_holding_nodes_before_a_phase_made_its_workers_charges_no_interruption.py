"""The breaker holding active nodes stops training only once the running phase has made its
workers. Held at a phase boundary — the workers of the phase before done, the next phase's
not made yet (none is made while it holds) — nothing trains and nothing stands still: the
hold opens no stop, as a failure answered before a phase's first workers were made is
resumed at its detection. Before, the hold was charged from when the nodes went dark until
the next phase's workers ran, though no worker had been interrupted."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.times import format_time
from tests.core.builders import Cluster, events, node, phase, spec, with_ready

NOT_READY_GRACE = 30


def _at_the_boundary() -> tuple[Cluster, list[str]]:
    """The warm-up's workers all succeed and three of its six active nodes go dark at once:
    the pass that moves to the next phase finds them failed, and the breaker trips."""
    the_spec = spec(phase("warm", 4, 6), phase("train", 4, 6), spares=1)
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(8)})
    cluster.settle()
    assert cluster.status.phase == "warm" and cluster.status.state == JobState.RUNNING
    cluster.advance(600)
    dark = cluster.held(NodeRole.ACTIVE)[:3]
    cluster.finish_workers("warm")
    for name in dark:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(NOT_READY_GRACE + 1)
    plan = cluster.step()
    assert "PhaseCompleted" in events(plan) and "MassFailure" in events(plan)
    assert cluster.status.phase == "train"
    assert sorted(h.node for h in cluster.status.breaker.held) == dark
    return cluster, dark


def _no_interruption(cluster: Cluster) -> None:
    assert cluster.status.interruption.stops == []
    assert cluster.status.interruption.used_seconds == 0


def test_a_hold_at_a_boundary_charges_nothing_while_it_holds_or_after_it_clears() -> None:
    cluster, dark = _at_the_boundary()
    _no_interruption(cluster)
    for name in dark:  # they come back one by one
        cluster.advance(60)
        cluster.step()
        _no_interruption(cluster)
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.advance(10)
    plan = cluster.step()
    assert "MassFailureCleared" in events(plan) and "PhaseStarted" in events(plan)
    cluster.advance(10)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.failures == [] and cluster.status.restarts == 0
    _no_interruption(cluster)


def test_a_hold_at_a_boundary_released_by_a_person_charges_nothing() -> None:
    cluster, dark = _at_the_boundary()
    cluster.advance(120)
    cluster.annotations = {labels.ANNOTATION_PROCEED: format_time(cluster.now)}
    plan = cluster.step()
    assert "MassFailureReleased" in events(plan)
    cluster.advance(10)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert sorted(e.node for e in cluster.status.failures) == dark
    assert all(e.interruption_seconds == 0 for e in cluster.status.failures)
    assert cluster.status.restarts == 0
    assert cluster.status.interruption.stops == []
    assert cluster.status.interruption.used_seconds == 0
