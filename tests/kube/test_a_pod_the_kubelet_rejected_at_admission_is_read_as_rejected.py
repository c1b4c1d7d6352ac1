"""A pod the kubelet would not admit is read as rejected, with the kubelet's reason: it is
Failed, no container of it ever started, and its message is the kubelet's ``Pod was
rejected: ...``. A worker that failed by its own exit, and one Failed with another message,
is not."""

from __future__ import annotations

from typing import Any

from phased.core.model import PodPhase
from phased.kube.convert import pod_from_raw


def failed(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "w"}, "spec": {"nodeName": "n1"}, "status": {**status}}


def test_a_device_allocation_refused_at_admission_is_a_rejection() -> None:
    pod = pod_from_raw(
        failed(
            {
                "phase": "Failed",
                "reason": "UnexpectedAdmissionError",
                "message": "Pod was rejected: Allocate failed due to requested number of "
                "devices unavailable for nvidia.com/gpu. Requested: 8, Available: 2",
            }
        )
    )
    assert pod.phase == PodPhase.FAILED
    assert pod.rejected and pod.reason == "UnexpectedAdmissionError"


def test_a_resource_taken_under_the_scheduler_is_a_rejection() -> None:
    pod = pod_from_raw(
        failed(
            {
                "phase": "Failed",
                "reason": "OutOfnvidia.com/gpu",
                "message": "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu",
            }
        )
    )
    assert pod.rejected and pod.reason == "OutOfnvidia.com/gpu"


def test_a_worker_that_exited_is_no_rejection() -> None:
    exited = {"name": "worker", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
    pod = pod_from_raw(failed({"phase": "Failed", "containerStatuses": [exited]}))
    assert pod.phase == PodPhase.FAILED and not pod.rejected


def test_a_pod_evicted_for_node_pressure_is_no_rejection() -> None:
    pod = pod_from_raw(
        failed(
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory.",
            }
        )
    )
    assert not pod.rejected


def test_a_pending_pod_is_never_rejected() -> None:
    pod = pod_from_raw(failed({"phase": "Pending", "message": "Pod was rejected: stale"}))
    assert not pod.rejected
