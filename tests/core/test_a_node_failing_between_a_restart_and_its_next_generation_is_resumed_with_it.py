"""A node that fails after a gang restart stopped the workers and before the next
generation was created (the restart waits for the survivors to stop) interrupted the
generation being stopped: its ledger entry names that one, and the next generation's
first report (or, without reports, its workers running) resumes it with the first
failure's entry. Before, the entry named the next generation, which the status already
counts from the restart, and waited for a report of a later one still: it stayed open
while the workers trained, the job Recovering, its interruption charged on."""

from __future__ import annotations

from datetime import timedelta

import pytest

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import CreatePod
from phased.core.reports import Report, ReportKind, ReportStore, merge, report_token
from phased.core.settings import ReportSettings, Settings
from tests.core.builders import JOB, Cluster, node, of_type, phase, spec, with_ready

REPORTING = Settings(
    reports=ReportSettings(url="http://phased.test:8082", key_file="/etc/phased/report-key")
)
TOKEN = report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid)


def _report(kind: ReportKind, step: int, cluster: Cluster, generation: int, rank: int) -> None:
    path = f"/c/{step}" if kind == ReportKind.CHECKPOINT else ""
    report = Report(
        kind=kind,
        step=step,
        time=cluster.now,
        phase="train",
        generation=generation,
        attempt=0,
        rank=rank,
        path=path,
    )
    cluster.reports = merge(cluster.reports, report)


@pytest.mark.parametrize("reporting", [True, False], ids=["with reports", "without reports"])
def test_the_second_failure_is_resumed_with_the_first(reporting: bool) -> None:
    checkpoint = {"report": True, "interval": "1h"} if reporting else {}
    the_spec = spec(phase("train", 8, 8), spares=2, checkpoint=checkpoint)
    nodes = {f"n{i:02d}": node(f"n{i:02d}") for i in range(12)}
    cluster = Cluster(
        the_spec,
        nodes,
        settings=REPORTING if reporting else Settings(),
        report_token=TOKEN if reporting else None,
        reports=ReportStore(),
    )
    cluster.settle()
    cluster.advance(600)
    if reporting:
        _report(ReportKind.CHECKPOINT, 100, cluster, generation=0, rank=0)
    cluster.settle()
    first, second = sorted(cluster.held(NodeRole.ACTIVE))[:2]

    cluster.nodes[first] = with_ready(cluster.nodes[first], False, cluster.now)
    cluster.advance(40)
    restart = cluster.decide()  # answered: the gang restarts, the survivors stop
    assert restart.status.restart_generation == 1 and not of_type(restart, CreatePod)
    cluster.apply(restart)
    # Before generation 1 is made, the second node is found failed (past its grace).
    cluster.nodes[second] = with_ready(
        cluster.nodes[second], False, cluster.now - timedelta(seconds=60)
    )
    cluster.advance(5)
    cluster.settle()
    entries = {e.node: e for e in cluster.status.failures}
    assert entries[second].generation == 0, entries[second]  # the one it interrupted
    assert {p.generation for p in cluster.running()} == {1}
    if reporting:
        for rank in range(8):
            _report(ReportKind.PROGRESS, 101, cluster, generation=1, rank=rank)
    cluster.advance(5)
    cluster.settle()
    assert [e.resumed is not None for e in cluster.status.failures] == [True, True]
    assert cluster.status.state == JobState.RUNNING
