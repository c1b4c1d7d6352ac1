"""``phased proceed`` is a read, a decision and a guarded write: when another writer (the
operator's resync refreshing the status) moves the job between them, the command reads the
job again and decides again instead of asking the person to run it again."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from phased.cli.proceed import ATTEMPTS, release
from phased.core import labels
from phased.kube.jobs import JobVerbs
from tests.kube.fake_cluster import FakeCluster, merge

TRIP = "2026-03-01T12:00:00Z"
NOW = datetime(2026, 3, 1, 12, 5, 0, tzinfo=UTC)


def tripped_job() -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ml", "name": "llm", "resourceVersion": "7"},
        "status": {
            "conditions": [
                {
                    "type": "MassFailure",
                    "status": "True",
                    "reason": "ManyNodesFailed",
                    "message": "3 of 8 nodes failed within 60s",
                    "lastTransitionTime": TRIP,
                }
            ],
            "breaker": {
                "held": [
                    {"node": f"n{i}", "role": "active", "reason": "NodeNotReady", "since": TRIP}
                    for i in range(3)
                ]
            },
        },
    }


def resync(job: dict[str, Any]) -> None:
    """The operator's status write: the accounting moves on, the breaker still holds."""
    merge(job, {"status": {"accounting": {"accountedAt": "2026-03-01T12:04:59Z"}}})


def released(job: dict[str, Any]) -> None:
    """The nodes came back meanwhile and the operator closed the breaker."""
    merge(job, {"status": {"breaker": {"held": []}}})
    job["status"]["conditions"][0].update(status="False", reason="Recovered")


def run(cluster: FakeCluster) -> int:
    verbs = JobVerbs(cluster)  # type: ignore[arg-type]
    return asyncio.run(release(verbs, "ml", "llm", clock=lambda: NOW, pause=0))


def approval(cluster: FakeCluster) -> str | None:
    annotations = cluster.jobs[("ml", "llm")]["metadata"].get("annotations") or {}
    value: str | None = annotations.get(labels.ANNOTATION_PROCEED)
    return value


def test_a_status_write_between_read_and_write_is_read_again_and_the_approval_lands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = FakeCluster()
    cluster.jobs[("ml", "llm")] = tripped_job()
    cluster.job_writers = [resync, resync]
    assert run(cluster) == 0
    assert approval(cluster) == "2026-03-01T12:05:00Z"
    out = capsys.readouterr().out
    assert out.count("n0 (active)") == 1 and "3 held failure(s)" in out
    gets = [c for c in cluster.calls if c[0] == "GET"]
    assert len(gets) == 3  # read, refused, read again, refused, read again, written


def test_a_breaker_released_meanwhile_is_seen_on_the_second_read_and_nothing_is_approved(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = FakeCluster()
    cluster.jobs[("ml", "llm")] = tripped_job()
    cluster.job_writers = [released]
    assert run(cluster) == 1
    assert approval(cluster) is None  # a go-ahead in advance would let the next trip through
    assert "not tripped" in capsys.readouterr().out


def test_a_job_that_moves_under_every_attempt_ends_with_run_it_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = FakeCluster()
    cluster.jobs[("ml", "llm")] = tripped_job()
    cluster.job_writers = [resync] * ATTEMPTS
    assert run(cluster) == 1
    assert approval(cluster) is None
    said = capsys.readouterr()
    assert "run the command again" in said.err and "held failure" not in said.out
    assert len([c for c in cluster.calls if c[0] == "PATCH"]) == ATTEMPTS


def test_a_job_deleted_between_read_and_write_is_not_found() -> None:
    cluster = FakeCluster()
    cluster.jobs[("ml", "llm")] = tripped_job()

    def deleted(job: dict[str, Any]) -> None:
        del cluster.jobs[("ml", "llm")]

    cluster.job_writers = [deleted]
    assert run(cluster) == 2
