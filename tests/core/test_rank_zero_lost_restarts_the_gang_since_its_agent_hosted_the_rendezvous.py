"""``restartScope: Worker`` replaces a lost rank alone, which rejoins the others' elastic c10d
rendezvous. That rendezvous lives in a store hosted by the torchrun agent of rank 0 (the
agent whose address is ``PET_RDZV_ENDPOINT``, rank 0's pod): when rank 0's worker is lost
— its node failed, its worker failed, its pod went — the store went with it and every other
agent fails on its next keep-alive. A rank 0 started alone hosts an empty store nobody is
in. So a lost rank 0 restarts the gang: a new generation of every rank (a new rendezvous id)
from the last checkpoint. Before, rank 0 was replaced alone; its peers then failed one by
one on healthy nodes, each failure spending ``restartBudget`` and replaced alone in turn.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import JobState
from phased.core.model import CreatePod, PodPhase
from tests.core.builders import Cluster, node, of_type, phase, spec, with_ready

NOT_READY_GRACE = 30
RESTARTED = "WorkersRestarted"


def _cluster(budget: int = 20) -> Cluster:
    the_spec = spec(
        phase("train", 3, 3),
        spares=1,
        failurePolicy={"restartScope": "Worker", "restartBudget": budget},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(5)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _rank0(cluster: Cluster) -> str:
    return next(p.name for p in cluster.running() if p.rank == 0)


def _created(plan: Any) -> list[str]:
    return sorted(c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod))


def _restarted(cluster: Cluster, plans: list[Any]) -> None:
    created = sorted(name for plan in plans for name in _created(plan))
    assert created == [f"llm-train-g1-{i}" for i in range(3)]
    assert cluster.status.restart_generation == 1
    said = [a.message for p in plans for a in p.actions if getattr(a, "reason", "") == RESTARTED]
    assert any("generation 0 -> 1" in m and "rendezvous" in m for m in said), said


def test_rank_zeros_worker_failing_restarts_the_gang_on_the_budget_once() -> None:
    cluster = _cluster()
    name = _rank0(cluster)
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=1)
    plans = cluster.settle()
    _restarted(cluster, plans)
    assert cluster.status.worker_restarts == 1


def test_rank_zeros_node_lost_restarts_the_gang_on_a_spare() -> None:
    cluster = _cluster()
    lost = cluster.pods[_rank0(cluster)].node_name
    assert lost is not None
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(NOT_READY_GRACE + 1)
    plans = cluster.settle()
    _restarted(cluster, plans)
    assert cluster.status.worker_restarts == 0
    assert lost not in {p.node_name for p in cluster.running()}


def test_another_rank_lost_is_still_replaced_alone() -> None:
    cluster = _cluster()
    name = next(p.name for p in cluster.running() if p.rank == 2)
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=1)
    plan = cluster.step()
    assert _created(plan) == ["llm-train-g0-2-a1"]
    assert cluster.status.restart_generation == 0
