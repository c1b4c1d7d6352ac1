"""A worker has ended when its ``worker`` container has, as that container ended (Succeeded
with exit code 0, else Failed), though a sidecar that is no init container keeps the pod
Running; such a pod is marked lingering (it still holds its node). Before, the pod was read
as Running for as long as the sidecar ran: a worker that failed or finished beside the
sidecar the docs show (``exporter``) was never seen to end, and the job never restarted
nor finished."""

from __future__ import annotations

from typing import Any

from phased.core.model import PodPhase
from phased.kube.convert import pod_from_raw


def running(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    status = {
        "phase": "Running",
        "containerStatuses": list(containers),
        "initContainerStatuses": list(init),
    }
    return {"metadata": {"name": "w"}, "spec": {}, "status": status}


def ended(name: str, code: int, reason: str = "") -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code, "reason": reason}}}


def runs(name: str) -> dict[str, Any]:
    return {"name": name, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


def test_a_worker_failing_beside_a_running_sidecar_is_failed_and_lingering() -> None:
    pod = pod_from_raw(running(runs("exporter"), ended("worker", 1, "Error")))
    assert (pod.phase, pod.exit_code, pod.reason) == (PodPhase.FAILED, 1, "Error")
    assert pod.lingering


def test_a_worker_succeeding_beside_a_running_sidecar_is_succeeded_and_lingering() -> None:
    pod = pod_from_raw(running(ended("worker", 0, "Completed"), runs("exporter")))
    assert (pod.phase, pod.exit_code) == (PodPhase.SUCCEEDED, 0)
    assert pod.lingering


def test_the_exit_code_is_the_worker_containers_not_a_sidecars() -> None:
    raw = running(ended("exporter", 0), ended("worker", 3))
    raw["status"]["phase"] = "Failed"
    pod = pod_from_raw(raw)
    assert (pod.phase, pod.exit_code, pod.lingering) == (PodPhase.FAILED, 3, False)


def test_init_container_sidecars_leave_with_the_worker_and_do_not_linger() -> None:
    pod = pod_from_raw(running(ended("worker", 0), init=(runs("proxy"),)))
    assert (pod.phase, pod.lingering) == (PodPhase.SUCCEEDED, False)


def test_a_running_worker_is_running_whatever_its_sidecars() -> None:
    pod = pod_from_raw(running(runs("worker"), ended("exporter", 1)))
    assert (pod.phase, pod.lingering) == (PodPhase.RUNNING, False)
