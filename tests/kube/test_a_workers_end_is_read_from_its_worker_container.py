"""When a worker ended is when its ``worker`` container did (``finishedAt``), not a sidecar:
what tells a trouble that caused the failure from one that came after it."""

from __future__ import annotations

from datetime import UTC, datetime

from phased.kube.convert import pod_from_raw


def _pod(*statuses: dict[str, object]) -> dict[str, object]:
    return {
        "metadata": {"name": "w"},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Failed", "containerStatuses": list(statuses)},
    }


def _ended(name: str, at: str, code: int = 1) -> dict[str, object]:
    return {"name": name, "state": {"terminated": {"exitCode": code, "finishedAt": at}}}


def test_the_worker_containers_finish_is_the_workers_end() -> None:
    pod = pod_from_raw(
        _pod(
            _ended("exporter", "2026-12-04T10:00:09Z", 0), _ended("worker", "2026-12-04T10:00:05Z")
        )
    )
    assert pod.finished == datetime(2026, 12, 4, 10, 0, 5, tzinfo=UTC)


def test_a_worker_still_running_has_no_end() -> None:
    running = {"name": "worker", "state": {"running": {"startedAt": "2026-12-04T09:00:00Z"}}}
    raw = _pod(running)
    raw["status"] = {"phase": "Running", "containerStatuses": [running]}
    assert pod_from_raw(raw).finished is None


def test_an_end_only_a_sidecar_reports_is_not_the_workers() -> None:
    pod = pod_from_raw(_pod(_ended("exporter", "2026-12-04T10:00:09Z")))
    assert pod.finished is None
