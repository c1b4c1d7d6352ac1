"""A worker placed on a node that never starts there within ``pendingGrace`` — its sandbox
the node's network plugin cannot make, its image the node's disk or registry mirror cannot
pull (``ContainerCreating``, ``ErrImagePull`` on that node alone) — while its peers of the
same generation started on other nodes points at the node, not the worker spec. The
failed start is retried as ever (``pendingRestarts`` counts it), and on that retry the node
trades places with a healthy spare (``TroubledNodeSwapped``), so the retry goes elsewhere.
Before, the retry put the worker back on the same node, which stalled it again, and with
the retries spent the job failed as ``WorkersStuckPending`` over one broken node. When no
rank started anywhere (an image that cannot be pulled at all), no node is blamed."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import EmitEvent, PodPhase
from phased.core.times import format_time
from tests.core.builders import Cluster, node, of_type, phase, spec, with_ready

PENDING_GRACE = 600


def _cluster(scope: str = "Gang") -> Cluster:
    nodes = {f"n{i}": node(f"n{i}", rack="r1") for i in range(3)}
    nodes |= {"s-near": node("s-near", rack="r1"), "s-far": node("s-far", rack="r2")}
    elastic = {"launcher": {"type": "Torchrun", "rendezvous": "C10d"}} if scope != "Gang" else {}
    the_spec = spec(
        phase("train", 3, 3), spares=2, failurePolicy={"restartScope": scope}, **elastic
    )
    return Cluster(the_spec, nodes)


def _said(cluster: Cluster, plans: list) -> list[str]:  # type: ignore[type-arg]
    return [f"{e.reason}: {e.message}" for p in plans for e in of_type(p, EmitEvent)]


def test_the_retry_goes_to_a_spare_and_the_job_runs_on() -> None:
    cluster = _cluster()
    cluster.stalling = {"n1"}  # its kubelet never starts the worker placed there
    cluster.settle()
    assert [p.waiting_reason for p in cluster.pods.values() if p.node_name == "n1"] == [
        "ContainerCreating"
    ]
    cluster.advance(PENDING_GRACE + 1)
    said = _said(cluster, cluster.settle())
    assert any(e.startswith("WorkersStuckPending") for e in said)
    swapped = [e for e in said if e.startswith("TroubledNodeSwapped")]
    assert len(swapped) == 1 and "active node n1 did not start worker" in swapped[0]
    assert "ContainerCreating" in swapped[0] and "spare s-near takes its place" in swapped[0]
    assert "n1" in cluster.held(NodeRole.SPARE)
    assert "s-near" in cluster.held(NodeRole.ACTIVE)
    cluster.step()
    assert {p.node_name for p in cluster.running()} == {"n0", "n2", "s-near"}
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.restart_generation == 1
    assert cluster.status.phases[0].pending_restarts == 0  # the start succeeded: given back


def test_a_rank_replaced_alone_goes_to_the_spare_too() -> None:
    cluster = _cluster("Worker")
    cluster.stalling = {"n1"}
    cluster.settle()
    cluster.advance(PENDING_GRACE + 1)
    cluster.settle()
    cluster.step()
    assert cluster.status.restart_generation == 0  # the rank alone, not the gang
    assert {p.node_name for p in cluster.running()} == {"n0", "n2", "s-near"}
    assert "n1" in cluster.held(NodeRole.SPARE)


def test_no_node_is_blamed_when_no_rank_started_anywhere() -> None:
    cluster = _cluster()
    cluster.stalling = {"n0", "n1", "n2", "s-near", "s-far"}  # the image cannot be pulled
    cluster.settle()
    cluster.advance(PENDING_GRACE + 1)
    said = _said(cluster, cluster.settle())
    assert any(e.startswith("WorkersStuckPending") for e in said)
    assert not any(e.startswith("TroubledNodeSwapped") for e in said)
    assert set(cluster.held(NodeRole.ACTIVE)) == {"n0", "n1", "n2"}


def _swapped_out(cluster: Cluster) -> None:
    """n1 stalls its worker; the retry goes to s-near, and n1 is held as a spare."""
    cluster.stalling = {"n1"}
    cluster.settle()
    cluster.advance(PENDING_GRACE + 1)
    cluster.settle()
    cluster.step()
    cluster.stalling = set()
    assert "n1" in cluster.held(NodeRole.SPARE)


def _fail(cluster: Cluster, name: str) -> list:  # type: ignore[type-arg]
    cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(60)
    return cluster.settle()


def test_the_node_is_marked_and_promoted_only_when_no_other_spare_is_left() -> None:
    """Its pod, which said what it did, is deleted by the retry; the mark on the node keeps
    it (a restarted operator reads it there). The next failure in its rack is answered by
    the spare farther away, not by the node that stalled the last worker; with that spare
    gone too, it is promoted — the last resort, trying it again — and the mark goes."""
    cluster = _cluster()
    _swapped_out(cluster)
    mark = cluster.nodes["n1"].annotations[labels.ANNOTATION_STALLED]
    assert mark.startswith(format_time(cluster.now - timedelta(seconds=PENDING_GRACE + 1))[:13])
    assert "did not start worker" in mark and "ContainerCreating" in mark
    said = _said(cluster, _fail(cluster, "n0"))  # n0 is in rack r1, as n1 is; s-far is not
    assert any("spare s-far promoted to active, replacing n0" in e for e in said), said
    assert "n1" in cluster.held(NodeRole.SPARE)
    assert {p.node_name for p in cluster.running()} == {"s-far", "n2", "s-near"}
    cluster.advance(3600)  # past the breaker's window: the next failure is on its own
    cluster.settle()
    said = _said(cluster, _fail(cluster, "n2"))
    assert any("spare n1 promoted to active, replacing n2" in e for e in said), said
    assert labels.ANNOTATION_STALLED not in cluster.nodes["n1"].annotations
    assert {p.node_name for p in cluster.running()} == {"s-far", "n1", "s-near"}


def test_the_marked_spare_is_the_first_given_up_when_the_spares_shrink() -> None:
    cluster = _cluster()
    _swapped_out(cluster)
    cluster.the_spec = cluster.the_spec.model_copy(
        update={"spares": cluster.the_spec.spares.model_copy(update={"count": 1})}
    )
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["s-far"]  # n1 released, though nearer
    assert labels.ANNOTATION_STALLED not in cluster.nodes["n1"].annotations  # no mark left


def test_a_troubled_active_does_not_trade_places_with_the_marked_spare() -> None:
    """n0 NotReady within its grace when a worker fails and the gang restarts: it would
    trade places with a healthy spare before the next generation is made, but the only
    spare under no suspicion is the one a worker stalled on, so it stays."""
    cluster = _cluster()
    _swapped_out(cluster)
    for name in ("n0", "s-far"):
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    worker = next(p for p in cluster.running() if p.node_name == "n2")
    cluster.pods[worker.name] = replace(worker, phase=PodPhase.FAILED, exit_code=1)
    said = _said(cluster, [cluster.step(), cluster.step()])
    assert any(e.startswith("WorkersRestarted") for e in said), said
    assert not any(e.startswith("TroubledNodeSwapped") for e in said), said
    assert "n1" in cluster.held(NodeRole.SPARE)
