"""The spare that replaces a failed node is one under no suspicion, when the job holds one,
however much nearer a spare in trouble within its grace lies: GPUs missing from its
allocatable, a GPU-fault condition True, not Ready. Before, the nearest Ready spare was
promoted whatever its trouble: a rank replaced alone was put on it (onto GPUs reporting a
fault, or a node short of GPUs where it waited Pending), and a gang restart swapped it out
again before its next generation while the ledger named it as the replacement. A spare in
trouble is still promoted when no other is left: it may yet recover within its grace."""

from dataclasses import replace
from datetime import datetime

from phased.api.v1alpha1 import NodeRole
from phased.core.model import NodeCondition, NodeInfo, SetNodeRole
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

FAULT = "GPUXidError"


def _running(scope: str = "Gang", spares: int = 2) -> Cluster:
    policy = {
        "restartScope": scope,
        "gpuDropGrace": "5m",
        "gpuFaultGrace": "5m",
        "gpuFaultConditions": [FAULT],
        "massFailure": {"maxFailedPercent": 100},
    }
    launcher = {"type": "Torchrun", "rendezvous": "C10d" if scope == "Worker" else "Static"}
    the_spec = spec(phase("train", 2, 2), spares=spares, failurePolicy=policy, launcher=launcher)
    c = Cluster(the_spec, {n.name: n for n in nodes("h", 2 + spares)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"]
    return c


def _short_of_gpus(n: NodeInfo) -> NodeInfo:
    return replace(n, allocatable={**n.allocatable, "nvidia.com/gpu": 4})


def _faulting(n: NodeInfo, since: datetime) -> NodeInfo:
    return replace(n, conditions=(*n.conditions, NodeCondition(FAULT, "True", since)))


def _lose(c: Cluster, name: str = "h00") -> None:
    c.advance(10)
    c.step()  # the spare's trouble is seen
    c.nodes[name] = with_ready(c.nodes[name], False, c.now)
    c.advance(60)  # past notReadyGrace, within the spare's grace
    c.step()


def _promoted(c: Cluster) -> list[str]:
    return [a.node for a in c.log if isinstance(a, SetNodeRole) and a.role == NodeRole.ACTIVE]


def test_a_rank_replaced_alone_goes_to_the_healthy_spare_not_to_one_short_of_gpus():
    c = _running("Worker")
    c.nodes["h02"] = _short_of_gpus(c.nodes["h02"])
    _lose(c, "h01")  # rank 1's: losing rank 0's restarts the gang
    assert _promoted(c) == ["h03"]
    assert c.status.failures[0].replaced_by == "h03"
    assert sorted(p.node_name or "" for p in c.running()) == ["h00", "h03"]


def test_a_rank_replaced_alone_goes_to_the_healthy_spare_not_to_one_reporting_a_gpu_fault():
    c = _running("Worker")
    c.nodes["h02"] = _faulting(c.nodes["h02"], c.now)
    _lose(c, "h01")  # rank 1's: losing rank 0's restarts the gang
    assert _promoted(c) == ["h03"]
    assert sorted(p.node_name or "" for p in c.running()) == ["h00", "h03"]


def test_a_gang_restart_names_the_spare_that_really_took_the_place():
    c = _running("Gang")
    c.nodes["h02"] = _short_of_gpus(c.nodes["h02"])
    _lose(c)
    assert c.held(NodeRole.ACTIVE) == ["h01", "h03"]
    assert _promoted(c) == ["h03"]  # promoted once, not promoted and swapped back
    assert c.status.failures[0].replaced_by == "h03"


def test_a_spare_in_trouble_is_still_promoted_when_no_other_is_left():
    c = _running("Worker", spares=1)
    c.nodes["h02"] = _short_of_gpus(c.nodes["h02"])
    _lose(c)
    assert _promoted(c) == ["h02"]
    assert c.status.failures[0].replaced_by == "h02"
