"""The whole run on the tiny simulator: claim, run, fail a node, swap, finish four phases."""

from phased.api.v1alpha1 import JobState, NodeRole, PhaseState
from phased.core.model import EmitEvent
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

PHASES = (
    phase("preprocess", 2, 3),
    phase("initialize", 3, 4),
    phase("train", 4, 5),
    phase("validate", 2, 2),
)


def _events(cluster: Cluster) -> list[str]:
    return [a.reason for a in cluster.log if isinstance(a, EmitEvent)]


def test_four_phases_with_a_failure_in_train():
    cluster = Cluster(spec(*PHASES, spares=1), {n.name: n for n in nodes("h", 8)})
    for name in ("preprocess", "initialize"):
        cluster.settle()
        assert cluster.status.phase == name
        assert cluster.status.state == JobState.RUNNING
        cluster.advance(3600)
        cluster.finish_workers(name)
    cluster.settle()
    assert cluster.status.phase == "train"
    assert len(cluster.held(NodeRole.ACTIVE)) == 5
    assert len(cluster.held(NodeRole.SPARE)) == 1

    victim = sorted(p.node_name for p in cluster.running() if p.node_name)[0]
    cluster.advance(60)
    cluster.nodes[victim] = with_ready(cluster.nodes[victim], False, cluster.now)
    plan = cluster.step()  # inside the grace: nothing yet, but a wake-up exactly at its end
    assert plan.requeue_after == 30
    cluster.advance(30)
    cluster.settle()
    assert victim in cluster.held(NodeRole.QUARANTINED)
    assert cluster.status.restart_generation == 1
    assert len([p for p in cluster.running() if p.phase_name == "train"]) == 5
    entry = cluster.status.failures[0]
    assert entry.node == victim and entry.replaced_by and entry.resumed
    assert entry.interruption_seconds == 30
    assert cluster.status.interruption.used_seconds == 30

    cluster.advance(3600)
    cluster.finish_workers("train")
    cluster.settle()
    assert cluster.status.phase == "validate"
    assert len(cluster.held(NodeRole.ACTIVE)) == 2
    cluster.advance(600)
    cluster.finish_workers("validate")
    cluster.settle()
    assert cluster.status.state == JobState.SUCCEEDED
    assert cluster.held(NodeRole.ACTIVE) == [] and cluster.held(NodeRole.SPARE) == []
    assert cluster.held(NodeRole.QUARANTINED) == [victim]  # outlives the job
    assert cluster.finished
    assert [r.state for r in cluster.status.phases] == [PhaseState.SUCCEEDED] * 4
    assert _events(cluster).count("PhaseCompleted") == 4
    assert _events(cluster).count("JobSucceeded") == 1
    for reason in ("NodeFailed", "NodeQuarantined", "SparePromoted", "WorkersRestarted"):
        assert _events(cluster).count(reason) == 1, reason
    assert cluster.status.accounting.gpu_hours > 0
    assert cluster.status.accounting.cost > 0
