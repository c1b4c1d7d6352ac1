"""A running CPU phase allowed GPU nodes (``cpu.allowGpuNodes``) that holds GPU nodes as
spares gives back those a waiting GPU job wants beyond the free nodes of their type, the
farthest first, whatever that job's place in line; its spares are then refilled from CPU
nodes when there are any. A spare runs no worker, so nothing stops; kept, it was GPU-hours
paid for CPU insurance while the GPU job waited for it — the refill already left such nodes
alone, but spares taken before the GPU job came in line were kept for ever."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import Claimant
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, Cluster, node, phase, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))


def _prep_with_gpu_spares() -> Cluster:
    """The CPU phase runs on two CPU nodes; the only free nodes left were H100s, so its two
    spares are H100 nodes."""
    pool = {n.name: n for n in (node("x00", gpu=None), node("x01", gpu=None))}
    pool.update({n.name: n for n in (node("h00"), node("h01"))})
    cluster = Cluster(spec(phase("prep", 2, 2, gpu_types=[]), spares=2), pool, settings=ALLOW)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert cluster.held(NodeRole.ACTIVE) == ["x00", "x01"]
    assert cluster.held(NodeRole.SPARE) == ["h00", "h01"]
    return cluster


def _gpu_job(wants: int, priority: int = -5) -> Claimant:
    return Claimant("uid-gpu", priority, JOB.created, {"H100": wants})


def test_the_gpu_spares_a_waiting_gpu_job_wants_are_given_back() -> None:
    cluster = _prep_with_gpu_spares()
    workers = cluster.running()
    cluster.nodes["h02"] = node("h02")  # one H100 free: the GPU job wants 3
    cluster.nodes["x02"] = node("x02", gpu=None)
    cluster.waiting = (_gpu_job(3),)
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["x02"]  # refilled from the CPU node only
    assert cluster.running() == workers  # nothing stopped
    assert cluster.status.state == JobState.RUNNING


def test_only_as_many_as_the_free_nodes_of_the_type_leave_short() -> None:
    cluster = _prep_with_gpu_spares()
    cluster.nodes["h02"] = node("h02")
    cluster.waiting = (_gpu_job(2),)  # one free H100, so one more is wanted
    cluster.advance(30)
    cluster.settle()
    assert len([n for n in cluster.held(NodeRole.SPARE) if n.startswith("h")]) == 1


def test_gpu_spares_nobody_waits_for_are_kept() -> None:
    cluster = _prep_with_gpu_spares()
    cluster.waiting = (Claimant("uid-h200", 0, JOB.created, {"H200": 2}),)
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["h00", "h01"]
