"""A worker not placed yet that waits for an active node under a condition taint the workers
do not tolerate (memory, disk or PID pressure, network unavailable), with no healthy spare
left to trade that node for, is no stuck start: the node's trouble keeps it out, not the
worker. ``WorkersPending`` says why it waits (one ``WorkersWaitingOnNodeCondition``
event), no start retry is spent and no restart made however long the pressure lasts, and
the worker's ``pendingGrace`` runs again from when the condition passed. Before, the wait
was a failed start ``pendingGrace`` after the worker was made: the running peers were
stopped for a new generation that met the same node, and with ``pendingRestarts`` spent
the job failed as ``WorkersStuckPending`` over a node's passing memory pressure. When more
workers wait than there are such nodes, a node free of trouble did not take one either: that
is still a failed start."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.conditions import ConditionType
from phased.core.model import DeletePod, NodeCondition, PodPhase, Taint
from tests.core.builders import Cluster, events, node, phase, spec

MEMORY = Taint("node.kubernetes.io/memory-pressure", "", "NoSchedule")
PENDING_GRACE = 600


def _pressure(cluster: Cluster, name: str, on: bool) -> None:
    n = cluster.nodes[name]
    others = tuple(c for c in n.conditions if c.type != "MemoryPressure")
    cond = NodeCondition("MemoryPressure", "True" if on else "False", cluster.now)
    taints = tuple(t for t in n.taints if t.key != MEMORY.key) + ((MEMORY,) if on else ())
    cluster.nodes[name] = replace(n, conditions=(*others, cond), taints=taints)


def _restarted_beside_a_node_under_pressure() -> Cluster:
    """Three active nodes, no spare; n2 comes under memory pressure, then the worker on n0
    fails: the new generation's worker for n2 cannot be placed."""
    nodes = {f"n{i}": node(f"n{i}") for i in range(3)}
    cluster = Cluster(spec(phase("train", 3, 3)), nodes)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    _pressure(cluster, "n2", True)
    victim = next(p for p in cluster.pods.values() if p.node_name == "n0")
    cluster.pods[victim.name] = replace(victim, phase=PodPhase.FAILED, exit_code=1)
    cluster.advance(1)
    cluster.settle()
    assert cluster.status.restart_generation == 1
    unplaced = [p for p in cluster.pods.values() if p.phase == PodPhase.PENDING]
    assert len(unplaced) == 1 and unplaced[0].node_name is None
    assert {p.node_name for p in cluster.running()} == {"n0", "n1"}
    return cluster


def _condition(cluster: Cluster) -> tuple[str, str, str]:
    cond = next(c for c in cluster.status.conditions if c.type == ConditionType.WORKERS_PENDING)
    return cond.status, cond.reason, cond.message


def test_the_wait_spends_no_retry_however_long_the_pressure_lasts_and_says_why() -> None:
    cluster = _restarted_beside_a_node_under_pressure()
    said: list[str] = []
    for _ in range(3 * PENDING_GRACE // 120):
        cluster.advance(120)
        plan = cluster.step()
        said += events(plan)
        assert not [a for a in plan.actions if isinstance(a, DeletePod)]
    assert "WorkersStuckPending" not in said and "WorkersRestarted" not in said
    assert said.count("WorkersWaitingOnNodeCondition") == 1
    status, reason, message = _condition(cluster)
    assert (status, reason) == ("True", "NodeCondition")
    assert "n2 (node.kubernetes.io/memory-pressure:NoSchedule)" in message
    assert cluster.status.state != JobState.FAILED
    assert cluster.status.restart_generation == 1
    assert cluster.status.phases[0].pending_restarts == 0
    _pressure(cluster, "n2", False)
    cluster.advance(1)
    cluster.settle()
    cluster.step()  # the pass that sees the worker placed and Running
    assert {p.node_name for p in cluster.running()} == {"n0", "n1", "n2"}
    assert _condition(cluster)[:2] == ("False", "Started")
    assert cluster.status.restart_generation == 1 and cluster.status.restarts == 1


def test_its_grace_runs_again_from_when_the_pressure_passed() -> None:
    cluster = _restarted_beside_a_node_under_pressure()
    cluster.advance(2 * PENDING_GRACE)
    cluster.step()
    _pressure(cluster, "n2", False)  # and the worker is still not placed (no scheduling here)
    cluster.advance(PENDING_GRACE - 60)
    assert "WorkersStuckPending" not in events(cluster.decide())
    cluster.advance(120)
    assert "WorkersStuckPending" in events(cluster.decide())


def test_more_workers_waiting_than_nodes_under_pressure_is_a_failed_start() -> None:
    nodes = {f"n{i}": node(f"n{i}") for i in range(3)}
    cluster = Cluster(spec(phase("train", 3, 3)), nodes)
    cluster.step()  # the pool is claimed
    _pressure(cluster, "n2", True)
    cluster.apply(cluster.decide())  # the workers are made; none is placed, n0 and n1 free
    assert [p.node_name for p in cluster.pods.values()] == [None, None, None]
    assert not cluster.held(NodeRole.SPARE)
    cluster.advance(PENDING_GRACE + 1)
    assert "WorkersStuckPending" in events(cluster.decide())


def test_placed_as_the_pressure_passed_its_grace_runs_from_then() -> None:
    cluster = _restarted_beside_a_node_under_pressure()
    cluster.advance(2 * PENDING_GRACE)
    cluster.step()
    _pressure(cluster, "n2", False)
    waiting = next(p for p in cluster.pods.values() if p.phase == PodPhase.PENDING)
    cluster.pods[waiting.name] = replace(waiting, node_name="n2")  # placed; not started yet
    cluster.advance(5)
    plan = cluster.decide()
    assert "WorkersStuckPending" not in events(plan)
    assert cluster.status.state != JobState.FAILED
    cluster.advance(PENDING_GRACE)
    assert "WorkersStuckPending" in events(cluster.decide())
