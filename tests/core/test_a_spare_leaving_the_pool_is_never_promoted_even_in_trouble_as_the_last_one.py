"""A spare that is leaving the pool — cordoned by a person, tainted by someone else with a taint
the workers do not tolerate, or relabelled out of the operator's ``nodeSelector`` — is never
promoted, by any rule: not as a failed node's replacement, not when a pool is formed again
(a phase boundary), and not as the last resort a spare in trouble within its grace is. Such a
spare in trouble is kept for failure handling (its failure is still recorded), then released.

Before, the rules that give such a spare back skip one in trouble, so that failure handling
judges it first; meanwhile the promotions took it: a spare out of the selector with a GPU
fault, the only one left, replaced a failed node (the ledger naming it), and its worker ran on
a node the job was about to give back or quarantine, and was moved again; at a phase boundary
a cordoned or tainted spare in trouble was made active, and swapped out again in the same pass
for a node claimed for it."""

from dataclasses import replace
from datetime import datetime

import pytest

from phased.api.v1alpha1 import NodeRole
from phased.core.model import ClaimNode, NodeCondition, NodeInfo, SetNodeRole, Taint
from phased.core.settings import Settings
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

FAULT = "GPUXidError"
SELECTED = Settings(node_selector="pool=gpu")
POLICY = {
    "gpuFaultGrace": "5m",
    "gpuFaultConditions": [FAULT],
    "massFailure": {"maxFailedPercent": 100},
}


def _selected(count: int) -> dict[str, NodeInfo]:
    return {n.name: replace(n, labels={**n.labels, "pool": "gpu"}) for n in nodes("h", count)}


def _faulting(n: NodeInfo, since: datetime) -> NodeInfo:
    return replace(n, conditions=(*n.conditions, NodeCondition(FAULT, "True", since)))


def _out_of_selector(n: NodeInfo) -> NodeInfo:
    return replace(n, labels={**n.labels, "pool": "cpu"})


def _cordoned(n: NodeInfo) -> NodeInfo:
    return replace(n, unschedulable=True)


def _tainted(n: NodeInfo) -> NodeInfo:
    return replace(n, taints=(*n.taints, Taint("example.com/maintenance", "", "NoSchedule")))


def _promoted(c: Cluster, since: int) -> list[str]:
    return [
        a.node for a in c.log[since:] if isinstance(a, SetNodeRole) and a.role == NodeRole.ACTIVE
    ]


@pytest.mark.parametrize("scope", ["Gang", "Worker"])
def test_a_spare_out_of_the_selector_in_trouble_does_not_replace_a_failed_node(
    scope: str,
) -> None:
    policy = {**POLICY, "restartScope": scope}
    launcher = {"type": "Torchrun", "rendezvous": "C10d" if scope == "Worker" else "Static"}
    the_spec = spec(phase("train", 2, 2), spares=1, failurePolicy=policy, launcher=launcher)
    c = Cluster(the_spec, _selected(4), settings=SELECTED)
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    since = len(c.log)
    c.nodes["h02"] = _out_of_selector(_faulting(c.nodes["h02"], c.now))
    c.advance(10)
    c.step()  # the spare is in trouble within its grace: kept for failure handling
    assert c.held(NodeRole.SPARE) == ["h02"]
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    for _ in range(3):
        c.advance(40)  # past notReadyGrace, within the spare's gpuFaultGrace
        c.step()

    assert "h02" not in _promoted(c, since)
    [entry] = c.status.failures
    assert (entry.node, entry.replaced_by) == ("h00", "h03")  # a selected free node
    assert "h02" not in c.status.pool.active
    assert {p.node_name for p in c.running()} == {"h01", "h03"}


@pytest.mark.parametrize("leaving", [_cordoned, _tainted], ids=["cordoned", "tainted"])
def test_a_cordoned_or_tainted_spare_in_trouble_is_not_made_active_at_a_phase_boundary(
    leaving: object,
) -> None:
    assert callable(leaving)
    the_spec = spec(phase("a", 2, 2), phase("b", 3, 3), spares=1, failurePolicy=POLICY)
    c = Cluster(the_spec, {n.name: n for n in nodes("h", 5)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    c.nodes["h02"] = leaving(_faulting(c.nodes["h02"], c.now))
    c.advance(10)
    c.step()
    since = len(c.log)
    c.finish_workers("a")
    for _ in range(4):
        c.advance(10)
        c.step()

    assert c.status.phase == "b"
    assert "h02" not in _promoted(c, since)  # not made active, not even for a moment
    claimed = [a.node for a in c.log[since:] if isinstance(a, ClaimNode)]
    assert claimed[0] == "h03" and c.nodes["h03"].role == NodeRole.ACTIVE
    assert "h02" not in c.status.pool.active
    assert "h02" not in {p.node_name for p in c.running()}
