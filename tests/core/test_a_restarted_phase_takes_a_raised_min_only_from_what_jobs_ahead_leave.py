"""A phase that has started re-forms after a restart without waiting in line only to make up
the pool it ran with: its last world and its spares. ``nodes.min`` raised above that world
on a running job asks for nodes it never ran with, so those come, as growth toward
``nodes.max`` does, only from the free nodes the waiting jobs ahead of it leave; when they
leave too few, the job gives its pool up and waits in line for the new ``min`` like any job
being admitted. Before, the re-forming phase took ``max(world, nodes.min)`` whatever the
line: raising ``min`` on a running job let it jump a job of higher priority waiting for the
same nodes."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import Claimant, JobRef, PodPhase
from tests.core.builders import T0, Cluster, nodes, owned, phase, spec

OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)


def _running_at_two_with_two_nodes_come_free() -> Cluster:
    pool = {n.name: n for n in nodes("h", 2)}
    pool.update({n.name: owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("o", 2)})
    cluster = Cluster(spec(phase("train", 2, 4)), pool)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING and cluster.status.world_size == 2
    for n in nodes("o", 2):
        cluster.nodes[n.name] = n  # released by the other job
    cluster.advance(60)
    cluster.settle()
    return cluster


def _raise_min_and_fail_a_worker(cluster: Cluster, ahead_wants: int) -> None:
    cluster.the_spec = spec(phase("train", 3, 4))
    cluster.waiting = (Claimant("uid-ahead", priority=9, created=T0, wants={"H100": ahead_wants}),)
    name = sorted(p for p in cluster.pods if cluster.pods[p].phase == PodPhase.RUNNING)[0]
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED)
    cluster.advance(60)
    cluster.settle()


def test_a_raised_min_does_not_take_the_nodes_a_job_ahead_waits_for() -> None:
    cluster = _running_at_two_with_two_nodes_come_free()
    _raise_min_and_fail_a_worker(cluster, ahead_wants=3)
    # 2 held + 0 of the 2 free (both kept for the job ahead) < 3: it waits in line
    assert cluster.status.state == JobState.WAITING
    assert cluster.status.waiting_for == {"H100": 3}
    assert not any(n.startswith("o") for n in cluster.held(NodeRole.ACTIVE))


def test_a_raised_min_is_reached_with_what_the_job_ahead_leaves() -> None:
    cluster = _running_at_two_with_two_nodes_come_free()
    _raise_min_and_fail_a_worker(cluster, ahead_wants=1)
    assert cluster.status.state == JobState.RUNNING
    assert len(cluster.held(NodeRole.ACTIVE)) == 3 and cluster.status.world_size == 3
