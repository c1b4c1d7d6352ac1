"""Workers that fail on healthy nodes once a node of their generation has come back from a
trouble they ran through (a blip within its grace, a rack the breaker held) failed with
their collective, not by their code: the restart is counted in ``restarts`` only, and the
trouble is marked as one that restarted the workers (it counts towards the node's
flapping). Before, only a worker on the node itself was excused: the peers that failed with
it, in the same pass or later at their collective's timeout, spent ``restartBudget``.

Each trouble excuses one restart: a later failure, or one whose workers were made after the
trouble began, is the code's again."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState
from phased.core.model import EmitEvent, PodPhase
from tests.core.builders import Cluster, node, of_type, phase, spec, with_ready

NOT_READY_GRACE = 30


def _cluster(size: int = 5) -> Cluster:
    the_spec = spec(phase("train", size, size), failurePolicy={"restartBudget": 5})
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(size)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    cluster.advance(600)
    cluster.settle()
    return cluster


def _blip(cluster: Cluster, *names: str, seconds: float = NOT_READY_GRACE / 2) -> None:
    """The nodes go NotReady and come back within their grace."""
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.step()
    cluster.advance(seconds)
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.step()


def _fail(cluster: Cluster, *, but: str | None = None) -> list[str]:
    """Every running worker fails (but the one on ``but``) and the cluster settles; the
    events said."""
    for name, p in cluster.pods.items():
        if p.phase == PodPhase.RUNNING and p.node_name != but:
            cluster.pods[name] = replace(p, phase=PodPhase.FAILED, exit_code=1)
    cluster.advance(1)
    return [
        f"{e.reason}: {e.message}" for plan in cluster.settle() for e in of_type(plan, EmitEvent)
    ]


def test_a_gang_failing_once_a_node_came_back_from_a_blip_is_not_charged() -> None:
    cluster = _cluster()
    _blip(cluster, "n1")
    _fail(cluster)
    assert cluster.status.restarts == 1
    assert cluster.status.worker_restarts == 0
    assert [(t.node, t.restarted) for t in cluster.status.troubles] == [("n1", True)]
    assert len(cluster.running()) == 5


def test_peers_failing_at_their_timeout_after_the_blip_are_not_charged() -> None:
    cluster = _cluster()
    _blip(cluster, "n1")
    cluster.advance(600)  # the collective's timeout: the worker on n1 still runs
    cluster.step()
    said = _fail(cluster, but="n1")
    restarted = [e for e in said if e.startswith("WorkersRestarted")]
    assert restarted and "node(s) n1 of the generation were in trouble" in restarted[0]
    assert cluster.status.restarts == 1
    assert cluster.status.worker_restarts == 0
    assert [(t.node, t.restarted) for t in cluster.status.troubles] == [("n1", True)]


def test_peers_failing_after_a_rack_the_breaker_held_came_back_are_not_charged() -> None:
    cluster = _cluster(size=10)
    for name in ("n0", "n1", "n2"):
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(NOT_READY_GRACE + 1)
    cluster.step()
    assert cluster.status.breaker.held
    cluster.advance(300)
    for name in ("n0", "n1", "n2"):
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.step()
    assert not cluster.status.breaker.held
    cluster.advance(600)
    _fail(cluster, but="n0")
    assert cluster.status.restarts == 1
    assert cluster.status.worker_restarts == 0


def test_each_trouble_excuses_one_restart() -> None:
    cluster = _cluster()
    _blip(cluster, "n1")
    _fail(cluster)
    cluster.advance(60)
    _fail(cluster)
    assert cluster.status.restarts == 2
    assert cluster.status.worker_restarts == 1


def test_a_trouble_before_the_workers_were_made_excuses_nothing() -> None:
    cluster = _cluster()
    _blip(cluster, "n1")
    _fail(cluster)  # excused, and a new generation made
    cluster.advance(60)
    _fail(cluster, but="n1")
    assert cluster.status.worker_restarts == 1


def test_with_no_trouble_a_failure_is_the_codes() -> None:
    cluster = _cluster()
    _fail(cluster)
    assert cluster.status.restarts == 1
    assert cluster.status.worker_restarts == 1


def test_a_trouble_that_began_after_the_workers_ended_excuses_nothing() -> None:
    """The workers fail by their code, then a node blips and is back before any pass looks
    (an operator away meanwhile): the trouble, first seen Ready again after the workers'
    ends, came after the failure and is no cause of it."""
    cluster = _cluster()
    ended = cluster.now
    for name, p in cluster.pods.items():
        if p.phase == PodPhase.RUNNING and p.node_name != "n1":
            cluster.pods[name] = replace(p, phase=PodPhase.FAILED, exit_code=1, finished=ended)
    cluster.advance(20)
    cluster.nodes["n1"] = with_ready(cluster.nodes["n1"], True, cluster.now)  # was down unseen
    cluster.advance(5)
    cluster.settle()
    assert [t.node for t in cluster.status.troubles] == ["n1"]
    assert cluster.status.restarts == 1
    assert cluster.status.worker_restarts == 1


def test_a_trouble_that_began_before_the_workers_ended_excuses_them() -> None:
    cluster = _cluster()
    cluster.advance(5)
    cluster.nodes["n1"] = with_ready(cluster.nodes["n1"], True, cluster.now)  # was down unseen
    cluster.advance(600)
    for name, p in cluster.pods.items():
        if p.phase == PodPhase.RUNNING and p.node_name != "n1":
            cluster.pods[name] = replace(
                p, phase=PodPhase.FAILED, exit_code=1, finished=cluster.now
            )
    cluster.advance(1)
    cluster.settle()
    assert cluster.status.restarts == 1
    assert cluster.status.worker_restarts == 0
