"""A running CPU phase allowed GPU nodes (``cpu.allowGpuNodes``), short of spares, is kept by
the jobs behind it only what its refill takes: none of the GPU nodes a waiting GPU job wants,
whatever that job's place in line. Before, a CPU phase waiting behind it kept such a node for
its spares, the refill left the node to the waiting GPU job, and that job, behind the waiting
CPU phase (which takes GPU nodes), kept it for that phase: each of the three left the node to
another, and it sat idle for as long as the first one ran."""

from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, T0, nodes, of_type, phase, snapshot, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
AGO = JOB.created
# First in line: a running CPU phase short of one spare.
CPU_SPARES_AHEAD = Claimant(
    "uid-prep", 10, AGO, {"": 1}, gpus_per_node=0, tolerations=(), types=("",), spares=True
)
# Last in line: a GPU job waiting for one H100 node.
GPU_BEHIND = Claimant(
    "uid-gpu", -5, AGO, {"H100": 1}, gpus_per_node=8, tolerations=(), types=("H100",)
)
ME = JobRef(namespace="ml", name="etl", uid="uid-etl", generation=1, created=AGO)


def test_a_cpu_phase_waiting_between_them_takes_the_gpu_node() -> None:
    waiting_cpu = spec(phase("etl", 1, 1, gpu_types=[]))
    snap = snapshot(waiting_cpu, nodes("h", 1), waiting=(CPU_SPARES_AHEAD, GPU_BEHIND), job=ME)
    plan = decide(snap, ALLOW, T0)
    assert [a.node for a in of_type(plan, ClaimNode)] == ["h00"]


def test_without_the_waiting_gpu_job_it_keeps_the_node_for_the_spares_ahead() -> None:
    waiting_cpu = spec(phase("etl", 1, 1, gpu_types=[]))
    snap = snapshot(waiting_cpu, nodes("h", 1), waiting=(CPU_SPARES_AHEAD,), job=ME)
    plan = decide(snap, ALLOW, T0)
    assert of_type(plan, ClaimNode) == []
