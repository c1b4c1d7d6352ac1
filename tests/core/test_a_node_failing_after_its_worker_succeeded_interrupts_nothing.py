"""A node that fails after the worker it ran has succeeded interrupted nothing: its worker
did its part (the phase waits only for its peers, or for the final checkpoint at the
boundary). The node is quarantined and replaced as any failed node, and its ledger entry
names its replacement, but it is resumed at detection with no lost work, and the job does
not say it is recovering — as a spare's failure is recorded. Before, the entry stayed open
until the phase ended: a job whose boundary waited for a final checkpoint said "recovering
from node failure", counted the wait against its interruption budget and the whole phase as
lost work."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole, PhaseState
from phased.core.model import CreatePod, PodPhase
from phased.core.reports import Report, ReportKind, report_token
from phased.core.settings import ReportSettings, Settings
from phased.core.times import format_time
from tests.core.builders import JOB, Cluster, node, phase, spec, with_ready

REPORTING = Settings(reports=ReportSettings(url="http://phased.test:8082", key_file="/k"))
NOT_READY_GRACE = 30


def _fail(cluster: Cluster, name: str) -> str:
    cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    detected = format_time(cluster.now)
    cluster.advance(NOT_READY_GRACE + 1)
    return detected


def test_a_node_failing_while_the_boundary_waits_for_the_final_checkpoint():
    the_spec = spec(
        phase("train", 2, 2),
        phase("validate", 2, 2),
        spares=1,
        checkpoint={"report": True, "interval": "1h", "volume": {"size": "1Ti"}},
    )
    cluster = Cluster(
        the_spec,
        {n.name: n for n in [node(f"n{i}") for i in range(5)]},
        settings=REPORTING,
        report_token=report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid),
    )
    cluster.settle()
    cluster.advance(600)
    cluster.finish_workers("train")
    cluster.settle()
    assert cluster.status.phase == "train"  # waiting for the final checkpoint

    victim = cluster.held(NodeRole.ACTIVE)[0]
    detected = _fail(cluster, victim)
    cluster.settle()
    (entry,) = cluster.status.failures
    assert entry.node == victim and cluster.held(NodeRole.QUARANTINED) == [victim]
    assert entry.resumed == detected and entry.interruption_seconds == 0
    assert entry.lost_work_seconds is None and entry.generation == 0
    spare = entry.replaced_by  # the spare took its place, and the entry says so
    assert spare is not None and spare in cluster.held(NodeRole.ACTIVE)
    assert cluster.status.state == JobState.RUNNING
    assert "final checkpoint" in cluster.status.message
    assert len(cluster.held(NodeRole.ACTIVE)) == 2 and cluster.status.restarts == 0

    cluster.advance(60)
    cluster.report(
        Report(
            kind=ReportKind.CHECKPOINT,
            step=1000,
            time=cluster.now,
            phase="train",
            generation=0,
            attempt=0,
            rank=0,
            path="/checkpoints/llm/step-1000",
            final=True,
        )
    )
    cluster.settle()
    assert cluster.status.phase == "validate" and len(cluster.running()) == 2
    assert cluster.status.phases[0].state == PhaseState.SUCCEEDED
    assert cluster.status.interruption.used_seconds == 0


def test_a_node_failing_after_its_rank_succeeded_while_a_peer_runs():
    the_spec = spec(phase("train", 2, 2), phase("eval", 1, 1), spares=1)
    cluster = Cluster(the_spec, {n.name: n for n in [node(f"n{i}") for i in range(4)]})
    cluster.settle()
    cluster.advance(600)
    done = next(p for p in cluster.pods.values() if p.rank == 1)
    cluster.pods[done.name] = replace(done, phase=PodPhase.SUCCEEDED, exit_code=0)
    assert done.node_name is not None
    detected = _fail(cluster, done.node_name)
    plans = cluster.settle()
    (entry,) = cluster.status.failures
    assert entry.resumed == detected and entry.interruption_seconds == 0
    assert entry.replaced_by in cluster.held(NodeRole.ACTIVE)
    assert not [a for p in plans for a in p.actions if isinstance(a, CreatePod)]
    assert cluster.status.state == JobState.RUNNING and cluster.status.restarts == 0
    assert cluster.status.interruption.used_seconds == 0
