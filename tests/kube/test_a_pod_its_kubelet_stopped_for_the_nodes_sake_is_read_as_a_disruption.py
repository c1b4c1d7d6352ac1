"""A worker pod the kubelet stopped for its node's sake and left Failed is read with what the
kubelet said: its ``DisruptionTarget`` condition (node-pressure eviction, graceful node
shutdown), or on a kubelet that writes none, the pod's ``Evicted``/shutdown reason. A worker
that exited by itself, one still running while it is being evicted, and one the kubelet
rejected at admission are no disruption."""

from __future__ import annotations

from typing import Any

from phased.core.model import PodPhase
from phased.kube.convert import pod_from_raw

EXITED = {"name": "worker", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}


def pod(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "w"}, "spec": {"nodeName": "n1"}, "status": status}


def target(reason: str, message: str, status: str = "True") -> dict[str, Any]:
    return {"type": "DisruptionTarget", "status": status, "reason": reason, "message": message}


def test_a_node_pressure_eviction_is_read_from_the_disruption_condition() -> None:
    said = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 20Mi."
    read = pod_from_raw(
        pod(
            {
                "phase": "Failed",
                "reason": "Evicted",
                "conditions": [target("TerminationByKubelet", said)],
                "containerStatuses": [EXITED],
            }
        )
    )
    assert read.phase == PodPhase.FAILED and not read.rejected
    assert read.disruption == f"TerminationByKubelet: {said}"


def test_a_graceful_node_shutdown_on_an_older_kubelet_is_read_from_the_pods_reason() -> None:
    said = "Pod was terminated in response to imminent node shutdown."
    read = pod_from_raw(pod({"phase": "Failed", "reason": "Terminated", "message": said}))
    assert read.disruption == f"Terminated: {said}"


def test_a_worker_that_exited_by_itself_is_no_disruption() -> None:
    read = pod_from_raw(pod({"phase": "Failed", "containerStatuses": [EXITED]}))
    assert read.phase == PodPhase.FAILED and read.disruption == ""


def test_a_worker_still_running_while_it_is_evicted_is_not_read_as_stopped_yet() -> None:
    condition = target("TerminationByKubelet", "The node was low on resource: memory.")
    read = pod_from_raw(pod({"phase": "Running", "conditions": [condition]}))
    assert read.disruption == ""


def test_a_condition_that_is_not_true_says_nothing() -> None:
    condition = target("TerminationByKubelet", "stale", status="False")
    read = pod_from_raw(
        pod({"phase": "Failed", "conditions": [condition], "containerStatuses": [EXITED]})
    )
    assert read.disruption == ""


def test_a_pod_rejected_at_admission_is_a_rejection_not_a_disruption() -> None:
    read = pod_from_raw(
        pod(
            {
                "phase": "Failed",
                "reason": "NodeShutdown",
                "message": "Pod was rejected: Pod was rejected as the node is shutting down.",
            }
        )
    )
    assert read.rejected and read.disruption == ""
