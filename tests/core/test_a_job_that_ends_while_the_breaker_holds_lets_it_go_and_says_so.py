"""A job that ends (its last phase done, or failed) while the breaker holds failures gives
back its nodes as every finished job does; the breaker then holds nothing. ``MassFailure``
turns False (reason ``JobFinished``) with one Normal event naming what it held, and
``status.breaker.held`` is emptied: a finished job's status does not go on saying that
remediation is paused and that ``phased proceed`` would answer nodes it no longer holds."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import PodPhase
from tests.core.builders import Cluster, events, node, phase, spec, with_ready


def _holding(completion: str = "RankZeroSucceeded", **extra) -> tuple[Cluster, list[str]]:
    """Ten actives; three of them (not rank 0's) go dark together: the breaker holds them."""
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}") for i in range(12)}
    train = phase("train", 8, 10, completion={"mode": completion}, **extra)
    cluster = Cluster(spec(train), the_nodes)
    cluster.settle()
    rank0 = next(p.node_name for p in cluster.running() if p.rank == 0)
    dark = [n for n in cluster.held(NodeRole.ACTIVE) if n != rank0][:3]
    for name in dark:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    plan = cluster.step()
    assert "MassFailure" in events(plan) and [h.node for h in plan.status.breaker.held] == dark
    return cluster, dark


def _mass(cluster: Cluster):
    return next(c for c in cluster.status.conditions if c.type == "MassFailure")


def _ends_clear(cluster: Cluster, dark: list[str], state: JobState) -> None:
    said = []
    for _ in range(3):
        said += events(cluster.step())
        cluster.advance(5)
    assert cluster.status.state == state
    assert _mass(cluster).status == "False" and _mass(cluster).reason == "JobFinished"
    assert all(name in _mass(cluster).message for name in dark)
    assert said.count("MassFailureCleared") == 1
    assert cluster.status.breaker.held == []
    assert cluster.held(NodeRole.ACTIVE) == [] and cluster.held(NodeRole.SPARE) == []


def test_the_last_phase_succeeding_while_the_breaker_holds_clears_it():
    cluster, dark = _holding()
    rank0 = next(p for p in cluster.running() if p.rank == 0)
    cluster.pods[rank0.name] = replace(rank0, phase=PodPhase.SUCCEEDED, exit_code=0)
    _ends_clear(cluster, dark, JobState.SUCCEEDED)


def test_a_job_failing_while_the_breaker_holds_clears_it():
    cluster, dark = _holding(completion="AllSucceeded", maxDuration="1h")
    cluster.advance(3600)
    _ends_clear(cluster, dark, JobState.FAILED)
