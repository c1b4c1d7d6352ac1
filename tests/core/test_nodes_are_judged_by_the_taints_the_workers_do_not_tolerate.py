"""Taints are judged against the workers' own tolerations, as the scheduler judges them.

A managed cluster's GPU pools come tainted (``nvidia.com/gpu=present:NoSchedule``) and the
workers tolerate it in their template: such nodes are free for the job (before, every node
with any NoSchedule taint was left alone, so a job whose nodes all carried one never
started). A taint the workers do not tolerate keeps a free node out (``NodesLeftAlone``
says which), and one that someone puts on a node the job holds (a maintenance taint) is
treated as a person's cordon: no spare carrying it is promoted, and once no worker runs
there the node leaves the pool (``TaintedNodeReleased``) and the pool is made whole. The
taints the node controllers derive from a node's health (``node.kubernetes.io/``) are
failure handling's to judge, never a reason to give a node back."""

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import EmitEvent, PodPhase, SetNodeRole, Taint
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
MAINTENANCE = Taint("maintenance", "firmware", "NoExecute")
TOLERATES_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _spec(tolerations: list[dict[str, Any]] | None = None, spares: int = 1) -> Any:
    template: dict[str, Any] = {"image": "registry.example/llm:1", "command": ["train"]}
    if tolerations is not None:
        template["spec"] = {"tolerations": tolerations}
    return spec(phase("train", 2, 2), spares=spares, template=template)


def _tainted(c: Cluster, name: str, *taints: Taint) -> None:
    c.nodes[name] = replace(c.nodes[name], taints=(*c.nodes[name].taints, *taints))


def _events(c: Cluster, reason: str) -> list[str]:
    return [a.message for a in c.log if isinstance(a, EmitEvent) and a.reason == reason]


def _settle(c: Cluster) -> None:
    for _ in range(12):
        c.advance(30)
        plan = c.step()
        if not any(not isinstance(a, EmitEvent) for a in plan.actions):
            return
    raise AssertionError("not quiet")


def test_gpu_nodes_tainted_for_gpu_pods_are_claimed_by_workers_that_tolerate_the_taint():
    c = Cluster(_spec(TOLERATES_GPU), {n.name: n for n in nodes("h", 3)})
    for name in c.nodes:
        _tainted(c, name, GPU_TAINT)
    c.settle()
    assert c.status.state == JobState.RUNNING
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]


def test_workers_that_do_not_tolerate_the_taint_leave_the_nodes_alone_and_say_why():
    c = Cluster(_spec(), {n.name: n for n in nodes("h", 3)})
    for name in c.nodes:
        _tainted(c, name, GPU_TAINT)
    c.settle()
    assert c.status.state == JobState.WAITING
    assert c.held(NodeRole.ACTIVE) == []
    (said,) = _events(c, "NodesLeftAlone")
    assert "h00 (Tainted: nvidia.com/gpu:NoSchedule)" in said


def test_a_spare_someone_tainted_is_not_promoted_and_leaves_the_pool():
    c = Cluster(_spec(TOLERATES_GPU), {n.name: n for n in nodes("h", 4)})
    c.settle()
    assert c.held(NodeRole.SPARE) == ["h02"]
    _tainted(c, "h02", MAINTENANCE)
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    c.advance(600)  # past notReadyGrace
    _settle(c)
    promoted = [a.node for a in c.log if isinstance(a, SetNodeRole) and a.role == NodeRole.ACTIVE]
    assert "h02" not in promoted
    assert "h02" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)
    assert c.nodes["h02"].taints == (MAINTENANCE,)  # our marks gone, theirs kept
    (said,) = _events(c, "TaintedNodeReleased")
    assert "h02" in said and "maintenance:NoExecute" in said
    live = [p for p in c.pods.values() if p.generation == c.status.restart_generation]
    assert len(live) == 2 and all(p.phase == PodPhase.RUNNING for p in live)
    assert {p.node_name for p in live} == {"h01", "h03"}


def test_an_active_node_whose_worker_a_noexecute_taint_evicted_is_given_back_and_replaced():
    c = Cluster(_spec(TOLERATES_GPU), {n.name: n for n in nodes("h", 3)})
    c.settle()
    _tainted(c, "h00", MAINTENANCE)
    evicted = next(p.name for p in c.pods.values() if p.node_name == "h00")
    del c.pods[evicted]  # the taint manager's eviction
    _settle(c)
    assert "h00" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)
    assert len(_events(c, "TaintedNodeReleased")) == 1
    live = [p for p in c.pods.values() if p.generation == c.status.restart_generation]
    assert {p.node_name for p in live} == {"h01", "h02"}
    assert all(p.phase == PodPhase.RUNNING for p in live)
    assert c.status.failures == []  # nothing failed: a person took the node back


def test_a_worker_running_under_a_noschedule_taint_keeps_its_node():
    c = Cluster(_spec(TOLERATES_GPU), {n.name: n for n in nodes("h", 3)})
    c.settle()
    _tainted(c, "h00", Taint("maintenance", "soon", "NoSchedule"))
    _settle(c)
    assert "h00" in c.held(NodeRole.ACTIVE)  # a NoSchedule taint stops no running worker
    assert _events(c, "TaintedNodeReleased") == []


def test_tolerated_taints_and_the_node_controllers_taints_give_no_node_back():
    c = Cluster(_spec(TOLERATES_GPU), {n.name: n for n in nodes("h", 3)})
    c.settle()
    _tainted(c, "h02", GPU_TAINT, Taint("node.kubernetes.io/not-ready", "", "NoExecute"))
    _settle(c)
    assert c.held(NodeRole.SPARE) == ["h02"]
    assert _events(c, "TaintedNodeReleased") == []
