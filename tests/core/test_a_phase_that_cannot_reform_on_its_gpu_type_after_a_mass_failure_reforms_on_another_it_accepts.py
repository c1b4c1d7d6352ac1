"""A mass failure leaves a running phase short of ``nodes.min`` on the GPU type it ran on,
while free nodes of another type its ``gpuTypes`` accepts would make up the whole pool: the
gang restarts there, from the last checkpoint (``PHASED_RESUME=true``), the record naming
the type it runs on now, with one event saying why. The ledger keeps every entry, each
answered by a node of the new type, and the restart is counted once. Before, a phase that
had started was bound to the type it started on: it gave its pool back and waited for
that type (publishing no need at all when the cluster's healthy nodes of it were fewer than
``min``) until a person released the quarantined nodes, while the nodes it accepts sat
idle. A phase whose type can still make up its pool stays on it, and one that no type can
make whole waits for the type it ran on, as before."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.model import CreatePod, EmitEvent, Plan
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

POLICY = {"notReadyGrace": "30s", "massFailure": {"maxFailedPercent": 100}}


def _cluster(h100: int, h200: int) -> Cluster:
    the_nodes = nodes("h", h100) + nodes("g", h200, gpu="H200", rack="r2")
    cluster = Cluster(
        spec(phase("train", 4, 4, gpu_types=["H100", "H200"]), failurePolicy=POLICY),
        {n.name: n for n in the_nodes},
    )
    cluster.settle()
    assert cluster.status.phases[0].gpu_type == "H100"
    assert cluster.held(NodeRole.ACTIVE) == ["h00", "h01", "h02", "h03"]
    return cluster


def _fail(cluster: Cluster, lost: list[str]) -> list[Plan]:
    for name in lost:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    plans: list[Plan] = []
    for _ in range(4):
        plans += cluster.settle()
        cluster.advance(30)
    return plans


def _said(plans: list[Plan]) -> list[EmitEvent]:
    return [a for p in plans for a in p.actions if isinstance(a, EmitEvent)]


def _resumed(plans: list[Plan]) -> set[str]:
    """PHASED_RESUME of each worker the plans create."""
    made = [a for p in plans for a in p.actions if isinstance(a, CreatePod)]
    env = [a.manifest["spec"]["containers"][0]["env"] for a in made]
    return {next(e["value"] for e in vars_ if e["name"] == "PHASED_RESUME") for vars_ in env}


def test_three_of_four_h100_nodes_lost_reform_the_phase_on_the_free_h200_nodes() -> None:
    cluster = _cluster(4, 4)
    plans = _fail(cluster, ["h00", "h01", "h02"])
    assert cluster.status.state == "Running"
    assert sorted(p.node_name for p in cluster.running()) == ["g00", "g01", "g02", "g03"]
    assert cluster.held(NodeRole.ACTIVE) == ["g00", "g01", "g02", "g03"]
    assert cluster.held(NodeRole.QUARANTINED) == ["h00", "h01", "h02"]
    assert "h03" not in cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)
    assert cluster.status.phases[0].gpu_type == "H200"
    assert cluster.status.phases[0].gpu_types == ["H100", "H200"]  # the shape is the same
    assert _resumed(plans) == {"true"}
    assert cluster.status.restarts == 1
    entries = cluster.status.failures
    assert [e.node for e in entries] == ["h00", "h01", "h02"]
    assert all(e.resumed is not None for e in entries)
    assert {e.replaced_by for e in entries} <= {"g00", "g01", "g02", "g03"}
    said = _said(plans)
    moved = [e for e in said if e.reason == "PhaseGPUTypeChanged"]
    assert len(moved) == 1 and "H200" in moved[0].message and "H100" in moved[0].message
    assert not [e for e in said if e.reason == "NodeTypeChanged"]  # h03 did not change


def test_a_phase_whose_type_still_makes_up_its_pool_stays_on_it() -> None:
    cluster = _cluster(7, 4)
    plans = _fail(cluster, ["h00", "h01", "h02"])
    assert cluster.status.phases[0].gpu_type == "H100"
    assert cluster.held(NodeRole.ACTIVE) == ["h03", "h04", "h05", "h06"]
    assert sorted(p.node_name for p in cluster.running()) == ["h03", "h04", "h05", "h06"]
    assert not [e for e in _said(plans) if e.reason == "PhaseGPUTypeChanged"]


def test_a_phase_no_type_can_make_whole_waits_for_the_type_it_ran_on() -> None:
    cluster = _cluster(4, 3)
    plans = _fail(cluster, ["h00", "h01", "h02"])
    assert cluster.status.state == "Waiting"
    assert cluster.status.phases[0].gpu_type == "H100"
    assert cluster.held(NodeRole.ACTIVE) == []
    assert "H100" in cluster.status.message
    assert not [e for e in _said(plans) if e.reason == "PhaseGPUTypeChanged"]
