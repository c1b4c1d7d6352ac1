"""A CPU phase allowed GPU nodes (``cpu.allowGpuNodes``) that waits ahead of a GPU job takes
the free GPU nodes it needs beyond the free CPU nodes, whatever the GPU job behind it wants
(its own pass keeps GPU nodes only for the GPU jobs ahead of it). So the GPU job behind,
and the spare refill of a running GPU job behind it, keep those GPU nodes for it: the CPU
job's need, less the free nodes it could take that they cannot (CPU nodes first), is kept
among their free nodes of their type. Before, they kept nothing for a job that waited for
CPU nodes: both passes, woken by the same free nodes, claimed the same GPU nodes, and the
claim that landed first decided, not the line. Whether the free nodes admit the CPU job now
(for a refill) counts its CPU nodes first too: counted on the GPU nodes by name, it used up
those a GPU job after it could start on, and the refill took them from under that job."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole, PhaseRecord, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, CreatePod, JobRef, NodeInfo
from phased.core.settings import CPUSettings, Settings
from phased.core.times import format_time
from tests.core.builders import (
    JOB,
    T0,
    at,
    node,
    nodes,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)

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


def _refill(free: list[NodeInfo], *waiting: Claimant) -> list[str]:
    """The spares a running GPU job (JOB, two actives, none of its two spares) claims."""
    actives = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i:02d}") for i in range(2)]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        phases=[PhaseRecord(name="train", start_time=format_time(at(-3600)), gpu_type="H100")],
        pool={"active": ["a00", "a01"], "spares": []},
    )
    running = spec(phase("train", 2, 2), spares=2)
    snap = snapshot(running, [*actives, *free], pods, status, waiting=waiting)
    plan = decide(snap, ALLOW, T0)
    assert not [p for p in of_type(plan, CreatePod)]  # the generation runs on
    return sorted(c.node for c in of_type(plan, ClaimNode) if c.role == NodeRole.SPARE)


def test_a_running_gpu_jobs_refill_leaves_the_cpu_job_ahead_the_gpu_nodes_it_starts_on() -> None:
    # 1 CPU + 4 H100 free admit the CPU job ahead (4): it takes 3 H100; one is left.
    assert len(_refill(_cluster(h100=4, cpu=1), CPU_AHEAD)) == 1
    assert len(_refill(_cluster(h100=4, cpu=1))) == 2  # nobody ahead: both spares


def test_a_refill_counts_the_cpu_job_ahead_on_the_cpu_nodes_it_takes_first() -> None:
    # The CPU job ahead takes the 2 free CPU nodes, the GPU job after it in line the 2 free
    # H100: both start now, and the running job's refill leaves them all.
    cpu_ahead = replace(CPU_AHEAD, priority=10, wants={"": 2})
    gpu_ahead = replace(GPU_BEHIND, uid="uid-gpu", priority=5)
    assert _refill(_cluster(h100=2, cpu=2), cpu_ahead, gpu_ahead) == []
