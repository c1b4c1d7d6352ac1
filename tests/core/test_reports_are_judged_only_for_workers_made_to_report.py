"""``checkpoint.report`` changed while a job runs: reports are judged only of workers made to
report (the label ``phased.dev/reporting`` on each worker says so, so an operator restarted
meanwhile judges the same).

Turned on: the running workers were made without the endpoint and the token, so they cannot
report. No ``CheckpointStale``, no wait for a final checkpoint at the boundary, no failure
kept open until a report, no lost work counted from the phase start — until the next
generation, whose workers are made to report and are judged. Turned off: nothing waits for
a report any more, and a ``CheckpointStale`` the job had turns False.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import JobState, NodeRole, PhaseRecord, TrainingJobStatus
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import CreatePod, NodeSet, PodPhase, Snapshot
from phased.core.reports import Report, ReportKind, report_token
from phased.core.settings import ReportSettings, Settings
from phased.core.times import format_time
from tests.core.builders import (
    JOB,
    T0,
    Cluster,
    at,
    events,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)

REPORTING = Settings(
    reports=ReportSettings(url="http://phased.test:8082", key_file="/etc/phased/report-key")
)
TOKEN = report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid)
HOUR = 3600


def _spec(report: bool, **extra: Any) -> Any:
    return spec(
        phase("train", 2, 2),
        phase("validate", 2, 2),
        spares=1,
        checkpoint={"report": report, "interval": "1h"},
        **extra,
    )


def _running(report: bool, made_to_report: bool, state: PodPhase = PodPhase.RUNNING, **status: Any):
    """Two workers of train (started 2 h ago, no checkpoint yet), made to report or not."""
    held = [owned(node("a0"), NodeRole.ACTIVE), owned(node("a1"), NodeRole.ACTIVE)]
    held.append(owned(node("s0"), NodeRole.SPARE))
    pods = [
        pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i}", state=state)
        for i in range(2)
    ]
    flag = "true" if made_to_report else "false"
    pods = [replace(p, labels={**p.labels, labels.LABEL_REPORTING: flag}) for p in pods]
    start = format_time(at(-2 * HOUR))
    records = status.pop("phases", None) or [
        PhaseRecord(name="train", state="Running", start_time=start, gpu_type="H100"),
        PhaseRecord(name="validate"),
    ]
    the_status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        start_time=start,
        phases=records,
        pool={"active": ["a0", "a1"], "spares": ["s0"]},
        **status,
    )
    return snapshot(
        _spec(report),
        held,
        pods,
        the_status,
        report_token=TOKEN,
        report_secret_exists=True,
        service_exists=True,
    )


def _stale(plan: Any) -> Any:
    return next((c for c in plan.status.conditions if c.type == "CheckpointStale"), None)


# --- turned on while the workers run -------------------------------------------------------


def test_workers_made_without_reporting_are_not_stale():
    plan = decide(_running(report=True, made_to_report=False), REPORTING, T0)
    cond = _stale(plan)
    assert cond is not None and cond.status == "False" and cond.reason == "NotReporting"
    assert "next generation" in cond.message
    assert "CheckpointStale" not in events(plan)


def test_workers_made_to_report_are_stale_as_ever():
    plan = decide(_running(report=True, made_to_report=True), REPORTING, T0)
    assert _stale(plan).status == "True" and "CheckpointStale" in events(plan)


def test_workers_made_without_reporting_end_their_phase_without_a_final_checkpoint():
    snap = _running(report=True, made_to_report=False, state=PodPhase.SUCCEEDED)
    plan = decide(snap, REPORTING, T0)
    assert plan.status.phase == "validate"
    assert "WaitingForFinalCheckpoint" not in events(plan)


def test_a_failure_of_workers_made_without_reporting_counts_no_lost_work():
    snap = _running(report=True, made_to_report=False)
    nodes = [with_ready(n, False, at(-60)) if n.name == "a0" else n for n in snap.nodes.values()]
    plan = decide(replace(snap, nodes=NodeSet.of(nodes)), REPORTING, T0)
    (entry,) = plan.status.failures
    assert entry.lost_work_seconds is None and entry.resume_step is None


def _turned_on(scope: str = "Gang") -> Cluster:
    """A job running without reports, then edited to report."""
    policy = {"restartScope": scope}
    launcher = {"launcher": {"type": "Torchrun", "rendezvous": "C10d"}} if scope == "Worker" else {}
    cluster = Cluster(
        _spec(False, failurePolicy=policy, **launcher),
        {f"n{i}": node(f"n{i}") for i in range(4)},
        settings=REPORTING,
        report_token=TOKEN,
    )
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    made = {p.labels[labels.LABEL_REPORTING] for p in cluster.pods.values()}
    assert made == {"false"}
    cluster.the_spec = _spec(True, failurePolicy=policy, **launcher)
    cluster.advance(2 * HOUR)
    cluster.step()
    return cluster


def _lose_rank(cluster: Cluster, rank: int) -> None:
    lost = next(p.node_name for p in cluster.pods.values() if p.rank == rank)
    assert lost is not None
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(31)


def test_the_next_generation_is_made_to_report_and_is_judged():
    cluster = _turned_on()
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.failures == []
    _lose_rank(cluster, 0)
    cluster.step()  # a gang restart: the survivor stops
    cluster.step()  # generation 1, made to report
    gen1 = [p for p in cluster.pods.values() if p.generation == 1]
    assert len(gen1) == 2
    assert {p.labels[labels.LABEL_REPORTING] for p in gen1} == {"true"}
    cluster.advance(60)
    plan = cluster.step()
    # Not stale at its start, two hours into the phase: its checkpoint is due an interval
    # after it started.
    assert _stale(plan).status == "False" and _stale(plan).reason == "Recent"
    # Its workers run, but training has resumed only once one of them reports.
    assert cluster.status.state == JobState.RECOVERING
    (entry,) = cluster.status.failures
    assert entry.resumed is None
    cluster.report(
        Report(ReportKind.PROGRESS, "train", 1, 0, 0, step=10, time=cluster.now, path="")
    )
    cluster.step()
    assert cluster.status.failures[0].resumed == format_time(cluster.now)
    assert cluster.status.state == JobState.RUNNING
    cluster.advance(HOUR + 60)  # no checkpoint from generation 1 within the interval
    plan = cluster.step()
    assert "CheckpointStale" in events(plan)


def test_a_rank_replaced_alone_beside_workers_made_without_reporting_resumes_when_it_runs():
    cluster = _turned_on("Worker")
    _lose_rank(cluster, 1)
    plan = cluster.step()
    (made,) = of_type(plan, CreatePod)
    assert made.manifest["metadata"]["labels"][labels.LABEL_REPORTING] == "true"
    cluster.advance(5)
    cluster.step()
    # Its peer (rank 0, which may be the one that checkpoints) cannot report: the ranks
    # running again is all there is to go by.
    (entry,) = cluster.status.failures
    assert entry.resumed is not None
    assert cluster.status.state == JobState.RUNNING


# --- turned off while the workers run ------------------------------------------------------


def test_turned_off_a_stale_checkpoint_is_stale_no_more():
    stale = decide(_running(report=True, made_to_report=True), REPORTING, T0)
    assert _stale(stale).status == "True"
    snap = _running(report=False, made_to_report=True, conditions=stale.status.conditions)
    plan = decide(snap, REPORTING, at(5))
    cond = _stale(plan)
    assert cond.status == "False" and cond.reason == "NotReporting"


def test_turned_off_the_boundary_waits_for_no_final_checkpoint():
    first = decide(
        _running(report=True, made_to_report=True, state=PodPhase.SUCCEEDED), REPORTING, T0
    )
    assert first.status.phase == "train" and "WaitingForFinalCheckpoint" in events(first)
    snap: Snapshot = _running(
        report=False, made_to_report=True, state=PodPhase.SUCCEEDED, phases=first.status.phases
    )
    plan = decide(snap, REPORTING, at(5))
    assert plan.status.phase == "validate"


def test_turned_off_an_open_failure_resumes_when_the_workers_run():
    cluster = _turned_on()
    _lose_rank(cluster, 0)
    cluster.step()
    cluster.step()  # generation 1, made to report
    cluster.the_spec = _spec(False)
    cluster.advance(60)
    cluster.step()
    (entry,) = cluster.status.failures
    assert entry.resumed is not None and cluster.status.state == JobState.RUNNING


def test_a_worker_says_whether_it_was_made_to_report():
    for report, flag in ((True, "true"), (False, "false")):
        held = [owned(node("n0"), NodeRole.ACTIVE), owned(node("n1"), NodeRole.ACTIVE)]
        snap = snapshot(
            _spec(report),
            held,
            service_exists=True,
            report_token=TOKEN,
            report_secret_exists=True,
        )
        made = of_type(decide(snap, REPORTING, T0), CreatePod)
        assert {c.manifest["metadata"]["labels"][labels.LABEL_REPORTING] for c in made} == {flag}
