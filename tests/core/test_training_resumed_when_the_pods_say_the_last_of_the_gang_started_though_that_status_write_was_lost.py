"""Crash safety: training resumed when the pods say the last of the gang started, not when
a pass after a lost status write saw it. The pass that finds the running generation whole
again ends the open failure; when its status write is lost, the next pass used to date the
resume at its own clock, charging the seconds between to the interruption budget. The last
container start of the running workers (``state.running.startedAt``) says when — kept
within the interruption's start, the last written pass and now; a worker whose start is not
known, or a gang that lived through it, keeps the pass's clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from phased.core.times import format_time, parse_time
from phased.kube.convert import pod_from_raw
from tests.core.builders import Cluster, at, node, phase, spec, with_ready

NOT_READY_GRACE = 30


def _cluster(scope: str = "Gang") -> Cluster:
    the_spec = spec(
        phase("train", 2, 2),
        spares=1,
        failurePolicy={"restartScope": scope},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(3)})
    cluster.settle()
    assert len(cluster.running()) == 2
    return cluster


def _fail_until_whole(cluster: Cluster) -> datetime:
    """The node of the last rank goes dark (not rank 0's, whose loss restarts the gang
    whatever the scope); passes run until every rank runs again. Returns when the last of
    them started, as the simulated kubelet recorded it."""
    victim = max(cluster.running(), key=lambda p: p.rank or 0).node_name
    assert victim is not None
    cluster.nodes[victim] = with_ready(cluster.nodes[victim], False, cluster.now)
    for _ in range(20):
        cluster.advance(10)
        cluster.step()
        running = [p for p in cluster.running() if p.node_name != victim]
        if len(running) == 2 and cluster.status.failures:
            starts = [p.running_since for p in running if p.running_since is not None]
            return max(starts)
    raise AssertionError("the gang never ran again")


def _lose_the_resuming_write(cluster: Cluster) -> None:
    """The pass that sees the gang whole runs, and its status write is lost."""
    cluster.advance(10)
    lost = cluster.decide()
    assert lost.status.failures[0].resumed is not None  # it did see training resume
    cluster.advance(50)  # the next pass comes a minute after the gang started
    cluster.step()


def _resumed(cluster: Cluster) -> tuple[str | None, float]:
    entry = cluster.status.failures[0]
    return entry.resumed, entry.interruption_seconds


def test_a_new_generation_resumed_when_its_last_worker_started() -> None:
    cluster = _cluster()
    started = _fail_until_whole(cluster)
    detected = parse_time(cluster.status.failures[0].detected)
    assert detected is not None
    _lose_the_resuming_write(cluster)
    assert cluster.status.restart_generation == 1
    assert _resumed(cluster) == (format_time(started), (started - detected).total_seconds())


def test_a_rank_replaced_alone_resumed_when_it_started() -> None:
    cluster = _cluster("Worker")
    started = _fail_until_whole(cluster)
    assert cluster.status.restart_generation == 0  # the lost rank alone was replaced
    _lose_the_resuming_write(cluster)
    assert _resumed(cluster)[0] == format_time(started)


def test_pods_that_do_not_say_when_they_started_resume_at_the_pass() -> None:
    cluster = _cluster()
    _fail_until_whole(cluster)
    for name, p in cluster.pods.items():
        cluster.pods[name] = replace(p, running_since=None)
    _lose_the_resuming_write(cluster)
    assert _resumed(cluster)[0] == format_time(cluster.now)


def test_a_start_the_kubelet_dates_too_early_or_too_late_is_kept_within_the_interruption() -> None:
    early = _cluster()
    _fail_until_whole(early)
    written = early.status.accounting.accounted_at
    for name, p in early.pods.items():  # the kubelet's clock runs an hour behind
        early.pods[name] = replace(p, running_since=at(-3600))
    _lose_the_resuming_write(early)
    assert _resumed(early)[0] == written  # not before the last pass that found it open

    late = _cluster()
    _fail_until_whole(late)
    for name, p in late.pods.items():  # ... or an hour ahead
        late.pods[name] = replace(p, running_since=late.now + timedelta(hours=1))
    _lose_the_resuming_write(late)
    assert _resumed(late)[0] == format_time(late.now)


def test_the_last_container_start_is_read_from_the_pod() -> None:
    raw = {
        "metadata": {"name": "w"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"state": {"running": {"startedAt": "2026-03-01T12:00:05Z"}}},
                {"state": {"running": {"startedAt": "2026-03-01T12:00:09Z"}}},
                {"state": {"waiting": {"reason": "ContainerCreating"}}},
            ],
        },
    }
    assert format_time(pod_from_raw(raw).running_since) == "2026-03-01T12:00:09Z"  # type: ignore[arg-type]
    assert pod_from_raw({"metadata": {"name": "w"}, "status": {}}).running_since is None
