"""The scale bench's ``--trace``: the operator's trace lines, as ``phased run --trace`` writes
them, read against the failures the bench made (``bench/swaptrace.py``)."""

from __future__ import annotations

import logging
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import swaptrace  # noqa: E402
from phased.kube import client  # noqa: E402

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"  # phased run's
T = datetime(2026, 12, 4, 22, 0, 0).timestamp()


def stamp(seconds: float, name: str, message: str) -> str:
    at = datetime.fromtimestamp(T + seconds)
    return f"{at:%Y-%m-%d %H:%M:%S},{at.microsecond // 1000:03d} DEBUG {name}: {message}"


LOG = "\n".join(
    [
        stamp(0.000, "phased.reconcile", "pass ns/job-1 began"),  # before the failure
        stamp(0.100, "phased.reconcile", "pass ns/job-1 ended in 100.0 ms"),
        "2026-12-04 22:00:01,000 INFO phased.reconcile: something else",
        stamp(1.020, "phased.reconcile", "node n7 changed, waking ns/job-0, ns/job-1"),
        stamp(1.025, "phased.reconcile", "pass ns/job-1 began"),
        stamp(
            1.055,
            "phased.kube.client",
            "GET /apis/phased.dev/v1alpha1/namespaces/ns/"
            "trainingjobs/job-1 200 in 30.0 ms for ns/job-1",
        ),
        stamp(1.060, "phased.reconcile", "pass ns/job-1 read"),
        stamp(1.070, "phased.reconcile", "pass ns/job-1 decided: 1 QuarantineNode, 2 DeletePod"),
        stamp(1.110, "phased.kube.client", "PATCH /api/v1/nodes/n7 200 in 20.0 ms for ns/job-1"),
        stamp(1.140, "phased.kube.client", "PATCH /api/v1/nodes/n9 200 in 20.0 ms for ns/job-1"),
        stamp(
            1.150,
            "phased.kube.client",
            "POST /api/v1/namespaces/ns/pods 201 in 5.0 ms for ns/other",
        ),
        stamp(1.160, "phased.reconcile", "pass ns/job-1 acted"),
        stamp(1.200, "phased.reconcile", "pass ns/job-1 ended in 175.0 ms"),
        stamp(1.300, "phased.reconcile", "pass ns/job-1 began"),
        stamp(
            1.350,
            "phased.kube.client",
            "POST /api/v1/namespaces/ns/pods 201 in 30.0 ms for ns/job-1",
        ),
        stamp(1.400, "phased.reconcile", "pass ns/job-1 ended in 100.0 ms"),
    ]
)


def flat(text: str) -> str:
    """A table's text with its cells' padding taken out."""
    return " ".join(text.split())


def test_a_failure_is_followed_from_the_node_change_to_the_first_create() -> None:
    lines = swaptrace.parse(LOG)
    failure = swaptrace.Failure(
        "n7", "ns/job-1", injected=T + 0.9, visible=T + 1.0, replaced=T + 1.45
    )
    t = swaptrace.timeline(failure, lines)
    assert t.seen == pytest.approx(0.020, abs=1e-6)
    assert t.answer_began == pytest.approx(0.025, abs=1e-6)  # not the pass before the failure
    assert t.answer_ended == pytest.approx(0.200, abs=1e-6)
    assert t.creating_began == pytest.approx(0.300, abs=1e-6)
    assert t.create_sent == pytest.approx(0.320, abs=1e-6)  # answered at .350, after 30 ms
    assert t.create_answered == pytest.approx(0.350, abs=1e-6)
    assert t.replaced == pytest.approx(0.450, abs=1e-6)
    stages = {"read": 0.035, "decided": 0.010, "acted": 0.090, "ended": 0.040}
    assert t.stages == pytest.approx(stages, abs=1e-6)
    # Only the job's own requests in its answering pass (not the other job's create).
    assert t.requests == {
        "GET trainingjobs": (1, pytest.approx(0.030)),
        "PATCH nodes": (2, pytest.approx(0.040)),
    }
    text = flat(swaptrace.report([t]))
    assert "| PATCH nodes | 2 | 40 | 40 |" in text
    assert "| its first pod create sent | 1 | 320 | 320 |" in text


def test_a_missed_failure_or_an_untraced_node_is_said_as_not_found() -> None:
    lines = swaptrace.parse(LOG)
    missed = swaptrace.Failure("n8", "ns/job-1", injected=T + 0.9, visible=T + 1.0, replaced=None)
    t = swaptrace.timeline(missed, lines)
    assert (t.seen, t.answer_began, t.create_sent, t.replaced) == (None, None, None, None)
    assert "| the operator took the node's change | 0 | - | - |" in flat(swaptrace.report([t]))


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/nodes/n1", "nodes"),
        ("/api/v1/namespaces/ns/pods", "pods"),
        ("/api/v1/namespaces/ns/pods/w-0", "pods"),
        ("/apis/phased.dev/v1alpha1/namespaces/ns/trainingjobs/j/status", "trainingjobs/status"),
        ("/api/v1/namespaces/ns/pods/w-0/eviction", "pods/eviction"),
        ("/api/v1/pods?labelSelector=x", "pods"),
    ],
)
def test_a_path_names_its_resource(path: str, resource: str) -> None:
    assert swaptrace.resource_of(path) == resource


def test_the_clients_trace_line_is_one_the_bench_reads(caplog: pytest.LogCaptureFixture) -> None:
    handler_text: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            handler_text.append(self.format(record))

    keep = Keep()
    keep.setFormatter(logging.Formatter(FORMAT))
    log = logging.getLogger("phased.kube.client")
    log.addHandler(keep)
    old = log.level
    log.setLevel(logging.DEBUG)
    token = client.ON_BEHALF.set("ns/job-1")
    try:
        client._trace("PATCH", "/api/v1/nodes/n7", 200, time.perf_counter() - 0.012)
    finally:
        client.ON_BEHALF.reset(token)
        log.setLevel(old)
        log.removeHandler(keep)
    (line,) = swaptrace.parse("\n".join(handler_text))
    assert (line.kind, line.job, line.what) == ("request", "ns/job-1", "PATCH nodes")
    assert 0.012 <= line.took < 1.0


def test_the_jobs_passes_between_the_answer_and_the_creating_pass_are_counted() -> None:
    """The creating pass waits behind every pass of its job that began before it: each is
    counted with what it decided and how long it took; a pass of another job is not."""
    between = [
        stamp(1.200, "phased.reconcile", "pass ns/job-1 began"),  # in the ms the answer ended
        stamp(1.205, "phased.reconcile", "pass ns/job-1 read"),
        stamp(1.220, "phased.reconcile", "pass ns/job-1 decided: 1 FinishClearing"),
        stamp(1.240, "phased.reconcile", "pass ns/job-1 acted"),
        stamp(1.250, "phased.reconcile", "pass ns/job-1 ended in 50.0 ms"),
        stamp(1.255, "phased.reconcile", "pass ns/job-0 began"),
        stamp(1.260, "phased.reconcile", "pass ns/job-0 ended in 5.0 ms"),
        stamp(1.260, "phased.reconcile", "pass ns/job-1 began"),
        stamp(1.270, "phased.reconcile", "pass ns/job-1 decided: nothing to do"),
        stamp(1.290, "phased.reconcile", "pass ns/job-1 ended in 30.0 ms"),
    ]
    log = LOG.split("\n")
    at = log.index(stamp(1.200, "phased.reconcile", "pass ns/job-1 ended in 175.0 ms")) + 1
    lines = swaptrace.parse("\n".join([*log[:at], *between, *log[at:]]))
    failure = swaptrace.Failure(
        "n7", "ns/job-1", injected=T + 0.9, visible=T + 1.0, replaced=T + 1.45
    )
    t = swaptrace.timeline(failure, lines)
    assert t.between == [
        ("1 FinishClearing", pytest.approx(0.050)),
        ("nothing to do", pytest.approx(0.030)),
    ]
    text = flat(swaptrace.report([t, swaptrace.timeline(failure, swaptrace.parse(LOG))]))
    assert "| 0 | 1 | 100 | 100 | 450 |" in text  # the plain log: none between
    assert "| 2 | 1 | 100 | 100 | 450 |" in text
    assert "| 1 FinishClearing | 1 | 50 | 50 |" in text
    assert "| nothing to do | 1 | 30 | 30 |" in text


def test_the_swaps_a_periodic_relist_ran_beside_are_told_apart() -> None:
    """A relist is the pages of a LIST of the Nodes (or of the worker Pods) sent for no
    job, one after another; a failure answered while one was in flight is counted apart.
    A pass's own pod list (sent for its job) and a node's GET are no relist."""
    pages = [
        stamp(1.080, "phased.kube.client", "GET /api/v1/nodes 200 in 60.0 ms"),
        stamp(1.900, "phased.kube.client", "GET /api/v1/nodes 200 in 50.0 ms"),  # waited
        stamp(1.060, "phased.kube.client", "GET /api/v1/pods 200 in 10.0 ms for ns/job-1"),
        stamp(1.065, "phased.kube.client", "GET /api/v1/nodes/n7 200 in 5.0 ms"),
        stamp(9.000, "phased.kube.client", "GET /api/v1/namespaces/ns/pods 200 in 40.0 ms"),
    ]
    lines = swaptrace.parse("\n".join([*LOG.split("\n"), *pages]))
    lists = swaptrace.relists(lines)
    assert lists == [
        (pytest.approx(T + 1.020), pytest.approx(T + 2.000)),
        (pytest.approx(T + 8.960), pytest.approx(T + 9.100)),
    ]
    failure = swaptrace.Failure(
        "n7", "ns/job-1", injected=T + 0.9, visible=T + 1.0, replaced=T + 1.45
    )
    met = swaptrace.timeline(failure, lines, lists)
    assert met.relisted
    # The same failure a moment before the relist began: its first create went before it.
    early = swaptrace.timeline(failure, lines, [(T + 1.33, T + 2.0)])
    assert not early.relisted
    assert not swaptrace.timeline(failure, lines).relisted
    text = flat(swaptrace.report([met, early]))
    assert "| a relist in flight | 1 | 320 | 320 | 450 | 450 |" in text
    assert "| none | 1 | 320 | 320 | 450 | 450 |" in text


ANSWER = "\n".join(
    [
        stamp(1.020, "phased.reconcile", "node n7 changed, waking ns/job-1"),
        stamp(1.021, "phased.reconcile", "pass ns/job-1 began"),
        stamp(1.022, "phased.reconcile", "pass ns/job-1 read"),
        stamp(
            1.030,
            "phased.reconcile",
            "pass ns/job-1 decided: 1 QuarantineNode, 2 DeletePod, 1 SetNodeRole, 1 ClaimNode",
        ),
        stamp(1.060, "phased.kube.client", "PATCH /api/v1/nodes/n7 200 in 30.0 ms for ns/job-1"),
        stamp(
            1.070,
            "phased.kube.client",
            "DELETE /api/v1/namespaces/ns/pods/w-1 200 in 40.0 ms for ns/job-1",
        ),
        stamp(
            1.080,
            "phased.kube.client",
            "DELETE /api/v1/namespaces/ns/pods/w-2 200 in 50.0 ms for ns/job-1",
        ),
        stamp(1.075, "phased.kube.client", "GET /api/v1/pods 200 in 45.0 ms for ns/job-1"),
        # The promotion, sent 5 ms after the quarantine landed; the claim after it.
        stamp(1.105, "phased.kube.client", "PATCH /api/v1/nodes/s1 200 in 40.0 ms for ns/job-1"),
        stamp(1.115, "phased.kube.client", "PATCH /api/v1/nodes/f1 200 in 40.0 ms for ns/job-1"),
        stamp(1.140, "phased.kube.client", "GET /api/v1/pods 200 in 35.0 ms for ns/job-1"),
        stamp(1.141, "phased.reconcile", "pass ns/job-1 acted"),
        stamp(
            1.180,
            "phased.kube.client",
            "PATCH /apis/phased.dev/v1alpha1/namespaces/ns/trainingjobs/job-1/status 200 "
            "in 38.0 ms for ns/job-1",
        ),
        stamp(1.181, "phased.reconcile", "pass ns/job-1 ended in 160.0 ms"),
    ]
)


def test_the_answering_pass_actions_are_followed_as_they_land() -> None:
    lines = swaptrace.parse(ANSWER)
    failure = swaptrace.Failure("n7", "ns/job-1", injected=T + 0.9, visible=T + 1.0, replaced=None)
    t = swaptrace.timeline(failure, lines)
    # From the decide (1.030): the failed node's patch answered at 1.060, the promotion sent
    # at 1.065, the last node change answered at 1.115, the last look at 1.140, the last
    # deletion at 1.080, the actions ended at 1.141.
    expected = {
        "quarantined": 0.030,
        "next_sent": 0.035,
        "changed": 0.085,
        "looked": 0.110,
        "deleted": 0.050,
        "acted": 0.111,
    }
    assert t.actions == pytest.approx(expected, abs=1e-6)
    text = flat(swaptrace.report([t]))
    assert "| the next node change sent (the promotion, once it landed) | 1 | 35 | 35 |" in text
    assert "| the actions ended | 1 | 111 | 111 |" in text
    assert "in 1 of 1 answering passes that had both, with a pod deletion in 0." in text

    # A deletion answered after every node change and look ends the actions instead.
    late = ANSWER.replace(
        stamp(1.080, "phased.kube.client", "DELETE"), stamp(1.139, "phased.kube.client", "DELETE")
    ).replace(stamp(1.140, "phased.kube.client", "GET"), stamp(1.120, "phased.kube.client", "GET"))
    t = swaptrace.timeline(failure, swaptrace.parse(late))
    assert t.actions["deleted"] == pytest.approx(0.109, abs=1e-6)
    assert t.actions["looked"] == pytest.approx(0.090, abs=1e-6)
    assert "in 0 of 1 answering passes that had both, with a pod deletion in 1." in flat(
        swaptrace.report([t])
    )


def test_an_answer_without_a_traced_quarantine_leaves_its_moments_out() -> None:
    lines = swaptrace.parse(ANSWER)
    other = swaptrace.Failure("n8", "ns/job-1", injected=T + 0.9, visible=T + 1.0, replaced=None)
    t = swaptrace.timeline(other, lines)
    assert t.seen is None and t.actions == {}
    t = swaptrace.timeline(
        swaptrace.Failure("n7", "ns/job-1", injected=T + 0.9, visible=T + 1.0, replaced=None),
        [x for x in lines if not (x.kind == "request" and x.detail == "/api/v1/nodes/n7")],
    )
    assert "quarantined" not in t.actions and "next_sent" not in t.actions
    assert t.actions["changed"] == pytest.approx(0.085, abs=1e-6)


def test_the_collectors_trace_line_is_one_the_bench_reads() -> None:
    """``phased run --trace`` says each full collection (and any younger one of 5 ms or
    more) on ``phased.gc``, in a line the bench reads as a stop of the operator."""
    import gc

    from phased.cli import run

    kept: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(self.format(record))

    keep = Keep()
    keep.setFormatter(logging.Formatter(FORMAT))
    log = logging.getLogger("phased.gc")
    log.addHandler(keep)
    old = log.level
    log.setLevel(logging.DEBUG)
    assert "phased.gc" in run.TRACED
    callback = run.trace_collections()
    try:
        gc.collect(2)
        before = len(kept)
        callback("start", {"generation": 0})
        callback("stop", {"generation": 0, "collected": 3})  # a young one, at once: unsaid
        assert len(kept) == before
    finally:
        gc.callbacks.remove(callback)
        log.setLevel(old)
        log.removeHandler(keep)
    stops = swaptrace.collections(swaptrace.parse("\n".join(kept)))
    assert 2 in {generation for _, _, generation in stops}  # the full one asked for
    assert all(0 <= end - start < 5.0 for start, end, _ in stops)


def test_a_collectors_stop_inside_a_swap_is_told_apart() -> None:
    stop = stamp(1.140, "phased.gc", "collection of generation 2 took 60.0 ms, 12 objects freed")
    outside = stamp(0.500, "phased.gc", "collection of generation 2 took 80.0 ms, 9 objects freed")
    young = stamp(1.300, "phased.gc", "collection of generation 0 took 7.0 ms, 0 objects freed")
    lines = swaptrace.parse("\n".join([LOG, stop, outside, young]))
    stops = swaptrace.collections(lines)
    # Each logged as it ended: it began its time before.
    expected = [(1.080, 1.140, 2), (0.420, 0.500, 2), (1.293, 1.300, 0)]
    assert [g for _, _, g in stops] == [g for _, _, g in expected]
    for (start, end, _), (a, b, _) in zip(stops, expected, strict=True):
        assert (start - T, end - T) == pytest.approx((a, b), abs=1e-6)
    failure = swaptrace.Failure(
        "n7", "ns/job-1", injected=T + 0.9, visible=T + 1.0, replaced=T + 1.45
    )
    t = swaptrace.timeline(failure, lines, stops=stops)
    # From the failure seen (1.0) to the first create answered (1.350): the full collection
    # (1.080-1.140) and the young one (1.293-1.300), not the one before the failure.
    assert t.generation == 2
    assert t.stopped == pytest.approx(0.067, abs=1e-6)
    calm = swaptrace.timeline(failure, swaptrace.parse(LOG))
    assert (calm.generation, calm.stopped) == (None, 0.0)
    text = flat(swaptrace.report([t, calm]))
    assert "| a full collection (generation 2) | 1 | 67 | 67 | 450 | 450 |" in text
    assert "| only a younger one of 5 ms or more | 0 | - | - | - | - |" in text
    assert "| none | 1 | - | - | 450 | 450 |" in text
