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

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import EmitEvent
from tests.core.builders import Cluster, node, of_type, phase, spec

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
