"""A CPU phase allowed GPU nodes (``cpu.allowGpuNodes``) takes the free GPU nodes a waiting
GPU job wants (whatever that job's place in line) only to make up its ``nodes.min``, beyond
the other free nodes: its spares, and its actives beyond ``min``, come from none of them, when
it is admitted as when it re-forms after a restart — as its running refill never takes one.
Before, it claimed them as spares (or actives up to ``max``), and its very next pass, refilling,
gave them back: the GPU job waiting for them was kept off them meanwhile, its claims racing the
CPU phase's."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import Claimant, ClaimNode, JobRef, ReleaseNode
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, Cluster, node, nodes, phase, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
CPU_JOB = JobRef(namespace="ml", name="prep", uid="uid-prep", generation=1, created=JOB.created)
# A GPU job waiting for two H100 nodes, behind the CPU phase in line.
GPU_BEHIND = Claimant(
    JOB.uid, -5, JOB.created, {"H100": 2}, gpus_per_node=8, tolerations=(), types=("H100",)
)


def _prep(cpu_nodes: int, h100: int, lo: int = 2, hi: int = 3) -> Cluster:
    pool = {n.name: n for n in (node(f"x{i:02d}", gpu=None) for i in range(cpu_nodes))}
    pool.update({n.name: n for n in nodes("h", h100)})
    the_spec = spec(phase("prep", lo, hi, gpu_types=[]), spares=2)
    cluster = Cluster(the_spec, pool, settings=ALLOW, job=CPU_JOB)
    cluster.waiting = (GPU_BEHIND,)
    return cluster


def _moves(cluster: Cluster) -> list[tuple[str, str]]:
    kinds = (ClaimNode, ReleaseNode)
    return [(type(a).__name__, a.node) for a in cluster.log if isinstance(a, kinds)]


def test_admitted_it_takes_as_spares_only_the_gpu_nodes_nobody_waits_for() -> None:
    cluster = _prep(cpu_nodes=2, h100=3)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert cluster.held(NodeRole.ACTIVE) == ["x00", "x01"]
    assert len(cluster.held(NodeRole.SPARE)) == 1  # 3 H100 free, 2 wanted by the GPU job
    assert not any(kind == "ReleaseNode" for kind, _ in _moves(cluster))  # nothing given back


def test_it_takes_them_to_make_up_its_min() -> None:
    cluster = _prep(cpu_nodes=1, h100=3)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert len(cluster.held(NodeRole.ACTIVE)) == 2 and cluster.held(NodeRole.SPARE) == []
    free = [n.name for n in cluster.nodes.values() if n.owner_uid is None]
    assert len(free) == 2  # left to the GPU job


def test_a_restart_takes_no_spare_a_waiting_gpu_job_wants() -> None:
    cluster = _prep(cpu_nodes=2, h100=0, hi=2)
    cluster.waiting = ()
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    cluster.nodes.update({n.name: n for n in nodes("h", 2)})
    cluster.waiting = (GPU_BEHIND,)
    cluster.settle()
    before = len(cluster.log)
    cluster.fail_a_worker()  # a gang restart: the pool is formed again
    assert cluster.status.state == JobState.RUNNING
    assert cluster.held(NodeRole.SPARE) == []
    kinds = (ClaimNode, ReleaseNode)
    assert [a for a in cluster.log[before:] if isinstance(a, kinds)] == []


def test_without_a_waiting_gpu_job_it_takes_them_as_spares() -> None:
    cluster = _prep(cpu_nodes=2, h100=3)
    cluster.waiting = ()
    cluster.settle()
    assert len(cluster.held(NodeRole.SPARE)) == 2


def test_the_gpu_nodes_kept_for_a_job_ahead_are_not_counted_twice() -> None:
    """Two GPU jobs wait for two H100 nodes each, one ahead of the CPU phase, one behind:
    of five free H100 nodes, the one neither wants is the CPU phase's spare."""
    ahead = Claimant(
        "uid-ahead", 10, JOB.created, {"H100": 2}, gpus_per_node=8, tolerations=(), types=("H100",)
    )
    cluster = _prep(cpu_nodes=2, h100=5)
    cluster.waiting = (ahead, GPU_BEHIND)
    cluster.settle()
    assert cluster.held(NodeRole.ACTIVE) == ["x00", "x01"]
    assert len(cluster.held(NodeRole.SPARE)) == 1
    assert not any(kind == "ReleaseNode" for kind, _ in _moves(cluster))
