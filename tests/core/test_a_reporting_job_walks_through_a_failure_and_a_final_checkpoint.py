"""A reporting job on the in-test cluster: checkpoints, a node failure answered with a restart
from the last checkpoint, resumed at the new generation's first report, and a boundary that
waits for the final checkpoint."""

from __future__ import annotations

from typing import Any

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import CreatePod, EnsureClaim, EnsureSecret
from phased.core.reports import Report, ReportKind, report_token
from phased.core.settings import ReportSettings, Settings
from phased.core.times import format_time
from tests.core.builders import JOB, Cluster, events, node, of_type, phase, spec, with_ready

SETTINGS = Settings(reports=ReportSettings(url="http://phased.test:8082", key_file="/k"))


def _report(cluster: Cluster, kind: ReportKind, step: int, **kw: Any) -> Report:
    fields: dict[str, Any] = {
        "phase": cluster.status.phase or "",
        "generation": cluster.status.restart_generation,
        "attempt": 0,
        "rank": 0,
        "path": f"/checkpoints/llm/step-{step}" if kind == ReportKind.CHECKPOINT else "",
        **kw,
    }
    report = Report(kind=kind, step=step, time=cluster.now, **fields)
    cluster.report(report)
    return report


def test_a_reporting_job_restarts_from_its_checkpoint_and_ends_its_phase_on_the_final_one():
    the_spec = spec(
        phase("train", 2, 2),
        phase("validate", 2, 2),
        spares=1,
        checkpoint={"report": True, "interval": "1h", "volume": {"size": "1Ti"}},
    )
    cluster = Cluster(
        the_spec,
        {n.name: n for n in [node(f"n{i}") for i in range(4)]},
        settings=SETTINGS,
        report_token=report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid),
    )
    plans = cluster.settle()
    assert len(cluster.running()) == 2 and cluster.claim and cluster.secret
    assert sum(len(of_type(p, EnsureClaim)) + len(of_type(p, EnsureSecret)) for p in plans) == 2

    cluster.advance(600)
    _report(cluster, ReportKind.CHECKPOINT, 500)
    cluster.settle()
    assert cluster.status.phases[0].last_checkpoint.step == 500

    # A node fails 20 minutes after the checkpoint.
    cluster.advance(1200)
    victim = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[victim] = with_ready(cluster.nodes[victim], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    (entry,) = cluster.status.failures
    assert entry.lost_work_seconds == 1200 and entry.resume_step == 500
    assert cluster.status.restart_generation == 1 and len(cluster.running()) == 2
    created = [a for a in cluster.log if isinstance(a, CreatePod)][-1].manifest
    env = {e["name"]: e["value"] for e in created["spec"]["containers"][0]["env"]}
    assert env["PHASED_RESUME_STEP"] == "500"
    assert entry.resumed is None and cluster.status.state == JobState.RECOVERING

    cluster.advance(45)  # the new generation loads the checkpoint, then reports
    resumed = _report(cluster, ReportKind.PROGRESS, 510).time
    cluster.settle()
    (entry,) = cluster.status.failures
    assert entry.resumed == format_time(resumed)
    assert entry.interruption_seconds == 31 + 45
    assert cluster.status.state == JobState.RUNNING

    # The workers finish; the phase waits for their final checkpoint, then moves on.
    cluster.advance(600)
    cluster.finish_workers("train")
    plan = cluster.step()
    assert "WaitingForFinalCheckpoint" in events(plan) and cluster.status.phase == "train"
    cluster.advance(30)
    _report(cluster, ReportKind.CHECKPOINT, 900, final=True)
    cluster.settle()
    assert cluster.status.phase == "validate"
    assert cluster.status.phases[0].last_checkpoint.final is True
    assert len(cluster.running()) == 2
