"""A phase that accepts several GPU types and cannot start now waits for a type the cluster
has enough of, even when another type has more nodes free at the moment: it publishes that
need, so jobs behind it for that type keep the nodes it needs, instead of saying it could
never start and being passed by every younger job as nodes come free."""

from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo, Plan
from tests.core.builders import SETTINGS, T0, at, nodes, of_type, owned, phase, snapshot, spec

ELDER = JobRef(namespace="ml", name="either", uid="uid-either", created=T0 - timedelta(days=2))
YOUNGER = JobRef(namespace="ml", name="small", uid="uid-small", created=T0 - timedelta(days=1))
RUNNING = JobRef(namespace="ml", name="other", uid="uid-other", created=T0 - timedelta(days=3))
EITHER = spec(phase("train", 8, 8, gpu_types=["H100", "H200"]))
SMALL = spec(phase("train", 2, 2))  # H100


def _cluster(h100_busy: int, h100_free: int, h200_free: int) -> list[NodeInfo]:
    busy = [owned(n, NodeRole.ACTIVE, RUNNING) for n in nodes("b", h100_busy)]
    return [*busy, *nodes("h", h100_free), *nodes("k", h200_free, gpu="H200")]


def _capacity(plan: Plan) -> str:
    return next(c.message for c in plan.status.conditions if c.type == "CapacityShort")


def test_it_waits_for_the_type_there_are_enough_of_not_the_one_most_free_now():
    plan = decide(snapshot(EITHER, _cluster(10, 0, 3), job=ELDER), SETTINGS, T0)
    assert plan.status.state == JobState.WAITING
    assert plan.status.waiting_for == {"H100": 8}
    assert "need 8 H100 nodes" in _capacity(plan)
    assert "the cluster has only" not in _capacity(plan)


def test_a_younger_job_for_that_type_does_not_pass_it_as_nodes_come_free():
    cluster = _cluster(8, 2, 3)  # the running job gave back two H100 nodes
    elder = decide(snapshot(EITHER, cluster, job=ELDER), SETTINGS, T0)
    assert elder.status.waiting_for == {"H100": 8}
    line = (Claimant(ELDER.uid, 0, ELDER.created, dict(elder.status.waiting_for)),)
    small = decide(snapshot(SMALL, cluster, job=YOUNGER, waiting=line), SETTINGS, at(1))
    assert of_type(small, ClaimNode) == []


def test_with_too_few_nodes_of_every_type_it_blocks_nobody():
    plan = decide(snapshot(EITHER, _cluster(5, 0, 3), job=ELDER), SETTINGS, T0)
    assert plan.status.waiting_for == {}
    assert "the cluster has only" in _capacity(plan)


def test_when_a_type_reaches_min_now_it_is_claimed_as_before():
    plan = decide(snapshot(EITHER, _cluster(10, 0, 8), job=ELDER), SETTINGS, T0)
    assert sorted(c.node for c in of_type(plan, ClaimNode)) == [f"k{i:02d}" for i in range(8)]
