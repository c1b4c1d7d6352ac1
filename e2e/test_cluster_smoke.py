"""Smoke tests of the test cluster itself: real control plane, simulated GPU nodes, and the
kwok stages that let tests drive reality. Run with PHASED_E2E=1 pytest e2e/ after
`make cluster`. (That the cluster comes down cleanly is checked by e2e/cluster/down.sh,
which exits non-zero when a process or port is left behind.)"""

from __future__ import annotations

import time
from typing import Any

import pytest
from e2e import lib

H100 = "NVIDIA-H100-80GB-HBM3"
H200 = "NVIDIA-H200"

pytestmark = pytest.mark.timeout(240)


def test_nodes_carry_gpu_capacity_and_labels(core: Any) -> None:
    nodes = {n.metadata.name: n for n in lib.nodes(core)}
    h100 = [n for n in nodes.values() if n.metadata.labels.get("nvidia.com/gpu.product") == H100]
    h200 = [n for n in nodes.values() if n.metadata.labels.get("nvidia.com/gpu.product") == H200]
    ascend = [
        n for n in nodes.values() if n.metadata.labels.get("accelerator") == "huawei-Ascend910B"
    ]
    assert h100, "no H100 nodes"
    assert h200, "no H200 nodes"
    assert ascend, "no Ascend 910B nodes"
    for n in h100 + h200:
        labels = n.metadata.labels
        assert n.status.capacity[lib.NVIDIA_GPU] == "8"
        assert labels["nvidia.com/gpu.present"] == "true"
        assert labels["nvidia.com/gpu.count"] == "8"
        for key in (
            "topology.kubernetes.io/zone",
            "topology.phased.dev/block",
            "topology.phased.dev/rack",
            "nvidia.com/gpu.memory",
            "nvidia.com/cuda.driver.major",
        ):
            assert labels.get(key), f"{n.metadata.name} lacks label {key}"
    for n in ascend:
        assert n.status.capacity[lib.ASCEND_NPU] == "8"
    cpu_only = [
        n
        for n in nodes.values()
        if lib.NVIDIA_GPU not in (n.status.capacity or {})
        and lib.ASCEND_NPU not in (n.status.capacity or {})
    ]
    assert cpu_only, "no CPU-only nodes"
    not_ready = [name for name in nodes if lib.node_ready(core, name) != "True"]
    assert not not_ready, f"nodes not Ready: {not_ready}"
    # The GPU labels are what the operator's default settings select on.
    assert {n.metadata.labels["topology.kubernetes.io/zone"] for n in h100} >= {"zone-a", "zone-b"}


def test_gpu_pod_is_scheduled_on_a_gpu_node_and_runs(
    core: Any, namespace: str, simulated: bool
) -> None:
    core.create_namespaced_pod(namespace, lib.sim_pod("eight-gpus", gpus=8))
    pod = lib.wait_pod_phase(core, namespace, "eight-gpus", "Running", timeout=60)
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels.get("nvidia.com/gpu.present") == "true"
    assert pod.status.pod_ip, "a running pod has a pod IP"
    ready = {c.type: c.status for c in pod.status.conditions}
    assert ready.get("Ready") == "True"


def test_pod_asking_for_more_gpus_than_any_node_has_stays_pending(
    core: Any, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, lib.sim_pod("too-big", gpus=9))

    def unschedulable() -> bool:
        conds = core.read_namespaced_pod_status("too-big", namespace).status.conditions or []
        return any(c.type == "PodScheduled" and c.reason == "Unschedulable" for c in conds)

    lib.wait_until(unschedulable, 30, message="the scheduler to report Unschedulable")
    assert lib.pod_phase(core, namespace, "too-big") == "Pending"


def test_annotated_pods_succeed_or_fail(core: Any, namespace: str, simulated: bool) -> None:
    core.create_namespaced_pod(namespace, lib.sim_pod("ok", succeed_after="2s"))
    core.create_namespaced_pod(namespace, lib.sim_pod("bad", fail_after="2s"))
    ok = lib.wait_pod_phase(core, namespace, "ok", "Succeeded", timeout=60)
    bad = lib.wait_pod_phase(core, namespace, "bad", "Failed", timeout=60)
    assert lib.container_exit_code(ok) == 0
    assert lib.container_exit_code(bad) == 1
    # It ran for (about) the annotated time before ending.
    term = ok.status.container_statuses[0].state.terminated
    assert (term.finished_at - term.started_at).total_seconds() >= 1.5


def test_pod_with_finalizer_waits_for_it_then_goes(
    core: Any, namespace: str, simulated: bool
) -> None:
    body = lib.sim_pod("held")
    body["metadata"]["finalizers"] = ["phased.dev/test-hold"]
    core.create_namespaced_pod(namespace, body)
    lib.wait_pod_phase(core, namespace, "held", "Running")
    core.delete_namespaced_pod("held", namespace)
    lib.wait_until(
        lambda: core.read_namespaced_pod("held", namespace).metadata.deletion_timestamp,
        10,
        message="deletionTimestamp",
    )
    assert lib.pod_phase(core, namespace, "held") is not None  # held by its finalizer
    # Meanwhile its containers stop and it goes Failed, as a kubelet reports a deleted pod.
    lib.wait_pod_phase(core, namespace, "held", "Failed", timeout=30)
    core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})
    lib.wait_pod_gone(core, namespace, "held", timeout=30)


def test_not_ready_node_is_tainted_by_node_lifecycle_controller_and_recovers(
    core: Any, namespace: str, sim_node: Any, simulated: bool
) -> None:
    node = sim_node("cpu-003")
    body = lib.sim_pod("on-node", node_name=node)
    core.create_namespaced_pod(namespace, body)
    lib.wait_pod_phase(core, namespace, "on-node", "Running")

    lib.make_node_not_ready(core, node)
    taints = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    lib.wait_for_taint(core, node, taints, timeout=60)
    # A pod on the NotReady node can still be deleted (kwok keeps handling it).
    core.delete_namespaced_pod("on-node", namespace)
    lib.wait_pod_gone(core, namespace, "on-node", timeout=30)

    lib.make_node_ready(core, node)
    lib.wait_for_no_taint(core, node, taints, timeout=60)


def test_silent_node_goes_unknown_keeps_its_pods_and_comes_back(
    core: Any, namespace: str, sim_node: Any, simulated: bool
) -> None:
    """Heartbeats stop: Ready=Unknown after the node-monitor grace (50 s here), the
    unreachable taint, and a pod deleted there stays Terminating (nobody confirms)."""
    node = sim_node("cpu-002")
    body = lib.sim_pod("on-silent", node_name=node)
    body["spec"]["terminationGracePeriodSeconds"] = 30  # a graceful delete, which waits
    core.create_namespaced_pod(namespace, body)
    lib.wait_pod_phase(core, namespace, "on-silent", "Running")

    lib.silence_node(core, node)
    lib.wait_until(lambda: lib.node_ready(core, node) == "Unknown", 90, message="Unknown")
    lib.wait_for_taint(core, node, ["node.kubernetes.io/unreachable"], timeout=30)
    core.delete_namespaced_pod("on-silent", namespace)
    lib.wait_until(
        lambda: core.read_namespaced_pod("on-silent", namespace).metadata.deletion_timestamp,
        10,
        message="deletionTimestamp",
    )
    time.sleep(3)
    assert lib.pod_phase(core, namespace, "on-silent") == "Running"  # nobody confirms

    lib.unsilence_node(core, node)
    lib.wait_pod_gone(core, namespace, "on-silent", timeout=30)
    lib.wait_for_no_taint(core, node, ["node.kubernetes.io/unreachable"], timeout=60)


def test_gpu_fault_condition_on_a_ready_node(core: Any, sim_node: Any, simulated: bool) -> None:
    node = sim_node("h200-003")
    lib.set_gpu_fault(core, node, "GPUXidError")
    cond = lib.node_condition(core, node, "GPUXidError")
    assert cond.status == "True" and cond.reason == "XidError"
    assert lib.node_ready(core, node) == "True"
    lib.clear_gpu_fault(core, node)
    assert lib.node_condition(core, node, "GPUXidError") is None


def test_lower_allocatable_gpus_stays_lowered(core: Any, sim_node: Any, simulated: bool) -> None:
    node = sim_node("h200-002")
    lib.drop_allocatable_gpus(core, node, 6)
    assert lib.allocatable(core, node) == 6
    # Through a NotReady/Ready round trip (the stages rewrite status) it stays at 6.
    lib.make_node_not_ready(core, node)
    lib.make_node_ready(core, node)
    assert lib.allocatable(core, node) == 6
    assert core.read_node_status(node).status.capacity[lib.NVIDIA_GPU] == "8"
