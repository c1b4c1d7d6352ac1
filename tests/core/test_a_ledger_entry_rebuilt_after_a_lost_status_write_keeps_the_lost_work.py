"""Crash safety: an operator killed between quarantining a node and writing the status loses
nothing of the ledger entry the next pass rebuilds from the node's quarantine note — the
generation the failure interrupted, the step the restart resumes from and the work lost are
there as when the failure was answered in one pass."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.model import QuarantineNode
from phased.core.reports import Report, ReportKind, report_token
from phased.core.settings import ReportSettings, Settings
from tests.core.builders import JOB, Cluster, node, phase, spec, with_ready

SETTINGS = Settings(reports=ReportSettings(url="http://phased.test:8082", key_file="/k"))


def _reporting_cluster() -> Cluster:
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
    cluster.report(
        Report(
            kind=ReportKind.CHECKPOINT,
            phase="train",
            generation=0,
            attempt=0,
            rank=0,
            step=500,
            time=cluster.now,
            path="/checkpoints/llm/step-500",
        )
    )
    cluster.settle()
    return cluster


def test_an_entry_rebuilt_from_the_quarantine_note_keeps_generation_resume_step_and_lost_work():
    cluster = _reporting_cluster()
    cluster.advance(1200)
    victim = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[victim] = with_ready(cluster.nodes[victim], False, cluster.now)
    cluster.advance(31)
    plan = cluster.decide()
    # The operator is killed right after the cordon: the rest of the pass and its status
    # write are lost.
    (quarantine,) = [a for a in plan.actions if isinstance(a, QuarantineNode)]
    cluster._apply(quarantine)
    cluster.advance(5)
    cluster.settle()
    (entry,) = cluster.status.failures
    assert entry.node == victim
    assert entry.generation == 0
    assert entry.resume_step == 500 and entry.lost_work_seconds == 1200
