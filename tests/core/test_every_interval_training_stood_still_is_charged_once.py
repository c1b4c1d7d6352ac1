"""The interruption account (``status.interruption``, against ``interruptionBudget``) charges
every interval in which training stood still, once. The ledger charges a node taken out of the
pool; a restart that takes no node out — a worker failing on a healthy node, a blip within
the grace, a rack the breaker held coming back without its workers — and the breaker's hold
of active nodes are *stops*, charged from when their cause began to when training resumed.
Ledger entries and stops over the same interval count once."""

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import FailureRecord, NodeRole, Stop
from phased.core import labels
from phased.core.accounting import fold, interruption
from phased.core.model import PodPhase
from phased.core.reports import Report, ReportKind, report_token
from phased.core.settings import ReportSettings, Settings
from phased.core.times import format_time, parse_time
from tests.core.builders import JOB, Cluster, at, events, node, nodes, phase, spec, with_ready


def _running_job(spares: int = 2, **policy: Any) -> Cluster:
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}") for i in range(12)}
    cluster = Cluster(spec(phase("train", 4, 8), spares=spares, failurePolicy=policy), the_nodes)
    cluster.settle()
    assert len(cluster.running()) == 8
    return cluster


def _fail_workers_on(cluster: Cluster, names: list[str]) -> None:
    for pod in list(cluster.pods.values()):
        if pod.node_name in names and pod.phase == PodPhase.RUNNING:
            cluster.pods[pod.name] = replace(pod, phase=PodPhase.FAILED, exit_code=137)


def _go_dark(cluster: Cluster, names: list[str]) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)


def _come_back(cluster: Cluster, names: list[str]) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)


def _used(cluster: Cluster) -> float:
    return cluster.status.interruption.used_seconds


def test_a_rack_the_breaker_held_is_charged_live_and_until_its_restart_resumed():
    cluster = _running_job()
    rack = cluster.held(NodeRole.ACTIVE)[:3]  # 3 of 10: the breaker holds them
    dark = cluster.now
    _go_dark(cluster, rack)
    cluster.advance(31)
    assert "MassFailure" in events(cluster.step())
    cluster.advance(600)
    cluster.step()
    assert _used(cluster) == 631  # live while it holds, from when their trouble began
    assert cluster.status.interruption.open_since == format_time(dark)
    _come_back(cluster, rack)  # rebooted: the workers they ran ended with them
    _fail_workers_on(cluster, rack)
    cluster.advance(5)
    said = [e for p in cluster.settle() for e in events(p)]
    assert "MassFailureCleared" in said and "WorkersRestarted" in said
    assert cluster.status.failures == [] and len(cluster.running()) == 8
    (stop,) = cluster.status.interruption.stops
    assert stop.since == format_time(dark) and stop.resumed is not None
    resumed = parse_time(stop.resumed)
    assert resumed is not None and resumed > dark
    assert _used(cluster) == (resumed - dark).total_seconds()
    assert cluster.status.interruption.open_since is None


def test_workers_that_lived_through_the_breakers_hold_are_charged_the_hold():
    cluster = _running_job()
    rack = cluster.held(NodeRole.ACTIVE)[:3]
    _go_dark(cluster, rack)
    cluster.advance(31)
    cluster.step()
    cluster.advance(300)
    _come_back(cluster, rack)  # a partition: the workers ran on
    cluster.advance(9)
    said = [e for p in cluster.settle() for e in events(p)]
    assert "MassFailureCleared" in said and "WorkersRestarted" not in said
    assert _used(cluster) == 340
    cluster.advance(600)
    cluster.step()
    assert _used(cluster) == 340


def test_a_blip_that_killed_its_worker_is_charged_from_the_blip_to_resumption():
    cluster = _running_job()
    blip = cluster.held(NodeRole.ACTIVE)[0]
    began = cluster.now
    _go_dark(cluster, [blip])
    cluster.advance(3)
    cluster.step()
    cluster.advance(4)
    _come_back(cluster, [blip])
    _fail_workers_on(cluster, [blip])
    cluster.advance(2)
    cluster.settle()
    assert cluster.status.failures == [] and cluster.status.restarts == 1
    (stop,) = cluster.status.interruption.stops
    assert stop.since == format_time(began)
    assert _used(cluster) == (parse_time(stop.resumed) - began).total_seconds() > 0


def test_a_worker_failing_on_a_healthy_node_is_charged_from_the_pass_that_found_it():
    cluster = _running_job()
    _fail_workers_on(cluster, [cluster.held(NodeRole.ACTIVE)[2]])
    cluster.advance(5)
    found = cluster.now
    cluster.step()
    assert cluster.status.worker_restarts == 1
    cluster.advance(7)
    cluster.settle()
    (stop,) = cluster.status.interruption.stops
    assert stop.since == format_time(found) and "worker(s) failed" in stop.cause
    assert _used(cluster) == (parse_time(stop.resumed) - found).total_seconds() == 7


def test_a_restart_beside_a_node_that_fails_later_is_charged_once():
    cluster = _running_job(spares=0)  # no spare to trade places with: its grace is waited
    lost = cluster.held(NodeRole.ACTIVE)[0]
    began = cluster.now
    _go_dark(cluster, [lost])
    cluster.advance(5)
    cluster.step()
    _fail_workers_on(cluster, [n for n in cluster.held(NodeRole.ACTIVE) if n != lost])
    cluster.advance(5)
    cluster.step()  # the gang restarts beside the suspect: a stop from when it went dark
    cluster.advance(25)
    cluster.settle()  # its grace ran out: a ledger entry from the same instant
    (entry,) = cluster.status.failures
    assert entry.detected == format_time(began) and entry.interruption_seconds > 0
    (stop,) = cluster.status.interruption.stops
    assert stop.since == format_time(began) and stop.resumed == entry.resumed
    assert _used(cluster) == entry.interruption_seconds  # the same interval, once


def test_a_restart_beside_a_node_swapped_out_is_charged_by_its_stop_alone():
    cluster = _running_job()
    lost = cluster.held(NodeRole.ACTIVE)[0]
    began = cluster.now
    _go_dark(cluster, [lost])
    cluster.advance(5)
    cluster.step()
    _fail_workers_on(cluster, [n for n in cluster.held(NodeRole.ACTIVE) if n != lost])
    cluster.advance(5)
    said = events(cluster.step())
    said += [e for p in cluster.settle() for e in events(p)]
    assert "TroubledNodeSwapped" in said  # no worker bound to it: a spare took its place
    cluster.advance(25)
    cluster.settle()  # it fails as a spare: its entry interrupted nothing
    (entry,) = cluster.status.failures
    assert entry.interruption_seconds == 0
    (stop,) = cluster.status.interruption.stops
    assert _used(cluster) == (parse_time(stop.resumed) - began).total_seconds() == 10


def test_a_hold_a_person_releases_is_charged_once():
    cluster = _running_job()
    rack = cluster.held(NodeRole.ACTIVE)[:3]
    dark = cluster.now
    _go_dark(cluster, rack)
    cluster.advance(31)
    cluster.step()
    cluster.advance(600)
    cluster.step()
    cluster.annotations = {labels.ANNOTATION_PROCEED: format_time(cluster.now)}
    cluster.advance(1)
    said = [e for p in cluster.settle() for e in events(p)]
    assert "MassFailureReleased" in said
    assert {f.detected for f in cluster.status.failures} == {format_time(dark)}
    resumed = max(parse_time(f.resumed) for f in cluster.status.failures)
    assert _used(cluster) == (resumed - dark).total_seconds()


def test_a_troubled_node_swapped_out_that_fails_as_a_spare_adds_nothing():
    # Swapped before a worker was bound to it, it interrupted nothing: its entry carries 0 s,
    # and the job's interruption is the restart that came before, only.
    cluster = Cluster(spec(phase("train", 2, 2), spares=1), {n.name: n for n in nodes("h", 4)})
    cluster.settle()
    _fail_workers_on(cluster, [cluster.held(NodeRole.ACTIVE)[0]])
    cluster.advance(1)
    cluster.step()  # the gang restarts; the next generation comes on the next pass
    troubled = cluster.held(NodeRole.ACTIVE)[1]
    _go_dark(cluster, [troubled])
    cluster.advance(1)
    said = [e for p in cluster.settle() for e in events(p)]
    assert "TroubledNodeSwapped" in said
    before = _used(cluster)
    assert before > 0
    cluster.advance(30)
    cluster.settle()
    (entry,) = cluster.status.failures
    assert entry.node == troubled and entry.resumed == entry.detected
    assert entry.interruption_seconds == 0 and _used(cluster) == before


def test_a_reporting_job_resumes_a_stop_at_the_new_generations_first_report():
    settings = Settings(reports=ReportSettings(url="http://phased.test:8082", key_file="/k"))
    cluster = Cluster(
        spec(phase("train", 2, 2), spares=1, checkpoint={"report": True}),
        {n.name: n for n in nodes("h", 4)},
        settings=settings,
        report_token=report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid),
    )
    cluster.settle()
    _fail_workers_on(cluster, [cluster.held(NodeRole.ACTIVE)[0]])
    found = cluster.now
    cluster.step()
    cluster.settle()
    assert len(cluster.running()) == 2
    cluster.advance(10)
    cluster.step()
    assert cluster.status.interruption.open_since == format_time(found)  # Running, not resumed
    cluster.advance(30)
    report = Report(ReportKind.PROGRESS, "train", 1, 0, 0, 10, cluster.now)
    cluster.report(report)
    cluster.settle()
    (stop,) = cluster.status.interruption.stops
    assert stop.resumed == format_time(report.time) and _used(cluster) == 40


def test_stops_stay_bounded_and_folding_them_keeps_the_figure():
    cluster = _running_job(restartBudget=100)
    for _ in range(40):
        _fail_workers_on(cluster, [cluster.held(NodeRole.ACTIVE)[0]])
        cluster.advance(1)
        cluster.step()
        cluster.advance(9)
        cluster.settle()
        cluster.advance(100)
    assert cluster.status.worker_restarts == 40
    assert len(cluster.status.interruption.stops) == 32
    assert _used(cluster) == 40 * 9
    assert cluster.status.interruption.folded_seconds == 8 * 9


def test_folding_counts_only_what_the_ledger_does_not_cover_already():
    stops = [
        Stop(since=format_time(at(i * 100)), resumed=format_time(at(i * 100 + 10)))
        for i in range(5)
    ]
    ledger = [
        FailureRecord(
            id=1,
            node="n",
            reason="NodeNotReady",
            detected=format_time(at(0)),
            resumed=format_time(at(5)),
        )
    ]
    kept, folded = fold(ledger, stops, 0.0, at(1000), None, keep=3)
    assert len(kept) == 3 and folded == 5 + 10  # the first stop's 10 s, 5 of them the entry's
    assert interruption(ledger, "2h", at(1000), None, kept, folded).used_seconds == 50
