"""No worker is created while the breaker holds failures, and that includes a rank replaced
alone (``restartScope: Worker``): a worker failing on a healthy node, or stuck Pending, is
answered once the breaker lets go — as a gang restart's next generation waits for it — and
its restart is counted then, once."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState
from phased.core.model import CreatePod, PodPhase
from tests.core.builders import Cluster, events, node, of_type, phase, spec, with_ready

NOT_READY_GRACE = 30


def _cluster(**policy: object) -> Cluster:
    the_spec = spec(
        phase("train", 5, 5),
        failurePolicy={"restartScope": "Worker", **policy},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(5)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _trip(cluster: Cluster) -> None:
    """Two of five nodes go dark together: more than 20 % of the pool."""
    for name in ("n0", "n1"):
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(NOT_READY_GRACE + 1)
    plan = cluster.step()
    assert "MassFailure" in events(plan)


def _worker_on(cluster: Cluster, node_name: str) -> str:
    return next(p.name for p in cluster.pods.values() if p.node_name == node_name)


def _heal(cluster: Cluster) -> None:
    for name in ("n0", "n1"):
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.advance(5)


def test_a_worker_failing_on_a_healthy_node_is_replaced_once_the_breaker_lets_go():
    cluster = _cluster()
    _trip(cluster)
    name = _worker_on(cluster, "n3")
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=1)
    for _ in range(3):
        cluster.advance(10)
        plan = cluster.step()
        assert of_type(plan, CreatePod) == []
    assert cluster.status.restarts == 0 and cluster.status.worker_restarts == 0
    _heal(cluster)
    plan = cluster.step()
    assert "MassFailureCleared" in events(plan)
    created = [c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod)]
    assert created == [f"{name}-a1"]
    # It failed while two nodes of its generation were dark: its collective's doing, not its
    # code's, so the restart is not charged to restartBudget.
    assert cluster.status.restarts == 1 and cluster.status.worker_restarts == 0


def test_a_worker_stuck_pending_is_started_again_once_the_breaker_lets_go():
    cluster = _cluster(pendingGrace="1m")
    _trip(cluster)
    name = _worker_on(cluster, "n3")
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.PENDING, node_name=None)
    cluster.advance(61)
    plan = cluster.decide()
    assert "WorkersStuckPending" in events(plan)
    assert of_type(plan, CreatePod) == [] and plan.status.phases[0].pending_restarts == 0
    cluster.apply(plan)
    _heal(cluster)
    plan = cluster.decide()
    created = [c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod)]
    assert created == [f"{name}-a1"] and plan.status.phases[0].pending_restarts == 1
