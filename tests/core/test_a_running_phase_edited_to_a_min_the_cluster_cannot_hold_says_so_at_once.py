"""A running phase whose ``nodes.min`` is edited beyond every node of its type the cluster
has says so at once: ``CapacityShort`` True with reason ``MinAboveCluster`` and one Warning
event, while the generation runs on untouched. Its next restart could never form the pool,
so it would give the pool up and wait in line; before, nothing was said until the first
failure did just that — a 100-day run stopped by a typo, found out only then. An edit the
cluster can hold (or put back) clears it; the wait, when it comes, is dated from when it
began, not from the edit (``admission.waitTimeout`` counts from there)."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.conditions import find
from phased.core.model import DeletePod
from phased.core.times import parse_time
from tests.core.builders import Cluster, events, node, of_type
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import (
    _edit,
    _set_train_nodes,
    _training,
)


def _edited(lo: int, hi: int) -> tuple[Cluster, list[str]]:
    """Train runs on 4 of the cluster's 6 H100 nodes (1 spare); its nodes edited."""
    cluster = _training(spares=1, count=6)
    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(lo, hi))
    cluster.advance(30)
    plans = cluster.settle()
    assert not any(of_type(p, DeletePod) for p in plans)  # the generation runs on
    assert cluster.status.state == JobState.RUNNING
    return cluster, [r for p in plans for r in events(p)]


def test_a_min_beyond_the_cluster_is_said_at_once_while_the_generation_runs_on() -> None:
    cluster, said = _edited(10, 12)
    cond = find(cluster.status.conditions, "CapacityShort")
    assert cond is not None and cond.status == "True" and cond.reason == "MinAboveCluster"
    assert "nodes.min 10" in cond.message and "6 H100 nodes" in cond.message
    assert said.count("CapacityShort") == 1
    assert cluster.status.waiting_for == {}  # running: it blocks nobody in line
    # Passes that find the same say nothing new.
    cluster.advance(30)
    assert not any("CapacityShort" in events(p) for p in cluster.settle())


def test_an_edit_the_cluster_can_hold_or_put_back_clears_it() -> None:
    cluster, _ = _edited(10, 12)
    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(4, 4))
    cluster.advance(30)
    cluster.settle()
    cond = find(cluster.status.conditions, "CapacityShort")
    assert cond is not None and cond.status == "False"
    # A min above the running world that the cluster has: used at the next generation,
    # nothing to say now.
    cluster, said = _edited(6, 6)
    cond = find(cluster.status.conditions, "CapacityShort")
    assert "CapacityShort" not in said and (cond is None or cond.status == "False")


def test_the_wait_a_restart_then_begins_is_dated_from_the_restart() -> None:
    cluster, _ = _edited(10, 12)
    cluster.advance(3600)
    cluster.settle()
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = node(lost, ready=False, ready_since=cluster.now)
    failed_at = cluster.now
    said: list[str] = []
    for _ in range(4):
        cluster.advance(30)
        said += [r for p in cluster.settle() for r in events(p)]
    assert cluster.status.state == JobState.WAITING
    cond = find(cluster.status.conditions, "CapacityShort")
    assert cond is not None and cond.status == "True" and cond.reason == "NotEnoughNodes"
    assert parse_time(cond.last_transition_time) >= failed_at
    assert "CapacityShort" in said
