"""The snapshot carries why a Pending worker does not run: a container's waiting reason,
else the scheduler's; the ordinary start (ContainerCreating) is no reason."""

from __future__ import annotations

from typing import Any

from phased.kube.convert import pod_from_raw


def pending(status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "w"}, "spec": {}, "status": {"phase": "Pending", **status}}


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"name": "worker", "state": {"waiting": {"reason": reason, "message": message}}}


def test_an_image_pull_error_is_the_reason() -> None:
    pod = pod_from_raw(pending({"containerStatuses": [waiting("ImagePullBackOff", "back-off")]}))
    assert (pod.waiting_reason, pod.waiting_message) == ("ImagePullBackOff", "back-off")


def test_an_init_container_waiting_counts_too() -> None:
    pod = pod_from_raw(pending({"initContainerStatuses": [waiting("ErrImagePull")]}))
    assert pod.waiting_reason == "ErrImagePull"


def test_an_unscheduled_pod_carries_the_schedulers_reason_and_message() -> None:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/20 nodes are available: 20 Insufficient cpu.",
    }
    pod = pod_from_raw(pending({"conditions": [cond]}))
    assert pod.waiting_reason == "Unschedulable"
    assert "Insufficient cpu" in pod.waiting_message


def test_a_container_being_created_is_no_reason() -> None:
    scheduled = {"type": "PodScheduled", "status": "True"}
    raw = pending({"conditions": [scheduled], "containerStatuses": [waiting("ContainerCreating")]})
    assert pod_from_raw(raw).waiting_reason == ""
