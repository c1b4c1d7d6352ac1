"""``restartScope: Worker`` replaces a lost rank alone, which rejoins the others' elastic
rendezvous. Once a worker of the generation has succeeded, its agent has left that
rendezvous for good: a rank started alone could never rejoin it (it waits out the
rendezvous timeout and fails, again at every replacement, while the job says Recovering).
So a rank lost then — its node failed, its worker failed, its pod went, or it is stuck
Pending — restarts the gang: a new generation of every rank, resuming from the last
checkpoint, which ends the phase when it succeeds.

A replacement made while its peers still ran, which fails once one of them has succeeded,
had no rendezvous to rejoin either: the gang restarts without spending ``restartBudget``.
And a rank that succeeded is not an interrupted one: a failure is resumed (without
reports) once every rank of the generation is Running or has succeeded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import JobState, NodeRole, PhaseState
from phased.core.model import CreatePod, PodPhase
from tests.core.builders import Cluster, events, node, of_type, phase, spec, with_ready

NOT_READY_GRACE = 30


def _cluster(budget: int = 20, **policy: Any) -> Cluster:
    """Three ranks of train (Worker scope, torchrun c10d), one spare, a phase after it."""
    the_spec = spec(
        phase("train", 3, 3),
        phase("eval", 1, 1),
        spares=1,
        failurePolicy={"restartScope": "Worker", "restartBudget": budget, **policy},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(6)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _rank(cluster: Cluster, rank: int) -> str:
    """The name of ``rank``'s newest worker in the running generation."""
    gen = cluster.status.restart_generation
    mine = [
        p
        for p in cluster.pods.values()
        if p.rank == rank and p.generation == gen and p.phase_name == "train"
    ]
    return max(mine, key=lambda p: int(p.labels["phased.dev/attempt"])).name


def _set(cluster: Cluster, rank: int, state: PodPhase) -> None:
    name = _rank(cluster, rank)
    cluster.pods[name] = replace(
        cluster.pods[name], phase=state, exit_code=0 if state == PodPhase.SUCCEEDED else 1
    )


def _lose_node_of(cluster: Cluster, rank: int) -> str:
    lost = cluster.pods[_rank(cluster, rank)].node_name
    assert lost is not None
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(NOT_READY_GRACE + 1)
    return lost


def _created(plan: Any) -> list[str]:
    return sorted(c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod))


def test_a_node_lost_after_its_peers_succeeded_restarts_the_gang_which_ends_the_phase():
    cluster = _cluster()
    _set(cluster, 0, PodPhase.SUCCEEDED)
    _set(cluster, 2, PodPhase.SUCCEEDED)
    cluster.step()
    lost = _lose_node_of(cluster, 1)
    plan = cluster.step()
    assert "NodeFailed" in events(plan)
    # No rank 1 alone beside ranks that are done: every rank again, at once (nothing is
    # still stopping: the others ended, the lost worker went with no grace).
    assert _created(plan) == [f"llm-train-g1-{i}" for i in range(3)]
    assert cluster.status.restart_generation == 1
    (said,) = [a.message for a in plan.actions if getattr(a, "reason", "") == "WorkersRestarted"]
    assert "generation 0 -> 1" in said and "0, 2 already succeeded" in said
    assert cluster.status.worker_restarts == 0  # a lost node is not the code's fault
    cluster.step()
    assert cluster.status.state == JobState.RUNNING
    (entry,) = cluster.status.failures
    assert entry.node == lost and entry.resumed is not None
    cluster.finish_workers("train")
    cluster.step()
    assert cluster.status.phase == "eval"
    assert cluster.status.phases[0].state == PhaseState.SUCCEEDED


def test_a_worker_failing_after_its_peers_succeeded_restarts_the_gang_on_the_budget():
    cluster = _cluster(budget=1)
    _set(cluster, 0, PodPhase.SUCCEEDED)
    _set(cluster, 1, PodPhase.SUCCEEDED)
    _set(cluster, 2, PodPhase.FAILED)
    plan = cluster.step()
    assert _created(plan) == [f"llm-train-g1-{i}" for i in range(3)]
    assert cluster.status.restart_generation == 1
    assert cluster.status.worker_restarts == 1  # it ran with its peers: its own failure


def test_a_rank_stuck_pending_after_its_peers_succeeded_starts_again_with_the_gang():
    cluster = _cluster(pendingGrace="5m")
    _set(cluster, 0, PodPhase.SUCCEEDED)
    _set(cluster, 2, PodPhase.SUCCEEDED)
    name = _rank(cluster, 1)
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.PENDING, node_name=None)
    cluster.advance(301)
    plan = cluster.decide()
    assert "WorkersStuckPending" in events(plan)
    assert _created(plan) == [f"llm-train-g1-{i}" for i in range(3)]
    assert plan.status.restart_generation == 1


def test_a_replacement_failing_once_its_peers_succeeded_restarts_the_gang_for_free():
    """Rank 1's node fails while the others still run: it is replaced alone, as the scope
    says. The others then succeed without it (they were done), and the replacement, with no
    rendezvous left to join, fails: the gang restarts, and the budget (0) is not spent."""
    cluster = _cluster(budget=0)
    _lose_node_of(cluster, 1)
    plan = cluster.step()
    assert _created(plan) == ["llm-train-g0-1-a1"]
    _set(cluster, 0, PodPhase.SUCCEEDED)
    _set(cluster, 2, PodPhase.SUCCEEDED)
    cluster.step()
    assert cluster.status.state == JobState.RUNNING  # rank 1 runs again, the others are done
    _set(cluster, 1, PodPhase.FAILED)
    plan = cluster.step()
    assert cluster.status.state != JobState.FAILED, cluster.status.message
    assert cluster.status.worker_restarts == 0 and cluster.status.restart_generation == 1
    assert _created(plan) == [f"llm-train-g1-{i}" for i in range(3)]


def test_a_replacement_that_succeeds_beside_its_peers_ends_the_phase():
    cluster = _cluster()
    _lose_node_of(cluster, 1)
    cluster.step()
    _set(cluster, 0, PodPhase.SUCCEEDED)
    _set(cluster, 2, PodPhase.SUCCEEDED)
    cluster.step()
    _set(cluster, 1, PodPhase.SUCCEEDED)
    cluster.step()
    assert cluster.status.phase == "eval"
    assert [e.resumed is not None for e in cluster.status.failures] == [True]


def test_a_rank_lost_while_every_peer_runs_is_still_replaced_alone():
    cluster = _cluster()
    _lose_node_of(cluster, 1)
    plan = cluster.step()
    assert _created(plan) == ["llm-train-g0-1-a1"]
    assert cluster.status.restart_generation == 0
    assert NodeRole.SPARE in {n.role for n in cluster.nodes.values()}
