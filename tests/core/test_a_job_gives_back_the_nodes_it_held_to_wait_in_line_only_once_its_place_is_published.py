"""A job that must give back the nodes it holds to wait in line (a phase boundary whose next
phase it cannot have yet, a restart that cannot make up its pool) does so only once its need
is published in its status: the pass that finds it short publishes ``waitingFor`` and keeps
the nodes, asking to be looked at again at once; the next pass, whose status says the need,
gives them back. The operator acts before it writes the status, and the jobs behind read
the line from the statuses as written: before, the released nodes came free while the job's
status still said it was running, and a younger job woken by them took them from under the
job ahead of it."""

from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, Plan, ReleaseNode
from tests.core.builders import (
    JOB,
    SETTINGS,
    Cluster,
    nodes,
    of_type,
    owned,
    phase,
    snapshot,
    spec,
)

RUNNING = JobRef(namespace="ml", name="other", uid="uid-other", created=JOB.created)
YOUNGER = JobRef(namespace="ml", name="small", uid="uid-small", created=JOB.created + timedelta(1))
SMALL = spec(phase("train", 3, 3))


def _at_the_boundary() -> Cluster:
    """The job ran ``prep`` on a00 and a01; its ``train`` needs 5 of the 5 H100 nodes there
    are, one held by another job: it must wait, and give back the two it holds."""
    pool = {n.name: n for n in [*nodes("a", 2), *nodes("f", 2)]}
    pool.update({n.name: owned(n, NodeRole.ACTIVE, RUNNING) for n in nodes("r", 1)})
    cluster = Cluster(spec(phase("prep", 2, 2), phase("train", 5, 5)), pool)
    cluster.settle()
    assert cluster.held(NodeRole.ACTIVE) == ["a00", "a01"]
    cluster.finish_workers("prep")
    return cluster


def _small(cluster: Cluster, status: TrainingJobStatus, line: tuple[Claimant, ...]) -> Plan:
    snap = snapshot(SMALL, cluster.nodes.values(), status=status, job=YOUNGER, waiting=line)
    return decide(snap, SETTINGS, cluster.now)


def _in_line(status: TrainingJobStatus) -> tuple[Claimant, ...]:
    wants = dict(status.waiting_for)
    return (Claimant(JOB.uid, 0, JOB.created, wants),) if wants else ()


def test_the_pass_that_finds_it_short_publishes_its_need_and_keeps_the_nodes():
    cluster = _at_the_boundary()
    plan = cluster.decide()
    assert of_type(plan, ReleaseNode) == []
    assert plan.status.state == JobState.WAITING
    assert plan.status.waiting_for == {"H100": 5}
    assert plan.requeue_after == 0  # looked at again as soon as the status is written
    cluster.apply(plan)
    released = cluster.decide()
    assert sorted(r.node for r in of_type(released, ReleaseNode)) == ["a00", "a01"]
    assert released.status.waiting_for == {"H100": 5}


def test_a_younger_job_woken_while_it_gives_them_back_takes_none_of_them():
    cluster = _at_the_boundary()
    small = _small(cluster, TrainingJobStatus(), ())
    assert small.status.waiting_for == {"H100": 3}  # two free nodes: it waits
    for _ in range(2):
        written = cluster.status  # what the jobs behind read of it in line
        plan = cluster.decide()
        for action in plan.actions:  # the actions land first, the status write after them
            cluster._apply(action)
        small = _small(cluster, small.status, _in_line(written))
        assert of_type(small, ClaimNode) == [], "the younger job took the nodes of the job ahead"
        cluster.status = plan.status
    assert cluster.held(NodeRole.ACTIVE) == []  # given back, kept free for it in line
    assert cluster.status.waiting_for == {"H100": 5}


def test_a_job_that_could_never_start_gives_them_back_at_once():
    cluster = _at_the_boundary()
    cluster.the_spec = spec(phase("prep", 2, 2), phase("train", 6, 6))  # more than there are
    plan = cluster.decide()
    assert sorted(r.node for r in of_type(plan, ReleaseNode)) == ["a00", "a01"]
    assert plan.status.waiting_for == {}


def test_left_to_itself_it_waits_holding_nothing():
    cluster = _at_the_boundary()
    cluster.settle()
    assert cluster.held(NodeRole.ACTIVE) == [] and cluster.held(NodeRole.SPARE) == []
    assert cluster.status.state == JobState.WAITING
    assert cluster.status.waiting_for == {"H100": 5}
