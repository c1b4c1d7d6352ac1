"""``nodes.max`` lowered in the pass that finds a node failed: the gang restarts once, at the
new size, and the failure is answered as it would be without the resize — the worker on the
lost node is deleted with no grace (its kubelet is gone: a graceful delete would leave it
Terminating for ever), the restart is counted in ``restarts``, and the ledger has the entry."""

from __future__ import annotations

from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import DeletePod
from tests.core.builders import events, with_ready
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import (
    _edit,
    _set_train_nodes,
    _training,
)


def test_the_lost_worker_goes_at_once_and_the_restart_is_counted() -> None:
    cluster = _training(spares=1, count=8)
    lost = cluster.held(NodeRole.ACTIVE)[0]
    (on_lost,) = [p.name for p in cluster.running() if p.node_name == lost]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now - timedelta(0, 600))
    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(2, 2))

    plan = cluster.step()
    deletes = {a.name: a for a in plan.actions if isinstance(a, DeletePod)}
    assert deletes[on_lost].force and deletes[on_lost].grace_seconds is None
    assert all(not d.force for name, d in deletes.items() if name != on_lost)
    assert events(plan).count("WorkersRestarted") == 1 and "PoolShrinking" in events(plan)
    assert plan.status.restart_generation == 1
    assert plan.status.restarts == 1 and plan.status.worker_restarts == 0
    assert [e.node for e in plan.status.failures] == [lost]

    cluster.settle()
    assert cluster.status.state == JobState.RUNNING and cluster.status.world_size == 2
    assert cluster.status.restarts == 1 and cluster.status.phases[1].restarts == 1
    assert cluster.held(NodeRole.QUARANTINED) == [lost]
