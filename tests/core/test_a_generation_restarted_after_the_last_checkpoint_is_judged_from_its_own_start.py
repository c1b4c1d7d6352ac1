"""A generation restarted after the last checkpoint is judged stale from its own start.

It resumes from that checkpoint and does again the work since, so its own first checkpoint
comes an interval after it began. Judged from the checkpoint an earlier generation made, a
gang restarted 55 minutes into an hourly interval was ``CheckpointStale`` (with a Warning)
five minutes after it began: a false alarm on every failure late in an interval."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.conditions import ConditionType, find
from phased.core.reports import ReportKind, report_token
from tests.core.builders import JOB, Cluster, node, phase, spec, with_ready
from tests.core.test_a_reporting_job_walks_through_a_failure_and_a_final_checkpoint import (
    SETTINGS,
    _report,
)


def _restarted(minutes_after_checkpoint: int) -> Cluster:
    """An hourly-checkpointing job whose node fails ``minutes_after_checkpoint`` after its
    checkpoint at step 500; the new generation is running, resumed from it."""
    the_spec = spec(
        phase("train", 2, 2),
        spares=1,
        checkpoint={"report": True, "interval": "1h", "volume": {"size": "1Ti"}},
    )
    cluster = Cluster(
        the_spec,
        {n.name: n for n in [node(f"n{i}") for i in range(4)]},
        settings=SETTINGS,
        report_token=report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid),
    )
    cluster.settle()
    cluster.advance(600)
    _report(cluster, ReportKind.CHECKPOINT, 500)
    cluster.settle()
    cluster.advance(minutes_after_checkpoint * 60)
    victim = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[victim] = with_ready(cluster.nodes[victim], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    cluster.advance(45)
    _report(cluster, ReportKind.PROGRESS, 510)
    cluster.settle()
    assert cluster.status.restart_generation == 1 and cluster.status.state == JobState.RUNNING
    return cluster


def _stale(cluster: Cluster) -> bool:
    cond = find(cluster.status.conditions, ConditionType.CHECKPOINT_STALE)
    return cond is not None and cond.status == "True"


def test_a_gang_restarted_late_in_an_interval_is_not_stale_before_an_interval_of_its_own() -> None:
    cluster = _restarted(55)
    cluster.advance(5 * 60)  # 61 minutes after the checkpoint, 6 after the restart
    cluster.settle()
    assert not _stale(cluster)
    cluster.advance(56 * 60)  # over an interval since the new generation began, none reported
    cluster.settle()
    assert _stale(cluster)
    cond = find(cluster.status.conditions, ConditionType.CHECKPOINT_STALE)
    assert cond is not None and "the start of generation 1 (resumed from step 500)" in cond.message


def test_its_own_checkpoint_is_then_what_the_next_one_is_due_after() -> None:
    cluster = _restarted(55)
    cluster.advance(40 * 60)
    _report(cluster, ReportKind.CHECKPOINT, 900)
    cluster.settle()
    cluster.advance(61 * 60)  # an interval after the new generation's own checkpoint
    cluster.settle()
    assert _stale(cluster)
