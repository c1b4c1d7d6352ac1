"""A running CPU phase allowed GPU nodes (``cpu.allowGpuNodes``) short of spares is in line
for them (``status.sparesWanted``, keyed by the CPU type), but its refill never takes a GPU
node a waiting GPU job wants, whatever that job's place in line. So a GPU job waiting behind
it keeps no GPU node for those spares: only the CPU nodes it could not take itself would be
the CPU phase's. Before, the GPU job behind kept the free GPU nodes for the CPU phase's spare
need, and the CPU phase's refill left them to the GPU job: each kept them for the other, and
the GPU nodes sat idle, the GPU job waiting, for as long as the CPU phase ran."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, T0, Cluster, node, nodes, of_type, phase, snapshot, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
GPU = spec(phase("train", 2, 2))
CPU_JOB = JobRef(namespace="ml", name="prep", uid="uid-prep", generation=1, created=JOB.created)
# The running CPU phase, ahead of the GPU job in line (priority 5), short of two spares.
CPU_SPARES_AHEAD = Claimant(
    CPU_JOB.uid,
    priority=5,
    created=CPU_JOB.created,
    wants={"": 2},
    gpus_per_node=0,
    tolerations=(),
    types=("",),
    spares=True,
)
# The GPU job as the CPU phase's line reads it.
GPU_BEHIND = Claimant(
    JOB.uid,
    priority=0,
    created=JOB.created,
    wants={"H100": 2},
    gpus_per_node=8,
    tolerations=(),
    types=("H100",),
)


def test_the_gpu_job_takes_the_gpu_nodes_the_cpu_phases_spares_would_never_take() -> None:
    snap = snapshot(GPU, nodes("h", 2), waiting=(CPU_SPARES_AHEAD,))
    plan = decide(snap, ALLOW, T0)
    assert sorted(a.node for a in of_type(plan, ClaimNode)) == ["h00", "h01"]
    assert plan.status.waiting_for == {}


def test_the_cpu_phases_refill_leaves_them_to_it_all_the_same() -> None:
    """The other side of the same line: the CPU phase's refill takes no GPU node the GPU job
    behind it waits for, so nothing but the GPU job would ever use them."""
    prep = spec(phase("prep", 2, 2, gpu_types=[]), spares=2, priority=5)
    pool = {n.name: n for n in (node(f"x{i:02d}", gpu=None) for i in range(2))}
    cluster = Cluster(prep, pool, settings=ALLOW, job=CPU_JOB)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    cluster.nodes.update({n.name: n for n in nodes("h", 2)})
    cluster.waiting = (GPU_BEHIND,)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == []
    assert cluster.status.spares_wanted == {"": 2}


def test_a_cpu_node_free_beside_them_is_still_kept_for_the_spares_ahead() -> None:
    """What the CPU phase's refill would take is its own: a free CPU node it could take is
    its, and the GPU job behind takes the GPU nodes."""
    free = [*nodes("h", 2), node("x09", gpu=None)]
    plan = decide(snapshot(GPU, free, waiting=(CPU_SPARES_AHEAD,)), ALLOW, T0)
    assert sorted(a.node for a in of_type(plan, ClaimNode)) == ["h00", "h01"]
