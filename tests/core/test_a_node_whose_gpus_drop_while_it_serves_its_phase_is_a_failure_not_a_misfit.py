"""A node whose GPUs drop below ``gpusPerNode`` while it serves a phase that has started — its
GPU capacity too (a GPU fallen off the bus, the device plugin restarted with fewer devices),
even the GPU type labels GPU discovery writes — is a GPU drop: failure handling judges it
and, once ``gpuDropGrace`` runs out, quarantines it with a ledger entry. It is never given
back to the cluster as a node that "does not fit" the phase: before, the next gang restart
(the workers beside it failing with it) released it as a misfit, unquarantined, with no
ledger entry and no word, and a node the breaker held so was said to have recovered.

A node that merely no longer fits — relabelled to another type with all its GPUs there —
is still given back at the restart, and nothing is quarantined."""

from dataclasses import replace

from phased.api.v1alpha1 import FailureReason, NodeRole
from phased.core import labels
from phased.core.model import NodeInfo, PodPhase, QuarantineNode, ReleaseNode
from tests.core.builders import H100_LABELS, H200_LABELS, Cluster, nodes, phase, spec

POLICY = {"gpuDropGrace": "5m", "massFailure": {"maxFailedPercent": 100}}


def _running(spares: int = 1, **policy: object) -> Cluster:
    the_spec = spec(phase("train", 2, 2), spares=spares, failurePolicy={**POLICY, **policy})
    c = Cluster(the_spec, {n.name: n for n in nodes("h", 2 + spares + 1)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"]
    return c


def _drop(n: NodeInfo, gpus: int = 4, *, unlabel: bool = False) -> NodeInfo:
    """``n`` with ``gpus`` GPUs left, allocatable and capacity; ``unlabel``: GPU discovery's
    type labels gone with them."""
    node_labels = {k: v for k, v in n.labels.items() if not unlabel or k not in H100_LABELS}
    return replace(
        n,
        labels=node_labels,
        allocatable={**n.allocatable, "nvidia.com/gpu": gpus},
        capacity={**n.capacity, "nvidia.com/gpu": gpus},
    )


def _fail_worker_on(c: Cluster, node: str) -> None:
    name = next(p.name for p in c.pods.values() if p.node_name == node)
    c.pods[name] = replace(c.pods[name], phase=PodPhase.FAILED, exit_code=1)


def _walk(c: Cluster, seconds: float, steps: int) -> None:
    for _ in range(steps):
        c.advance(seconds)
        c.step()


def _released(c: Cluster, name: str) -> bool:
    return any(isinstance(a, ReleaseNode) and a.node == name for a in c.log)


def test_an_active_node_whose_gpu_capacity_dropped_is_quarantined_not_released_at_a_restart():
    c = _running()
    c.nodes["h00"] = _drop(c.nodes["h00"])
    _fail_worker_on(c, "h01")  # its peer on h00 lost its GPUs: the collective errors out
    _walk(c, 30, 4)
    assert not _released(c, "h00")
    assert c.status.restart_generation == 1
    running = sorted(p.node_name or "" for p in c.running() if p.generation == 1)
    assert "h00" not in running and len(running) == 2  # the new generation avoids it
    _walk(c, 60, 6)  # past gpuDropGrace
    assert [(f.node, f.reason) for f in c.status.failures] == [
        ("h00", FailureReason.GPU_DROPPED.value)
    ]
    assert c.held(NodeRole.QUARANTINED) == ["h00"] and c.nodes["h00"].unschedulable
    assert not _released(c, "h00")


def test_a_node_whose_gpus_and_gpu_type_labels_vanished_is_quarantined_not_released():
    c = _running()
    c.nodes["h00"] = _drop(c.nodes["h00"], 0, unlabel=True)
    _fail_worker_on(c, "h01")
    _walk(c, 60, 8)
    assert not _released(c, "h00")
    assert [f.node for f in c.status.failures] == ["h00"]
    assert c.held(NodeRole.QUARANTINED) == ["h00"]


def test_a_spare_whose_gpus_and_gpu_type_labels_vanished_fails_as_a_spare():
    c = _running(spares=1)
    assert c.held(NodeRole.SPARE) == ["h02"]
    c.nodes["h02"] = _drop(c.nodes["h02"], 0, unlabel=True)
    _walk(c, 60, 8)
    assert not _released(c, "h02")
    [entry] = c.status.failures
    assert (entry.node, entry.resumed) == ("h02", entry.detected)  # nothing was interrupted
    assert c.held(NodeRole.QUARANTINED) == ["h02"]


def test_a_dropped_node_the_breaker_holds_is_not_released_at_a_restart_nor_said_recovered():
    c = _running(spares=1, massFailure={"maxFailedPercent": 20})
    c.nodes["h00"] = _drop(c.nodes["h00"])
    c.nodes["h02"] = _drop(c.nodes["h02"])
    _walk(c, 10, 1)  # seen: a drop's grace runs from its first sighting
    _walk(c, 400, 1)  # both past their grace together: 2 of 3 trip the breaker
    assert sorted(h.node for h in c.status.breaker.held) == ["h00", "h02"]
    _fail_worker_on(c, "h01")  # a worker fails on a healthy node: the gang restarts
    _walk(c, 30, 4)
    assert not _released(c, "h00") and not _released(c, "h02")
    assert sorted(h.node for h in c.status.breaker.held) == ["h00", "h02"]
    assert not any(getattr(a, "reason", "") == "MassFailureCleared" for a in c.log)
    assert not [a for a in c.log if isinstance(a, QuarantineNode)]


def test_a_node_relabelled_to_another_type_with_all_its_gpus_is_given_back_at_the_restart():
    c = _running()
    n = c.nodes["h00"]
    c.nodes["h00"] = replace(n, labels={**n.labels, **H200_LABELS})
    _fail_worker_on(c, "h01")
    _walk(c, 30, 4)
    assert _released(c, "h00")
    assert labels.LABEL_JOB_UID not in c.nodes["h00"].labels
    assert c.status.failures == [] and not [a for a in c.log if isinstance(a, QuarantineNode)]
