"""A node that leaves the pool while the worker meant for it is still Pending (not placed:
the generation answering an earlier failure has not started training) is topped up from
the spares without a restart; when the spares do not cover it — a second and third node of
a rack failing just after the first — the pool is formed again at once by the admission
rule, as for any failure the spares do not cover (``SparesExhausted``): an elastic job
shrinks within ``[min, max]`` and its next generation runs whole, one that cannot make
``nodes.min`` gives its nodes back and waits, its entries open. The new generation replaces
one that never trained, so the mass event stays one restart. Before, the spares promoted
what they could and the generation was left short of a node: its last worker stayed
Pending with no node to go to until ``pendingGrace`` (10 minutes) called it a stuck start —
a second restart counted, and the phase's one ``pendingRestarts`` retry spent, so the next
such failure would have failed the job as ``WorkersStuckPending``."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.conditions import ConditionType, find
from phased.core.model import EmitEvent, PodPhase
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

POLICY = {"notReadyGrace": "10s", "massFailure": {"maxFailedPercent": 100}}


def _generation_pending_after_a_failure(min_nodes: int, spares: int) -> Cluster:
    """Four workers on n00..n03, the other nodes of six spares or free; n00 fails and the
    next generation is made, its workers not placed yet."""
    cluster = Cluster(
        spec(phase("train", min_nodes, 4), spares=spares, failurePolicy=POLICY),
        {n.name: n for n in nodes("n", 6)},
    )
    cluster.settle()
    assert cluster.held(NodeRole.ACTIVE) == ["n00", "n01", "n02", "n03"]
    _fail(cluster, "n00")
    for _ in range(6):
        cluster.apply(cluster.decide())
        if any(p.generation == 1 for p in cluster.pods.values()):
            break
        cluster.advance(1)
    made = [p for p in cluster.pods.values() if p.generation == 1]
    assert len(made) == 4 and all(p.phase == PodPhase.PENDING for p in made)
    assert cluster.status.restarts == 1
    return cluster


def _fail(cluster: Cluster, name: str) -> None:
    cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(11)


def _two_more_fail(cluster: Cluster) -> list[str]:
    cluster.nodes["n01"] = with_ready(cluster.nodes["n01"], False, cluster.now)
    _fail(cluster, "n02")
    said: list[str] = []
    for _ in range(3):
        said += [a.reason for p in cluster.settle() for a in p.actions if isinstance(a, EmitEvent)]
        cluster.advance(31)  # the survivor grace of a gang restart, if any
    return said


def test_an_elastic_job_reforms_smaller_at_once_and_runs_whole() -> None:
    cluster = _generation_pending_after_a_failure(2, spares=1)  # n05 its one spare now
    said = _two_more_fail(cluster)
    newest = cluster.status.restart_generation
    workers = [p for p in cluster.pods.values() if p.generation == newest]
    assert workers and all(p.phase == PodPhase.RUNNING for p in workers)
    assert len(workers) == cluster.status.world_size == len(cluster.held(NodeRole.ACTIVE))
    assert not {p.node_name for p in workers} & {"n00", "n01", "n02"}
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.restarts == 1
    assert cluster.status.phases[0].pending_restarts == 0
    assert "WorkersStuckPending" not in said
    assert [e.node for e in cluster.status.failures] == ["n00", "n01", "n02"]
    assert all(e.resumed is not None for e in cluster.status.failures)


def test_a_job_that_cannot_make_min_gives_its_nodes_back_and_waits_at_once() -> None:
    cluster = _generation_pending_after_a_failure(4, spares=2)  # n05 its one spare now
    said = _two_more_fail(cluster)
    assert cluster.status.state == JobState.WAITING
    assert cluster.held(NodeRole.ACTIVE) == [] and cluster.held(NodeRole.SPARE) == []
    assert not [p for p in cluster.pods.values() if p.phase in (PodPhase.PENDING, PodPhase.RUNNING)]
    exhausted = find(cluster.status.conditions, ConditionType.SPARES_EXHAUSTED)
    assert exhausted is not None and exhausted.status == "True"
    assert cluster.status.restarts == 1
    assert cluster.status.phases[0].pending_restarts == 0
    assert "WorkersStuckPending" not in said
    entries = cluster.status.failures
    assert [e.node for e in entries] == ["n00", "n01", "n02"]
    assert all(e.resumed is None for e in entries)  # the interruption runs on
