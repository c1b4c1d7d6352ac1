"""A job behind others in line keeps for them only free nodes they could take: a node of the
type whose taint their workers do not tolerate (a group dedicated to this job's team), or
with fewer GPUs than their ``gpusPerNode``, is not theirs to wait for, and the job behind
takes it. And what a job ahead could take among the free nodes this job cannot (a taint only
it tolerates) is counted towards its need first. Before, the line counted nodes per type
alone: a team's job kept its own dedicated nodes idle for a job ahead that could never run
on them, for as long as that job waited — the head of the line blocking what it could not
use. A job ahead whose shape the line does not know (its spec unread) is taken to be able
to take any node of its type, as before."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo, Plan, Taint
from tests.core.builders import SETTINGS, T0, node, nodes, of_type, owned, phase, snapshot, spec

DEDICATED = Taint("dedicated", "team-a", "NoSchedule")
TOLERATE = [{"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}]
RUNNING = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)
TEAM_A = JobRef(namespace="team-a", name="small", uid="uid-small", created=T0)
SMALL = spec(
    phase("train", 2, 2),
    template={
        "image": "registry.example/llm:1",
        "command": ["python", "train.py"],
        "spec": {"tolerations": TOLERATE},
    },
)
SMALL_4 = spec(phase("train", 2, 2, gpus=4))


def _ahead(tolerations=(), gpus: int | None = 8) -> Claimant:
    """A job of higher priority waiting for 4 H100 nodes of ``gpus`` GPUs, with workers of
    ``tolerations`` (``None``: its shape unknown to the line)."""
    known = tolerations is not None and gpus is not None
    return Claimant(
        "uid-ahead",
        priority=10,
        created=T0,
        wants={"H100": 4},
        gpus_per_node=gpus if known else None,
        tolerations=tuple(tolerations) if known else None,
    )


def _cluster(dedicated_free: int, plain_free: int = 0) -> list[NodeInfo]:
    busy = [owned(n, NodeRole.ACTIVE, RUNNING) for n in nodes("b", 6)]
    tainted = [node(f"t{i:02d}", taints=(DEDICATED,)) for i in range(dedicated_free)]
    return [*busy, *tainted, *nodes("h", plain_free)]


def _small(cluster: list[NodeInfo], ahead: Claimant, the_spec=SMALL) -> Plan:
    snap = snapshot(the_spec, cluster, job=TEAM_A, waiting=(ahead,))
    return decide(snap, SETTINGS, T0)


def _claimed(plan: Plan) -> list[str]:
    return sorted(c.node for c in of_type(plan, ClaimNode))


def test_its_own_dedicated_nodes_are_not_kept_for_a_job_ahead_that_cannot_run_there():
    plan = _small(_cluster(dedicated_free=3), _ahead())
    assert _claimed(plan) == ["t00", "t01"]
    assert plan.status.state != JobState.WAITING


def test_they_are_kept_for_a_job_ahead_that_tolerates_the_taint_too():
    plan = _small(_cluster(dedicated_free=3), _ahead(tolerations=TOLERATE))
    assert _claimed(plan) == []
    assert plan.status.waiting_for == {"H100": 2}


def test_they_are_kept_for_a_job_ahead_whose_shape_the_line_does_not_know():
    plan = _small(_cluster(dedicated_free=3), _ahead(tolerations=None))
    assert _claimed(plan) == []


def test_what_the_job_ahead_can_take_elsewhere_counts_towards_its_need_first():
    # The job ahead runs 4 GPUs a node: the 4-GPU nodes are its alone, the 8-GPU ones both's.
    ahead = _ahead(gpus=4)
    plain = spec(phase("train", 2, 2))
    small_nodes = [node(f"q{i:02d}", gpus=4) for i in range(3)]
    plan = _small([*_cluster(0, plain_free=3), *small_nodes], ahead, the_spec=plain)
    assert _claimed(plan) == ["h00", "h01"]  # 3 + 1 of the 8-GPU nodes for it: room for both
    plan = _small([*_cluster(0, plain_free=3), *small_nodes[:2]], ahead, the_spec=plain)
    assert _claimed(plan) == []  # it still needs 2 of the 3: 1 left < 2


def test_nodes_with_fewer_gpus_than_the_job_ahead_needs_are_not_kept_for_it():
    small_nodes = [node(f"q{i:02d}", gpus=4) for i in range(3)]
    cluster = [*_cluster(dedicated_free=0), *small_nodes]
    plan = _small(cluster, _ahead(), the_spec=SMALL_4)
    assert _claimed(plan) == ["q00", "q01"]
    plan = _small(cluster, _ahead(gpus=4), the_spec=SMALL_4)
    assert _claimed(plan) == []
