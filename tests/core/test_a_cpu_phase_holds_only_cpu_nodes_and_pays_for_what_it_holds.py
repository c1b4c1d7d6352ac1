"""CPU phases claim CPU nodes only (a GPU node is not a CPU node unless a setting says so),
give the GPU nodes back at the boundary, and are billed at the price of what they hold."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import ClaimNode, EmitEvent, NodeInfo, ReleaseNode
from phased.core.pools import is_cpu_node
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import (
    SETTINGS,
    T0,
    Cluster,
    node,
    nodes,
    of_type,
    owned,
    phase,
    snapshot,
    spec,
)

CPU_PRICE = 0.8
PRICED = Settings(cpu=CPUSettings(price_per_node_hour=CPU_PRICE))
ALLOW = Settings(cpu=CPUSettings(price_per_node_hour=CPU_PRICE, allow_gpu_nodes=True))


def _cpu(name: str) -> NodeInfo:
    return node(name, gpu=None)


def _pool(gpu: int, cpu: int) -> dict[str, NodeInfo]:
    found = [*nodes("h", gpu), *(_cpu(f"c{i:02d}") for i in range(cpu))]
    return {n.name: n for n in found}


WHAT_IS_A_CPU_NODE = [
    ("a node with no GPU", _cpu("c"), SETTINGS, True),
    ("an H100 node", node("h"), SETTINGS, False),
    (
        "a GPU node whose GPUs all dropped (capacity left)",
        replace(node("h"), allocatable={}),
        SETTINGS,
        False,
    ),
    (
        "a node with a GPU resource but no GPU labels",
        replace(_cpu("x"), capacity={"nvidia.com/gpu": 8}),
        SETTINGS,
        False,
    ),
    (
        "a node with a GPU type's labels but no GPU resource",
        replace(node("h"), allocatable={}, capacity={}),
        SETTINGS,
        False,
    ),
    ("an H100 node when the settings allow GPU nodes", node("h"), ALLOW, True),
    (
        "a node without the configured CPU labels",
        _cpu("c"),
        Settings(cpu=CPUSettings(node_labels={"pool": "cpu"})),
        False,
    ),
    (
        "a node with the configured CPU labels",
        replace(_cpu("c"), labels={"pool": "cpu"}),
        Settings(cpu=CPUSettings(node_labels={"pool": "cpu"})),
        True,
    ),
]


@pytest.mark.parametrize(
    ("case", "the_node", "settings", "expected"),
    WHAT_IS_A_CPU_NODE,
    ids=[c[0] for c in WHAT_IS_A_CPU_NODE],
)
def test_what_a_cpu_node_is(case: str, the_node: NodeInfo, settings: Settings, expected: bool):
    assert is_cpu_node(the_node, settings) is expected


def test_a_cpu_phase_claims_only_cpu_nodes_and_waits_when_only_gpu_nodes_are_free():
    plan = decide(snapshot(spec(phase("prep", 2, 2, gpu_types=[])), nodes("h", 6)), PRICED, T0)
    assert of_type(plan, ClaimNode) == []
    assert plan.status.state == JobState.WAITING
    assert "need 2 CPU nodes" in plan.status.message


def test_after_a_gpu_phase_the_cpu_phase_gives_the_gpu_nodes_back_and_takes_cpu_nodes():
    the_spec = spec(phase("train", 3, 3), phase("export", 2, 2, gpu_types=[]), spares=1)
    cluster = Cluster(the_spec, _pool(gpu=4, cpu=3), settings=PRICED)
    cluster.settle()
    gpu_nodes = set(cluster.held(NodeRole.ACTIVE)) | set(cluster.held(NodeRole.SPARE))
    assert gpu_nodes == {"h00", "h01", "h02", "h03"}
    cluster.advance(3600)
    cluster.finish_workers("train")
    plans = cluster.settle()

    released = {a.node for p in plans for a in p.actions if isinstance(a, ReleaseNode)}
    assert released == gpu_nodes
    claimed = {a.node for p in plans for a in p.actions if isinstance(a, ClaimNode)}
    assert claimed == {"c00", "c01", "c02"}  # 2 active + 1 spare, all CPU nodes
    assert cluster.status.phase == "export" and cluster.status.state == JobState.RUNNING
    started = [
        a.message
        for p in plans
        for a in p.actions
        if isinstance(a, EmitEvent) and a.reason == "PhaseStarted"
    ]
    assert started == ["phase export started on 2 CPU nodes"]

    # An hour on 3 CPU nodes (2 active, 1 spare) at the CPU price, no GPU-hours.
    before = cluster.status.phases[1]
    cluster.advance(3600)
    cluster.step()
    record = cluster.status.phases[1]
    assert record.cost - before.cost == pytest.approx(3 * CPU_PRICE)
    assert record.gpu_hours == 0


def test_a_gpu_node_a_cpu_phase_holds_by_setting_is_billed_as_a_gpu_node():
    the_spec = spec(phase("prep", 2, 2, gpu_types=[]))
    cluster = Cluster(the_spec, _pool(gpu=1, cpu=1), settings=ALLOW)
    plans = cluster.settle()
    assert set(cluster.held(NodeRole.ACTIVE)) == {"c00", "h00"}
    started = [
        a.message
        for p in plans
        for a in p.actions
        if isinstance(a, EmitEvent) and a.reason == "PhaseStarted"
    ]
    assert started == ["phase prep started on 2 nodes (1 of them GPU nodes, billed as such)"]
    before = cluster.status.accounting
    cluster.advance(3600)
    cluster.step()
    after = cluster.status.accounting
    h100 = ALLOW.gpu_types[next(iter(ALLOW.gpu_types))].price_per_gpu_hour
    assert after.cost - before.cost == pytest.approx(CPU_PRICE + 8 * h100)
    assert after.active_gpu_hours - before.active_gpu_hours == pytest.approx(8)
    assert after.busy_gpu_hours == before.busy_gpu_hours  # a CPU worker uses no GPU


def test_a_healed_gpu_node_does_not_come_back_as_a_spare_of_a_cpu_phase():
    the_spec = spec(
        phase("prep", 1, 1, gpu_types=[]),
        spares=1,
        failurePolicy={"nodeReturn": "ReturnToSpares", "healthyBeforeReturn": "1m"},
    )
    held = [owned(_cpu("c00"), NodeRole.ACTIVE), owned(node("h00"), NodeRole.QUARANTINED)]
    status = TrainingJobStatus(phase="prep", state=JobState.RUNNING)
    plan = decide(snapshot(the_spec, [*held, _cpu("c01")], status=status), PRICED, T0)
    assert [a.node for a in of_type(plan, ReleaseNode)] == ["h00"]
    assert [(a.node, a.role) for a in of_type(plan, ClaimNode)] == [("c01", NodeRole.SPARE)]
