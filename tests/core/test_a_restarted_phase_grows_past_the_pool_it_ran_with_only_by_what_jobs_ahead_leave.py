"""A phase that has started re-forms after a restart without waiting in line, but only to
make up the pool it ran with (its last world and its spares; a ``nodes.min`` raised above
that world is growth too: see the test of a restarted phase taking a raised min): growing
beyond that, toward ``nodes.max``, it takes only the free nodes beyond what the waiting
jobs ahead of it in line need, as a phase being admitted does. Before, any restart
(a worker's failure, a stuck start) let a running job take every free node up to ``max``,
from under a job of higher priority waiting for them."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import Claimant, JobRef
from tests.core.builders import T0, Cluster, node, nodes, owned, phase, spec, with_ready

OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)
AHEAD = Claimant("uid-ahead", priority=9, created=T0, wants={"H100": 3})
BEHIND = Claimant("uid-behind", priority=-1, created=T0, wants={"H100": 3})


def _running(the_spec, free: int, held_by_other: int) -> Cluster:
    """The job runs on the ``free`` nodes there were; then the other job's nodes come free."""
    pool = {n.name: n for n in nodes("h", free)}
    pool.update({n.name: owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("o", held_by_other)})
    cluster = Cluster(the_spec, pool)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    for n in nodes("o", held_by_other):
        cluster.nodes[n.name] = n  # released by the other job
    cluster.advance(60)
    cluster.settle()
    return cluster


def test_a_restart_does_not_grow_into_the_nodes_a_job_ahead_waits_for() -> None:
    cluster = _running(spec(phase("train", 2, 4)), free=2, held_by_other=2)
    cluster.waiting = (AHEAD,)
    cluster.fail_a_worker()
    assert cluster.held(NodeRole.ACTIVE) == ["h00", "h01"]
    assert cluster.status.world_size == 2 and cluster.status.state == JobState.RUNNING
    assert cluster.status.waiting_for == {}  # it runs: it is in nobody's way in line


def test_it_grows_by_what_the_job_ahead_leaves() -> None:
    cluster = _running(spec(phase("train", 2, 6)), free=2, held_by_other=4)
    cluster.waiting = (AHEAD,)
    cluster.fail_a_worker()
    assert len(cluster.held(NodeRole.ACTIVE)) == 3  # 4 free, 3 kept for the job ahead
    assert cluster.status.world_size == 3


def test_a_job_behind_it_in_line_keeps_nothing_from_it() -> None:
    cluster = _running(spec(phase("train", 2, 4)), free=2, held_by_other=2)
    cluster.waiting = (BEHIND,)
    cluster.fail_a_worker()
    assert len(cluster.held(NodeRole.ACTIVE)) == 4 and cluster.status.world_size == 4


def test_a_lost_node_is_replaced_and_the_spares_refilled_whatever_the_line() -> None:
    the_spec = spec(phase("train", 2, 4), spares=1)
    cluster = _running(the_spec, free=3, held_by_other=0)
    assert len(cluster.held(NodeRole.ACTIVE)) == 2 and len(cluster.held(NodeRole.SPARE)) == 1
    cluster.nodes.update({n.name: n for n in nodes("f", 2, rack="r2")})
    cluster.waiting = (AHEAD,)
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(600)
    cluster.settle()
    # the spare took the lost node's place; a free node refilled the spares (2 + 1 as before)
    assert len(cluster.held(NodeRole.ACTIVE)) == 2 and len(cluster.held(NodeRole.SPARE)) == 1
    assert cluster.status.world_size == 2


def test_a_phase_not_started_yet_still_waits_for_the_job_ahead() -> None:
    pool = [*nodes("h", 4), node("x", rack="r2")]
    cluster = Cluster(spec(phase("train", 2, 4)), {n.name: n for n in pool})
    cluster.waiting = (Claimant("uid-ahead", priority=9, created=T0, wants={"H100": 4}),)
    cluster.step()
    assert cluster.held(NodeRole.ACTIVE) == []  # 5 free, 4 kept for the job ahead: 1 < 2
    assert cluster.status.waiting_for == {"H100": 2}
