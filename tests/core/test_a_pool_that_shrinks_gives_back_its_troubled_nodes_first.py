"""An edit that shrinks the pool — ``nodes.max`` lowered below the running world, or
``spares.count`` lowered — gives back the nodes in trouble within their grace (NotReady, a
GPU fault, GPUs missing) before healthy ones: the job keeps the nodes it can run on, and the
troubled one, not failed yet, goes back unquarantined (a node that is not Ready is never
claimed by anyone until it is)."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import ReleaseNode
from tests.core.builders import Cluster, events, nodes, phase, spec, with_ready
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import (
    _edit,
    _set_train_nodes,
    _training,
)


def test_lowering_max_gives_back_the_troubled_active_and_keeps_the_healthy_ones() -> None:
    cluster = _training(spares=1, count=8)
    troubled = cluster.held(NodeRole.ACTIVE)[1]
    cluster.nodes[troubled] = with_ready(cluster.nodes[troubled], False, cluster.now)
    cluster.advance(5)
    cluster.step()  # a suspect now, within its grace
    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(2, 2))
    plans = cluster.settle()
    released = {a.node for p in plans for a in p.actions if isinstance(a, ReleaseNode)}
    assert troubled in released
    assert "TroubledNodeSwapped" not in [e for p in plans for e in events(p)]
    held = cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)
    assert troubled not in held and len(held) == 3
    assert all(cluster.nodes[n].ready for n in held)
    assert cluster.status.state == JobState.RUNNING and cluster.status.world_size == 2
    assert cluster.status.failures == [] and cluster.status.suspects == []


def test_lowering_spares_gives_back_the_troubled_spare() -> None:
    cluster = _training(spares=2, count=8)
    spares = cluster.held(NodeRole.SPARE)
    troubled = spares[0]  # the nearest to the actives: kept if distance alone decided
    cluster.nodes[troubled] = with_ready(cluster.nodes[troubled], False, cluster.now)
    cluster.advance(5)
    cluster.step()
    cluster.the_spec = _edit(cluster.the_spec, lambda raw: raw.update(spares={"count": 1}))
    plans = cluster.settle()
    released = [a.node for p in plans for a in p.actions if isinstance(a, ReleaseNode)]
    assert released == [troubled]
    assert cluster.held(NodeRole.SPARE) == [spares[1]]
    assert cluster.status.suspects == []


def test_lowering_max_gives_back_a_troubled_spare_before_a_healthy_active() -> None:
    """The actives beyond the new ``max`` would go back as the spares are full: the spare in
    trouble goes instead, and a healthy active takes its place as the spare. Before, the
    healthy active went back and the job kept the NotReady spare, which then failed."""
    cluster = _training(spares=1, count=8)
    (troubled,) = cluster.held(NodeRole.SPARE)
    cluster.nodes[troubled] = with_ready(cluster.nodes[troubled], False, cluster.now)
    cluster.advance(5)
    cluster.step()  # a suspect now, within its grace
    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(3, 3))
    plans = cluster.settle()
    released = [a.node for p in plans for a in p.actions if isinstance(a, ReleaseNode)]
    assert released == [troubled]
    held = cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)
    assert len(cluster.held(NodeRole.ACTIVE)) == 3 and len(cluster.held(NodeRole.SPARE)) == 1
    assert troubled not in held and all(cluster.nodes[n].ready for n in held)
    assert cluster.status.state == JobState.RUNNING and cluster.status.world_size == 3
    assert cluster.status.failures == [] and cluster.status.suspects == []


def test_a_boundary_to_a_smaller_phase_gives_back_a_troubled_spare_first() -> None:
    cluster = Cluster(
        spec(phase("train", 4, 4), phase("validate", 2, 2), spares=1),
        {n.name: n for n in nodes("h", 6)},
    )
    cluster.settle()
    (troubled,) = cluster.held(NodeRole.SPARE)
    cluster.advance(60)
    cluster.nodes[troubled] = with_ready(cluster.nodes[troubled], False, cluster.now)
    cluster.advance(5)
    cluster.step()  # a suspect now, within its grace
    cluster.finish_workers("train")
    plans = cluster.settle()
    released = {a.node for p in plans for a in p.actions if isinstance(a, ReleaseNode)}
    assert troubled in released and len(released) == 2
    held = cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)
    assert len(held) == 3 and all(cluster.nodes[n].ready for n in held)
    assert cluster.status.phase == "validate" and cluster.status.state == JobState.RUNNING
    assert cluster.status.failures == []
