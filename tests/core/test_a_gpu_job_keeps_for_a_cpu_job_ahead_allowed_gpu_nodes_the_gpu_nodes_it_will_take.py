"""A CPU phase allowed GPU nodes (``cpu.allowGpuNodes``) that waits ahead of a GPU job takes
the free GPU nodes it needs beyond the free CPU nodes, whatever the GPU job behind it wants
(its own pass keeps GPU nodes only for the GPU jobs ahead of it). So the GPU job behind,
and the spare refill of a running GPU job behind it, keep those GPU nodes for it: the CPU
job's need, less the free nodes it could take that they cannot (CPU nodes first), is kept
among their free nodes of their type. Before, they kept nothing for a job that waited for
CPU nodes: both passes, woken by the same free nodes, claimed the same GPU nodes, and the
claim that landed first decided, not the line."""

from phased.api.v1alpha1 import NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, T0, node, nodes, of_type, owned, phase, pod, snapshot, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
GPU = spec(phase("train", 2, 2))
CPU_JOB = JobRef(namespace="ml", name="prep", uid="uid-prep", generation=1, created=JOB.created)
PREP = spec(phase("prep", 4, 4, gpu_types=[]), priority=5)
# The CPU job, ahead in line (priority 5), as the line reads it.
CPU_AHEAD = Claimant(
    CPU_JOB.uid,
    priority=5,
    created=CPU_JOB.created,
    wants={"": 4},
    gpus_per_node=0,
    tolerations=(),
    types=("",),
)
# The GPU job (JOB, priority 0), behind it, as the line reads it.
GPU_BEHIND = Claimant(
    JOB.uid,
    priority=0,
    created=JOB.created,
    wants={"H100": 2},
    gpus_per_node=8,
    tolerations=(),
    types=("H100",),
)


def _cluster(h100: int, cpu: int) -> list[NodeInfo]:
    return [*nodes("h", h100), *(node(f"x{i:02d}", gpu=None) for i in range(cpu))]


def _gpu_claims(the_nodes: list[NodeInfo], settings: Settings = ALLOW) -> list[str]:
    plan = decide(snapshot(GPU, the_nodes, waiting=(CPU_AHEAD,)), settings, T0)
    return sorted(c.node for c in of_type(plan, ClaimNode))


def _cpu_claims(the_nodes: list[NodeInfo]) -> list[str]:
    snap = snapshot(PREP, the_nodes, waiting=(GPU_BEHIND,), job=CPU_JOB)
    return sorted(c.node for c in of_type(decide(snap, ALLOW, T0), ClaimNode))


def test_the_cpu_job_ahead_takes_the_gpu_nodes_so_the_gpu_job_behind_keeps_them() -> None:
    cluster = _cluster(h100=4, cpu=0)
    assert _cpu_claims(cluster) == ["h00", "h01", "h02", "h03"]  # the line lets it
    assert _gpu_claims(cluster) == []  # and the job behind leaves them to it


def test_the_free_cpu_nodes_count_first_and_the_rest_is_the_gpu_jobs() -> None:
    cluster = _cluster(h100=3, cpu=2)
    assert len([n for n in _cpu_claims(cluster) if n.startswith("h")]) == 2
    assert _gpu_claims(cluster) == []  # 1 H100 left beside the CPU job ahead: short of 2
    cluster = _cluster(h100=3, cpu=3)
    assert len([n for n in _cpu_claims(cluster) if n.startswith("h")]) == 1
    assert len(_gpu_claims(cluster)) == 2  # both start
    assert _gpu_claims(_cluster(h100=2, cpu=4)) == ["h00", "h01"]  # CPU nodes cover it


def test_without_the_setting_a_cpu_job_keeps_no_gpu_node() -> None:
    assert _gpu_claims(_cluster(h100=2, cpu=0), settings=Settings()) == ["h00", "h01"]


def test_a_running_gpu_jobs_refill_leaves_the_cpu_job_ahead_the_gpu_nodes_it_starts_on() -> None:
    actives = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    free = [*nodes("h", 4), *(node(f"x{i:02d}", gpu=None) for i in range(1))]
    pods = [pod(f"w{i}", "train", i, world=2, node_name=f"a{i:02d}") for i in range(2)]
    status = TrainingJobStatus(phase="train", world_size=2, state="Running")
    running = spec(phase("train", 2, 2), spares=2)
    snap = snapshot(running, [*actives, *free], pods=pods, status=status, waiting=(CPU_AHEAD,))
    claimed = sorted(c.node for c in of_type(decide(snap, ALLOW, T0), ClaimNode))
    # 1 CPU + 4 H100 free admit the CPU job ahead (4): it takes 3 H100; one is left.
    assert len(claimed) == 1 and claimed[0].startswith("h")
