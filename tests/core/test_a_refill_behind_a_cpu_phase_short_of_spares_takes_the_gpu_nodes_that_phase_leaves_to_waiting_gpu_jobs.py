"""A running GPU job's spare refill leaves a running CPU phase ahead of it, short of spares
(``cpu.allowGpuNodes``), only the free nodes that phase's own refill takes: never a GPU node a
waiting GPU job wants, whatever that job's place in line, as many per type as those jobs want.
Before, the refill behind took the CPU phase to take them, and left them; the CPU phase's
refill left them to the waiting GPU job; and that job, behind the refill's own spare need,
kept them for it: each left the nodes to another, and they sat idle."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import Claimant
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, Cluster, nodes, phase, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
# A running CPU phase, first in line (priority 10), short of two spares.
CPU_SPARES = Claimant(
    "uid-prep", 10, JOB.created, {"": 2}, gpus_per_node=0, tolerations=(), types=("",), spares=True
)


def _gpu_job_waiting(wants: int) -> Claimant:
    """A GPU job waiting for ``wants`` H100 nodes, last in line."""
    return Claimant(
        "uid-w", -5, JOB.created, {"H100": wants}, gpus_per_node=8, tolerations=(), types=("H100",)
    )


def _running_short_of_spares(h100_free: int, waiting: tuple[Claimant, ...]) -> Cluster:
    """This job (priority 0) runs on two H100 nodes, short of its two spares; then H100 nodes
    come free."""
    cluster = Cluster(
        spec(phase("train", 2, 2), spares=2), {n.name: n for n in nodes("a", 2)}, settings=ALLOW
    )
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    cluster.nodes.update({n.name: n for n in nodes("h", h100_free)})
    cluster.waiting = waiting
    cluster.settle()
    return cluster


def test_it_takes_the_gpu_nodes_the_cpu_phase_leaves_to_the_waiting_gpu_job() -> None:
    cluster = _running_short_of_spares(2, (CPU_SPARES, _gpu_job_waiting(2)))
    assert cluster.held(NodeRole.SPARE) == ["h00", "h01"]


def test_it_leaves_the_cpu_phase_what_that_phase_takes_beyond_them() -> None:
    # Three free: the waiting GPU job wants two, the CPU phase's refill takes one.
    cluster = _running_short_of_spares(3, (CPU_SPARES, _gpu_job_waiting(2)))
    assert len(cluster.held(NodeRole.SPARE)) == 2


def test_with_no_gpu_job_waiting_it_leaves_them_to_the_cpu_phase_ahead() -> None:
    cluster = _running_short_of_spares(2, (CPU_SPARES,))
    assert cluster.held(NodeRole.SPARE) == []
