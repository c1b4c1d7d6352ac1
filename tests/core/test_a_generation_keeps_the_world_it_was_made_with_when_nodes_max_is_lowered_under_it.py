"""``nodes.max`` lowered while some workers of the running generation have succeeded and
others still run (ranks finish a little apart): the resize waits (a restart would run the
finished work again), and the generation is still the one it was made with — every rank up
to its world size. Before, its world was read as the new ``max``: with ranks 0 and 1 done,
an ``AllSucceeded`` phase of 4 completed at once, the next phase started, and ranks 2 and 3
of the old one ran on unwatched."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import PodPhase
from tests.core.builders import Cluster, events, nodes, phase, spec
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit


def _succeed(cluster: Cluster, *ranks: int) -> None:
    for name, p in list(cluster.pods.items()):
        if p.phase_name == "train" and p.rank in ranks and p.phase == PodPhase.RUNNING:
            cluster.pods[name] = replace(p, phase=PodPhase.SUCCEEDED, exit_code=0)


def test_a_phase_whose_max_is_lowered_under_its_running_ranks_waits_for_all_of_them() -> None:
    cluster = Cluster(
        spec(phase("train", 4, 4), phase("validate", 2, 2), spares=1),
        {n.name: n for n in nodes("h", 6)},
    )
    cluster.settle()
    cluster.advance(3600)
    _succeed(cluster, 0, 1)
    cluster.settle()
    assert cluster.status.phase == "train" and cluster.status.state == JobState.RUNNING

    cluster.the_spec = _edit(
        cluster.the_spec, lambda raw: raw["phases"][0].update(nodes={"min": 2, "max": 2})
    )
    cluster.advance(5)
    plans = cluster.settle()
    said = [e for p in plans for e in events(p)]
    assert "PhaseCompleted" not in said and "PoolShrinking" not in said
    assert cluster.status.phase == "train" and cluster.status.world_size == 4
    still = sorted(p.rank for p in cluster.running() if p.phase_name == "train")
    assert still == [2, 3]
    # The nodes the running ranks are on stay the job's active nodes.
    on = {p.node_name for p in cluster.running()}
    assert on <= set(cluster.held(NodeRole.ACTIVE))

    cluster.advance(60)
    _succeed(cluster, 2, 3)
    plans = cluster.settle()
    assert "PhaseCompleted" in [e for p in plans for e in events(p)]
    assert cluster.status.phase == "validate" and cluster.status.state == JobState.RUNNING
    assert {p.phase_name for p in cluster.running()} == {"validate"}
