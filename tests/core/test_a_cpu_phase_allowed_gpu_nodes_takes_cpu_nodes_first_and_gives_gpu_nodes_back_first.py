"""A CPU phase allowed GPU nodes (``cpu.allowGpuNodes``) takes every free CPU-only node
before any GPU node, nearest first within each, and when its pool shrinks it gives its GPU
nodes back first (after the nodes in trouble). The GPU nodes are a fallback for a cluster
short of CPU nodes: a GPU node running a CPU worker is GPU-hours paid for CPU work, and
before, the phase took nodes by nearness and name alone — a GPU node of its rack, or one
whose name sorted first, over a free CPU node."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import Cluster, node, phase, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))


def test_the_pool_is_formed_from_cpu_nodes_before_gpu_nodes() -> None:
    free = {
        n.name: n
        for n in [
            node("a-gpu", gpu="H100", rack="r1"),
            node("b-gpu", gpu="H100", rack="r1"),
            node("c-gpu", gpu="H100", rack="r1"),
            node("x-cpu", gpu=None, rack="r9"),  # farther from the rest, and last by name
            node("y-cpu", gpu=None, rack="r9"),
        ]
    }
    cluster = Cluster(spec(phase("prep", 2, 2, gpu_types=[]), spares=1), free, settings=ALLOW)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert sorted(cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)) == [
        "a-gpu",
        "x-cpu",
        "y-cpu",
    ]
    # The two CPU nodes run the workers; the GPU node is the spare.
    assert sorted(cluster.held(NodeRole.ACTIVE)) == ["x-cpu", "y-cpu"]


def test_a_shrinking_pool_gives_its_gpu_nodes_back_first() -> None:
    free = {n.name: n for n in [node(f"a{i}-gpu", gpu="H100") for i in range(2)]}
    free.update({n.name: n for n in [node(f"x{i}-cpu", gpu=None) for i in range(2)]})
    job = spec(phase("prep", 4, 4, gpu_types=[]), spares=0)
    cluster = Cluster(job, free, settings=ALLOW)
    cluster.settle()
    assert len(cluster.held(NodeRole.ACTIVE)) == 4
    cluster.the_spec = spec(phase("prep", 2, 2, gpu_types=[]), spares=0)
    cluster.advance(30)
    cluster.settle()
    assert sorted(cluster.held(NodeRole.ACTIVE)) == ["x0-cpu", "x1-cpu"]


def test_without_gpu_nodes_allowed_nothing_changes() -> None:
    free = {n.name: n for n in [node("a-gpu"), node("x-cpu", gpu=None), node("y-cpu", gpu=None)]}
    cluster = Cluster(spec(phase("prep", 2, 2, gpu_types=[]), spares=1), free)
    cluster.settle()
    assert sorted(cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)) == [
        "x-cpu",
        "y-cpu",
    ]
