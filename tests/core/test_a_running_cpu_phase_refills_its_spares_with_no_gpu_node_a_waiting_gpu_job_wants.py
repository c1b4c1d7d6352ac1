"""A running CPU phase allowed GPU nodes (``cpu.allowGpuNodes``) refills its spares without
waiting in line, but never with a free GPU node a waiting GPU job wants: per GPU type, as
many as the waiting jobs want of it are kept from it (the farthest from its pool first),
whatever their place in line. An idle GPU node held as a CPU job's insurance is GPU-hours
paid for nothing while a GPU job waits for it; before, the waiting jobs' GPU nodes were kept
only from CPU phases waiting in line themselves, and a running one's refill took them."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import Claimant
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, Cluster, node, nodes, phase, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
PREP = spec(phase("prep", 2, 2, gpu_types=[]), spares=2)


def _running_prep() -> Cluster:
    """The CPU phase runs on two CPU nodes with two CPU spares, then loses its spares."""
    pool = {n.name: n for n in (node(f"x{i:02d}", gpu=None) for i in range(4))}
    cluster = Cluster(PREP, pool, settings=ALLOW)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert len(cluster.held(NodeRole.SPARE)) == 2
    for name in cluster.held(NodeRole.SPARE):
        del cluster.nodes[name]  # e.g. scaled away
    cluster.status = cluster.status.model_copy(
        update={"pool": cluster.status.pool.model_copy(update={"spares": []})}
    )
    cluster.advance(30)
    return cluster


def _gpu_job(priority: int, wants: int, gpu: str = "H100") -> Claimant:
    return Claimant(f"uid-{gpu}-{priority}", priority, JOB.created, {gpu: wants})


def test_the_gpu_nodes_a_waiting_gpu_job_wants_are_not_taken_as_spares() -> None:
    cluster = _running_prep()
    cluster.nodes.update({n.name: n for n in nodes("h", 3)})
    cluster.waiting = (_gpu_job(priority=-5, wants=3),)  # behind it in line, even
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == []


def test_it_takes_only_the_gpu_nodes_beyond_what_the_waiting_jobs_want() -> None:
    cluster = _running_prep()
    cluster.nodes.update({n.name: n for n in nodes("h", 3)})
    cluster.waiting = (_gpu_job(priority=5, wants=2),)
    cluster.settle()
    assert len(cluster.held(NodeRole.SPARE)) == 1  # 3 H100 free, 2 kept for the GPU job


def test_gpu_nodes_of_a_type_nobody_waits_for_are_taken() -> None:
    cluster = _running_prep()
    cluster.nodes.update({n.name: n for n in nodes("h", 3)})
    cluster.waiting = (_gpu_job(priority=5, wants=3, gpu="H200"),)
    cluster.settle()
    assert len(cluster.held(NodeRole.SPARE)) == 2


def test_without_the_setting_nothing_changes() -> None:
    cluster = _running_prep()
    cluster.settings = Settings()
    cluster.nodes.update({n.name: n for n in nodes("h", 3)})
    cluster.nodes["x09"] = node("x09", gpu=None)
    cluster.waiting = (_gpu_job(priority=5, wants=3),)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["x09"]
