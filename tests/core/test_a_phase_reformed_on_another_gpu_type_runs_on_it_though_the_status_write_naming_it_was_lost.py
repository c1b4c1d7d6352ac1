"""A phase that re-formed on another GPU type it accepts after a mass failure runs on that
type though the status writes of the passes that formed the pool there and created its
workers were lost: the record still named the type it ran on before, and with live workers
the phase no longer re-forms, so the next pass took the old type for the one it runs on.
It gave back its spare of the type its workers run on and claimed a spare of the old type
(``SparesRefilled``), which a gang of the new type could not use: when a node failed the
spare promoted was of the wrong type, so the pool was given up and formed again, the move
said a second time. Now the type is read from the cluster — every active node the live
generation runs on is of another type the phase accepts, none of the recorded one — and
the record names it again."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.model import ClaimNode, EmitEvent, Plan, ReleaseNode
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

POLICY = {"notReadyGrace": "30s", "massFailure": {"maxFailedPercent": 100}}


def _cluster() -> Cluster:
    the_nodes = nodes("h", 5) + nodes("g", 5, gpu="H200", rack="r2")
    cluster = Cluster(
        spec(phase("train", 4, 4, gpu_types=["H100", "H200"]), spares=1, failurePolicy=POLICY),
        {n.name: n for n in the_nodes},
    )
    cluster.settle()
    assert cluster.held(NodeRole.ACTIVE) == ["h00", "h01", "h02", "h03"]
    assert cluster.held(NodeRole.SPARE) == ["h04"]
    return cluster


def _fail(cluster: Cluster, names: list[str]) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)


def _passes(cluster: Cluster, count: int, lost: int = 0) -> list[Plan]:
    """``count`` passes 30 s apart; the status writes of the first ``lost`` are lost."""
    plans: list[Plan] = []
    for i in range(count):
        before = cluster.status
        plans.append(cluster.step())
        if i < lost:
            cluster.status = before
        cluster.advance(30)
    return plans


def _said(plans: list[Plan], reason: str) -> list[EmitEvent]:
    return [a for p in plans for a in p.actions if isinstance(a, EmitEvent) and a.reason == reason]


def test_the_record_names_the_type_the_live_workers_run_on_and_the_spare_stays_of_it() -> None:
    cluster = _cluster()
    _fail(cluster, ["h00", "h01", "h02"])
    moved = _passes(cluster, 2, lost=2)  # the pool formed on H200, its workers created
    assert sorted(p.node_name for p in cluster.running()) == ["g00", "g01", "g02", "g03"]
    assert cluster.status.phases[0].gpu_type == "H100"  # as the last status written
    plans = _passes(cluster, 4)
    assert cluster.status.phases[0].gpu_type == "H200"
    assert cluster.held(NodeRole.SPARE) == ["g04"]
    acts = [a for p in plans for a in p.actions]
    assert not [a for a in acts if isinstance(a, ReleaseNode)]
    assert not [a for a in acts if isinstance(a, ClaimNode)]
    assert len(_said(moved + plans, "PhaseGPUTypeChanged")) >= 1
    assert cluster.status.restarts == 1


def test_a_node_failing_later_is_replaced_by_the_spare_of_the_type_it_runs_on() -> None:
    cluster = _cluster()
    _fail(cluster, ["h00", "h01", "h02"])
    _passes(cluster, 2, lost=2)
    _passes(cluster, 2)
    _fail(cluster, ["g00"])
    plans = _passes(cluster, 6)
    assert cluster.status.phases[0].gpu_type == "H200"
    assert sorted(p.node_name for p in cluster.running()) == ["g01", "g02", "g03", "g04"]
    assert not [
        n for n in cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE) if n[0] == "h"
    ]
    assert not _said(plans, "PhaseGPUTypeChanged")  # said when it moved, not again
    assert cluster.status.restarts == 2
