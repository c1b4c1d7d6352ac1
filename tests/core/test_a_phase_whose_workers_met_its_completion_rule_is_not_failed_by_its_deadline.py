"""A phase whose workers met its completion rule has done its work: its ``maxDuration``
running out while the boundary waits (for the final checkpoint, or for the pass that sees
the workers done) completes it, it does not fail the job."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole, PhaseState
from phased.core.reports import Report, ReportKind, report_token
from phased.core.settings import ReportSettings, Settings
from tests.core.builders import JOB, Cluster, events, node, phase, spec

REPORTING = Settings(reports=ReportSettings(url="http://phased.test:8082", key_file="/k"))


def _cluster(settings: Settings, **extra: object) -> Cluster:
    the_spec = spec(
        phase("train", 2, 2, maxDuration="1h"),
        phase("validate", 2, 2),
        spares=1,
        **extra,
    )
    token = report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid)
    return Cluster(
        the_spec,
        {n.name: n for n in [node(f"n{i}") for i in range(4)]},
        settings=settings,
        report_token=token if settings is REPORTING else None,
    )


def _checkpoint(cluster: Cluster, step: int, final: bool = False) -> None:
    cluster.report(
        Report(
            kind=ReportKind.CHECKPOINT,
            step=step,
            time=cluster.now,
            phase="train",
            generation=cluster.status.restart_generation,
            attempt=0,
            rank=0,
            path=f"/checkpoints/llm/step-{step}",
            final=final,
        )
    )


def test_the_deadline_passing_while_the_boundary_waits_for_the_final_checkpoint():
    cluster = _cluster(
        REPORTING, checkpoint={"report": True, "interval": "1h", "volume": {"size": "1Ti"}}
    )
    cluster.settle()
    assert len(cluster.running()) == 2
    cluster.advance(50 * 60)
    _checkpoint(cluster, 900)
    cluster.finish_workers("train")
    waiting = cluster.settle()
    assert cluster.status.phase == "train" and cluster.status.state != JobState.FAILED
    assert "WaitingForFinalCheckpoint" in [e for p in waiting for e in events(p)]

    cluster.advance(11 * 60)  # the deadline (1h) passes before the final checkpoint comes
    plans = cluster.settle()
    assert cluster.status.state != JobState.FAILED, cluster.status.message
    assert cluster.status.phases[0].state == PhaseState.SUCCEEDED
    assert cluster.status.phase == "validate"
    assert "PhaseTimedOut" not in [e for p in plans for e in events(p)]
    assert len(cluster.held(NodeRole.ACTIVE)) == 2


def test_the_deadline_passing_before_the_pass_that_sees_the_workers_done():
    cluster = _cluster(Settings())
    cluster.settle()
    cluster.advance(59 * 60)
    cluster.finish_workers("train")
    cluster.advance(2 * 60)  # the pass that sees them done comes after the deadline
    plans = cluster.settle()
    assert cluster.status.state != JobState.FAILED, cluster.status.message
    assert [r.state for r in cluster.status.phases[:1]] == [PhaseState.SUCCEEDED]
    assert cluster.status.phase == "validate" and len(cluster.running()) == 2
    assert "PhaseCompleted" in [e for p in plans for e in events(p)]
