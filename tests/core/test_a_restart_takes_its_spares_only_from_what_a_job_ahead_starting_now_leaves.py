"""A phase that has started re-forms after a failure without waiting in line to make up
the world it ran with, but its spares (``spares.count``) follow the spare refill's rule: a
waiting job ahead of it in line that the free nodes left beside that world would admit now
keeps its need among them, and the restarting job takes its spares from the rest (and
refills later, as usual). Before, the restart took its whole pool — world and spares —
whatever the line: a job admitted with fewer spares than it asks for, restarting while the
free nodes that a job of higher priority could start on had just come free, took them as
spares from under it, and the job ahead, which could have started, waited on. A job ahead
that the free nodes left beside the world do not cover still holds back no spare, and a
job behind holds back nothing."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef
from tests.core.builders import (
    SETTINGS,
    T0,
    Cluster,
    nodes,
    of_type,
    owned,
    phase,
    snapshot,
    spec,
    with_ready,
)

RUNNING = spec(phase("train", 2, 2), spares=2)
OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)
AHEAD_JOB = JobRef(namespace="ml", name="ahead", uid="uid-ahead", created=T0)
AHEAD_SPEC = spec(phase("train", 3, 3))


def _ahead(wants: int = 3, priority: int = 10) -> Claimant:
    """The job ahead (or behind, by its priority): waiting for ``wants`` 8-GPU H100 nodes."""
    return Claimant(AHEAD_JOB.uid, priority, T0, {"H100": wants}, gpus_per_node=8, tolerations=())


def _running_without_spares(freed: int, waiting: Claimant) -> Cluster:
    """The job runs on the two nodes there were, none left for its two spares; then another
    job gives back ``freed`` nodes, and ``waiting`` waits for them (its pass yet to run)."""
    pool = {n.name: n for n in nodes("h", 2)}
    pool.update({n.name: owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("o", freed)})
    cluster = Cluster(RUNNING, pool)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING and cluster.held(NodeRole.SPARE) == []
    for n in nodes("o", freed):
        cluster.nodes[n.name] = n  # released by the other job
    cluster.waiting = (waiting,)
    cluster.advance(60)
    cluster.settle()
    return cluster


def _lose_an_active(cluster: Cluster) -> None:
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(600)
    cluster.settle()


def _free(cluster: Cluster) -> list[str]:
    return sorted(n.name for n in cluster.nodes.values() if n.owner_uid is None)


def test_a_worker_s_failure_leaves_the_job_ahead_the_nodes_it_could_start_on() -> None:
    cluster = _running_without_spares(3, _ahead())
    assert _free(cluster) == ["o00", "o01", "o02"]  # the refill left them to the job ahead
    cluster.fail_a_worker()
    assert cluster.status.state == JobState.RUNNING and cluster.status.world_size == 2
    assert cluster.held(NodeRole.SPARE) == []
    assert _free(cluster) == ["o00", "o01", "o02"]
    assert cluster.status.waiting_for == {}  # it runs: it is in nobody's way in line
    # The job ahead's pass, woken by the same free nodes, then starts.
    plan = decide(snapshot(AHEAD_SPEC, cluster.nodes.values(), job=AHEAD_JOB), SETTINGS, T0)
    assert len(of_type(plan, ClaimNode)) == 3 and plan.status.waiting_for == {}


def test_a_lost_node_is_replaced_and_the_job_ahead_left_what_it_could_start_on() -> None:
    cluster = _running_without_spares(4, _ahead())
    _lose_an_active(cluster)
    assert cluster.status.state == JobState.RUNNING
    assert len(cluster.held(NodeRole.ACTIVE)) == 2 and cluster.held(NodeRole.SPARE) == []
    assert len(_free(cluster)) == 3  # 4 free: one replaced the lost node, 3 the job ahead's


def test_a_job_ahead_the_nodes_left_beside_the_world_do_not_cover_holds_back_no_spare() -> None:
    cluster = _running_without_spares(3, _ahead())
    _lose_an_active(cluster)  # one of the 3 replaces the lost node: 2 left, 3 wanted
    assert len(cluster.held(NodeRole.ACTIVE)) == 2 and len(cluster.held(NodeRole.SPARE)) == 2
    assert _free(cluster) == []


def test_a_job_behind_it_in_line_holds_back_nothing() -> None:
    cluster = _running_without_spares(3, _ahead(priority=-1))
    assert len(cluster.held(NodeRole.SPARE)) == 2  # refilled before the failure
    cluster.fail_a_worker()
    assert len(cluster.held(NodeRole.SPARE)) == 2 and len(_free(cluster)) == 1
