"""``nodes.max`` lowered while the breaker holds failures: automatic action is paused, so the
resize waits — no worker is stopped (those on the held nodes are left alone, as the breaker
promises) and no node is given back. Once the breaker clears, the gang restarts at the new
size on healthy nodes; the held nodes are never kept as actives while healthy ones go back."""

from __future__ import annotations

from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import DeletePod, ReleaseNode
from tests.core.builders import events, with_ready
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import (
    _edit,
    _set_train_nodes,
    _training,
)


def test_the_resize_waits_for_the_breaker_and_then_keeps_healthy_nodes() -> None:
    cluster = _training(spares=1, count=8)
    actives = cluster.held(NodeRole.ACTIVE)
    workers = sorted(p.name for p in cluster.running())
    for name in actives[:2]:  # 2 of a pool of 5 down together: the breaker trips
        cluster.nodes[name] = with_ready(
            cluster.nodes[name], False, cluster.now - timedelta(0, 600)
        )
    cluster.settle()
    assert cluster.status.conditions and [
        c.status for c in cluster.status.conditions if c.type == "MassFailure"
    ] == ["True"]

    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(2, 2))
    cluster.advance(5)
    plans = cluster.settle()
    acted = [a for p in plans for a in p.actions if isinstance(a, DeletePod | ReleaseNode)]
    assert acted == []  # paused: nothing stopped, nothing given back
    assert sorted(p.name for p in cluster.running()) == workers
    assert cluster.held(NodeRole.ACTIVE) == actives

    for name in actives[:2]:  # the rack comes back: the breaker clears, the resize happens
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.advance(5)
    plans = cluster.settle()
    said = [e for p in plans for e in events(p)]
    assert "MassFailureCleared" in said and "PoolShrinking" in said
    assert cluster.status.state == JobState.RUNNING and cluster.status.world_size == 2
    assert len(cluster.held(NodeRole.ACTIVE)) == 2 and len(cluster.held(NodeRole.SPARE)) == 1
    assert cluster.status.failures == [] and cluster.status.restarts == 0
    held = cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)
    assert all(cluster.nodes[n].ready for n in held)
