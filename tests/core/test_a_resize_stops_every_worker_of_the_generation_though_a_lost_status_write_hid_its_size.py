"""``nodes.max`` lowered just after the pass that made the running generation lost its status
write: the status still says the world before (0 for a phase's first generation), so the
workers whose ranks the new ``max`` no longer admits are not counted as workers (their
labels could be forged). The resize restarts the gang all the same, and the gang restart
stops every worker of the phase's older generations, those too. Before, it stopped only the
ranks below the new ``max``: ranks 2 and 3 ran on, unwatched, on nodes the job gave back,
beside the new generation."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.model import CreatePod, DeletePod
from tests.core.builders import Cluster, events, nodes, phase, spec
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit


def test_a_resize_after_a_lost_status_write_stops_the_ranks_beyond_the_new_max() -> None:
    cluster = Cluster(
        spec(phase("prep", 2, 2), phase("train", 4, 4)), {n.name: n for n in nodes("h", 6)}
    )
    cluster.settle()
    cluster.advance(3600)
    cluster.finish_workers("prep")
    for _ in range(6):
        before = cluster.status
        plan = cluster.step()
        if any(isinstance(a, CreatePod) for a in plan.actions):
            cluster.status = before  # the pass that made train's workers lost its status write
            break
    made = sorted(p.name for p in cluster.running() if p.phase_name == "train")
    assert len(made) == 4 and cluster.status.world_size != 4

    cluster.the_spec = _edit(
        cluster.the_spec, lambda raw: raw["phases"][1].update(nodes={"min": 2, "max": 2})
    )
    cluster.advance(5)
    plans = cluster.settle()
    assert "PoolShrinking" in events(plans[0])
    assert sorted(a.name for a in plans[0].actions if isinstance(a, DeletePod)) == made
    running = sorted(p.name for p in cluster.running())
    assert running == ["llm-train-g1-0", "llm-train-g1-1"]
    on = {p.node_name for p in cluster.running()}
    assert on == set(cluster.held(NodeRole.ACTIVE))
