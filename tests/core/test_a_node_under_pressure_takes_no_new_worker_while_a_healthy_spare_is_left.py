"""A node the job holds that is Ready but tainted by the node controllers for a condition —
memory, disk or PID pressure, network unavailable — which the workers do not tolerate would
leave a new worker Pending until the condition passes. It is no failure (nothing is
quarantined, a worker already running there runs on), but it takes no new worker while a
healthy spare is left: a spare under pressure is promoted last, and an active node under
pressure with no worker bound trades places with a healthy spare before the next generation
is made (``TroubledNodeSwapped`` names the taint). Before, such a spare was promoted like
any other, nearest first, and the new worker waited there until the pressure passed or
``pendingGrace`` made it a failed start."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import EmitEvent, PodPhase, QuarantineNode, Taint
from tests.core.builders import Cluster, node, of_type, phase, spec, with_ready

DISK = Taint("node.kubernetes.io/disk-pressure", "", "NoSchedule")
MEMORY = Taint("node.kubernetes.io/memory-pressure", "", "NoSchedule")


def _cluster(spares: int = 2, **template: object) -> Cluster:
    the_spec = spec(phase("train", 3, 3), spares=spares, **template)
    nodes = {f"n{i}": node(f"n{i}", rack="r1") for i in range(3)}
    nodes |= {"s-near": node("s-near", rack="r1"), "s-far": node("s-far", rack="r2")}
    cluster = Cluster(the_spec, nodes)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert set(cluster.held(NodeRole.SPARE)) == {"s-near", "s-far"}
    return cluster


def _taint(cluster: Cluster, name: str, taint: Taint) -> None:
    cluster.nodes[name] = replace(cluster.nodes[name], taints=(*cluster.nodes[name].taints, taint))


def _said(plans: list) -> list[str]:  # type: ignore[type-arg]
    return [f"{e.reason}: {e.message}" for p in plans for e in of_type(p, EmitEvent)]


def test_a_spare_under_disk_pressure_is_promoted_after_a_healthy_one() -> None:
    cluster = _cluster()
    _taint(cluster, "s-near", DISK)
    cluster.nodes["n1"] = with_ready(cluster.nodes["n1"], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    assert "s-far" in cluster.held(NodeRole.ACTIVE)
    assert "s-near" in cluster.held(NodeRole.SPARE)
    assert cluster.status.failures[0].replaced_by == "s-far"


def test_an_active_node_under_pressure_trades_places_before_the_next_generation() -> None:
    cluster = _cluster()
    _taint(cluster, "n2", MEMORY)
    victim = next(p for p in cluster.pods.values() if p.node_name == "n0")
    cluster.pods[victim.name] = replace(victim, phase=PodPhase.FAILED, exit_code=1)
    cluster.advance(1)
    said = _said(cluster.settle())
    assert "n2" in cluster.held(NodeRole.SPARE)
    assert "n2" not in cluster.held(NodeRole.ACTIVE)
    swapped = [e for e in said if e.startswith("TroubledNodeSwapped")]
    assert any("n2 carries node.kubernetes.io/memory-pressure:NoSchedule" in e for e in swapped)
    assert not any(of_type(p, QuarantineNode) for p in [cluster.decide()])
    running = {p.node_name for p in cluster.running()}
    assert running == set(cluster.held(NodeRole.ACTIVE)) and len(running) == 3


def test_a_worker_running_on_a_node_under_pressure_runs_on() -> None:
    cluster = _cluster()
    _taint(cluster, "n2", MEMORY)
    before = {p.name for p in cluster.running()}
    cluster.advance(60)
    cluster.settle()
    assert {p.name for p in cluster.running()} == before
    assert "n2" in cluster.held(NodeRole.ACTIVE)


def test_workers_that_tolerate_the_taint_take_the_node_as_it_is() -> None:
    tolerate = {"tolerations": [{"key": MEMORY.key, "operator": "Exists"}]}
    cluster = _cluster(template={"image": "registry.example/llm:1", "spec": tolerate})
    _taint(cluster, "n2", MEMORY)
    victim = next(p for p in cluster.pods.values() if p.node_name == "n0")
    cluster.pods[victim.name] = replace(victim, phase=PodPhase.FAILED, exit_code=1)
    cluster.advance(1)
    cluster.settle()
    assert "n2" in cluster.held(NodeRole.ACTIVE)
