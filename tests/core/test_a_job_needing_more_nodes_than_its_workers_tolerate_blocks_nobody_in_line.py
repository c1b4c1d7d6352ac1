"""A job whose ``nodes.min`` exceeds the nodes of its type its workers could ever run on
blocks nobody in line: nodes someone tainted for others (a group dedicated to another team,
``dedicated=team-x:NoSchedule``) that the phase's workers do not tolerate are not counted
among the nodes of the type the cluster has, so such a job publishes no need (its
``CapacityShort`` says how many it could have and how many more are tainted) and the jobs
behind it take the free nodes. Before, the tainted nodes counted: it published its need,
and every job of the type behind it kept the free nodes for a job that could never start.
Taints Phased puts on the nodes jobs hold, and those the node controllers derive from a
node's health or a cordon, still count as nodes of the type: they come free."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo, Taint
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    node,
    nodes,
    of_type,
    owned,
    phase,
    snapshot,
    spec,
)

DEDICATED = Taint("dedicated", "team-x", "NoSchedule")
BIG = spec(phase("train", 8, 8))
OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)


def _cluster(tainted: int, free: int, taint: Taint = DEDICATED) -> list[NodeInfo]:
    return [
        *(node(f"t{i:02d}", taints=(taint,)) for i in range(tainted)),
        *nodes("h", free),
    ]


def _capacity(plan) -> str:
    return next(c.message for c in plan.status.conditions if c.type == "CapacityShort")


def test_a_job_that_could_run_on_too_few_untainted_nodes_publishes_no_need() -> None:
    plan = decide(snapshot(BIG, _cluster(tainted=6, free=4)), SETTINGS, T0)
    assert plan.status.state == JobState.WAITING and of_type(plan, ClaimNode) == []
    assert plan.status.waiting_for == {}
    assert "the cluster has only 4 such nodes" in _capacity(plan)
    assert "6 more carry taints its workers do not tolerate" in _capacity(plan)


def test_a_job_behind_it_takes_the_free_nodes() -> None:
    first = decide(snapshot(BIG, _cluster(tainted=6, free=4)), SETTINGS, T0)
    big = Claimant(JOB.uid, 99, JOB.created, dict(first.status.waiting_for))
    small = JobRef(namespace="ml", name="small", uid="uid-small", created=T0)
    snap = snapshot(
        spec(phase("train", 2, 2)), _cluster(tainted=6, free=4), job=small, waiting=(big,)
    )
    assert len(of_type(decide(snap, SETTINGS, T0), ClaimNode)) == 2


def test_tainted_nodes_its_workers_tolerate_count() -> None:
    tolerant = spec(
        phase("train", 8, 8),
        template={
            "image": "registry.example/llm:1",
            "command": ["python", "train.py"],
            "spec": {"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
        },
    )
    held = [owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("o", 2)]
    plan = decide(snapshot(tolerant, [*_cluster(tainted=6, free=0), *held]), SETTINGS, T0)
    assert plan.status.waiting_for == {"H100": 8}  # 6 it tolerates + 2 another job holds
    plan = decide(snapshot(tolerant, _cluster(tainted=6, free=2)), SETTINGS, T0)
    assert len(of_type(plan, ClaimNode)) == 8


def test_nodes_other_jobs_hold_and_cordoned_or_not_ready_ones_count() -> None:
    held = [owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("o", 4)]
    health = Taint("node.kubernetes.io/unreachable", "", "NoExecute")
    cluster = [*held, node("c", unschedulable=True), node("u", ready=False, taints=(health,))]
    plan = decide(snapshot(BIG, [*cluster, *nodes("h", 2)]), SETTINGS, T0)
    assert plan.status.waiting_for == {"H100": 8}  # 4 held + 2 + 2 free-to-be = 8
    assert "could be claimed now" in _capacity(plan)
