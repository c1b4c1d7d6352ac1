"""``nodes.max`` lowered below the running world: the pass that restarts the gang at the new
size deletes the workers, then the operator is killed (or the status write refused) before
the status says so. The next pass finds the old generation still the running one, some or
all of its workers gone — deleted by the resize itself. It is still the resize: not counted
in ``restarts`` and no stop charged to the interruption budget, as when the write landed.
Before, the gone workers were taken as vanished: the resize became a counted restart ("every
worker of generation 0 is gone", or "worker(s) gone: rank 0") with a stop charged."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from phased.api.v1alpha1 import NodeRole
from phased.core.model import DeletePod, EmitEvent
from tests.core.builders import Cluster, events, nodes, phase, spec
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit


@pytest.mark.parametrize("deleted", [1, 3, 4])
def test_a_resize_whose_status_write_was_lost_after_its_deletes_is_not_a_restart(
    deleted: int,
) -> None:
    cluster = Cluster(spec(phase("train", 4, 4), spares=1), {n.name: n for n in nodes("h", 6)})
    cluster.settle()
    cluster.advance(3600)
    cluster.the_spec = _edit(
        cluster.the_spec, lambda raw: raw["phases"][0].update(nodes={"min": 2, "max": 2})
    )
    cluster.advance(5)

    plan = cluster.decide()
    assert "PoolShrinking" in events(plan)
    deletes = [a for a in plan.actions if isinstance(a, DeletePod)]
    assert len(deletes) == 4
    # The workers asked to stop take their grace to leave; then the operator is killed: no
    # status write.
    for action in deletes[:deleted]:
        cluster.pods[action.name] = replace(
            cluster.pods[action.name], stop_by=cluster.now + timedelta(seconds=30)
        )

    cluster.advance(3)
    plans = [cluster.step()]
    cluster.advance(30)
    for name in [n for n, p in cluster.pods.items() if p.deleting]:
        del cluster.pods[name]  # their grace is over
    plans += cluster.settle()
    said = [a for p in plans for a in p.actions if isinstance(a, EmitEvent)]
    restarted = [e.message for e in said if e.reason == "WorkersRestarted"]
    assert restarted == ["phase train: generation 0 -> 1 (nodes.max lowered from 4 to 2)"]
    assert cluster.status.restarts == 0 and cluster.status.worker_restarts == 0
    assert cluster.status.phases[0].restarts == 0
    assert cluster.status.interruption.stops == []
    assert cluster.status.failures == []
    running = sorted(p.name for p in cluster.running())
    assert running == ["llm-train-g1-0", "llm-train-g1-1"]
    assert {p.node_name for p in cluster.running()} == set(cluster.held(NodeRole.ACTIVE))
