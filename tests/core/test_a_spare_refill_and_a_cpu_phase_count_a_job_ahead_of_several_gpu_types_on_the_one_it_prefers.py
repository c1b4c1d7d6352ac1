"""A job waiting ahead in line that accepts several GPU types starts, in its own pass, on the
first type in its order of preference that the free nodes cover. Where the line counts such a
job on one type only — which jobs ahead the free nodes would admit now, that a running job's
spare refill leaves their nodes (``pools.starting_now``), and what the GPU jobs ahead want of
each type, that a CPU phase allowed GPU nodes leaves them (``pools.counted_once``) — it counts
it on that type too, not on the first by name. Before, a job ahead accepting H200 then H100
whose free nodes covered both was counted on H100: the refill of a running job took the
H100 nodes that another job ahead, waiting for H100 alone, could start on now (the first
would take the H200 ones), and a CPU phase took the H200 nodes the job ahead preferred and
left it the H100 ones, its second choice."""

from phased.api.v1alpha1 import JobState, NodeRole, PhaseRecord, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, NodeInfo, Plan, Snapshot
from phased.core.settings import CPUSettings, Settings
from phased.core.times import format_time
from tests.core.builders import (
    SETTINGS,
    T0,
    Cluster,
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


def _of_types(uid: str, priority: int, *types: str) -> Claimant:
    """A job ahead waiting for 2 nodes of any of ``types``, in its order of preference."""
    return Claimant(
        uid,
        priority=priority,
        created=T0,
        wants=dict.fromkeys(types, 2),
        gpus_per_node=8,
        tolerations=(),
        types=types,
    )


def _free() -> list[NodeInfo]:
    """Two free H100 nodes and two free H200 ones."""
    return [*nodes("h", 2), *nodes("k", 2, gpu="H200")]


def _running(waiting: tuple[Claimant, ...]) -> Snapshot:
    """An H100 job running on two actives, none of its two spares held."""
    actives = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i:02d}") for i in range(2)]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        phases=[PhaseRecord(name="train", start_time=format_time(at(-3600)), gpu_type="H100")],
        pool={"active": ["a00", "a01"], "spares": []},
    )
    the_spec = spec(phase("train", 2, 2), spares=2)
    return snapshot(the_spec, [*actives, *_free()], pods, status, waiting=waiting)


def _claimed(plan: Plan) -> list[str]:
    return sorted(c.node for c in of_type(plan, ClaimNode))


def test_the_refill_leaves_the_h100_nodes_to_a_job_ahead_that_the_first_leaves_them():
    first = _of_types("uid-first", 10, "H200", "H100")  # starts on the H200 nodes
    second = _of_types("uid-second", 5, "H100")  # then starts on the H100 ones
    plan = decide(_running((first, second)), SETTINGS, T0)
    assert _claimed(plan) == []


def test_the_refill_leaves_the_h100_nodes_to_a_first_job_ahead_preferring_them():
    first = _of_types("uid-first", 10, "H100", "H200")  # starts on the H100 nodes
    second = _of_types("uid-second", 5, "H100")  # then the free nodes do not cover it
    plan = decide(_running((first, second)), SETTINGS, T0)
    assert _claimed(plan) == []  # the first keeps them


def test_a_cpu_phase_leaves_a_gpu_job_ahead_the_type_it_prefers():
    ahead = _of_types("uid-gpu", 5, "H200", "H100")
    cpu = [node(f"x{i:02d}", gpu=None) for i in range(2)]
    prep = spec(phase("prep", 4, 4, gpu_types=[]))
    plan = decide(snapshot(prep, [*cpu, *_free()], waiting=(ahead,)), ALLOW, T0)
    assert _claimed(plan) == ["h00", "h01", "x00", "x01"]


def test_a_cpu_phase_leaves_the_h100_nodes_to_a_gpu_job_ahead_preferring_them():
    ahead = _of_types("uid-gpu", 5, "H100", "H200")
    cpu = [node(f"x{i:02d}", gpu=None) for i in range(2)]
    prep = spec(phase("prep", 4, 4, gpu_types=[]))
    plan = decide(snapshot(prep, [*cpu, *_free()], waiting=(ahead,)), ALLOW, T0)
    assert _claimed(plan) == ["k00", "k01", "x00", "x01"]


def _prep_with_h200_spares() -> Cluster:
    """A CPU phase running on two CPU nodes, with two H200 nodes as its spares."""
    pool = {n.name: n for n in (node("x00", gpu=None), node("x01", gpu=None))}
    pool.update({n.name: n for n in nodes("k", 2, gpu="H200")})
    cluster = Cluster(spec(phase("prep", 2, 2, gpu_types=[]), spares=2), pool, settings=ALLOW)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["k00", "k01"]
    return cluster


def test_a_cpu_phase_gives_back_the_gpu_spares_of_the_type_a_waiting_job_prefers():
    cluster = _prep_with_h200_spares()
    cluster.nodes.update({n.name: n for n in nodes("h", 2)})  # two H100 free
    cluster.waiting = (_of_types("uid-gpu", -5, "H200", "H100"),)
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["h00", "h01"]  # the H200 ones are the job's


def test_a_cpu_phase_keeps_the_gpu_spares_of_a_type_a_waiting_job_does_not_prefer():
    cluster = _prep_with_h200_spares()
    cluster.nodes.update({n.name: n for n in nodes("h", 2)})
    cluster.waiting = (_of_types("uid-gpu", -5, "H100", "H200"),)
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["k00", "k01"]  # it starts on the free H100 ones
