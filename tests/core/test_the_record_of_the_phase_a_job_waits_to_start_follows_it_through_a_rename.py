"""The phase a job waits to start has not started, so any edit of it passes, its name too;
but its record in ``status.phases`` already holds what the wait cost: ``waitingSeconds``
and what the pool held meanwhile was charged. The record of that phase follows its place
(``status.phaseIndex``) while it has not started: renamed or replaced by a phase of another
name, the record is carried over under the new name, so nothing it counted is lost. Before,
records were matched by name alone: the renamed phase got an empty record, and its wait
and its charges vanished from the phase's account; and the interval after the edit was
charged at the pool seen then, not at the pool the last pass left (``accounting.basis``,
which names the phase by its old name)."""

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import JobRef
from tests.core.builders import T0, Cluster, nodes, owned, phase, spec

OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)


def _waiting(first: str) -> Cluster:
    cluster = Cluster(spec(phase(first, 4, 4)), {n.name: n for n in nodes("h", 2)})
    cluster.settle()
    cluster.advance(600)
    cluster.settle()
    assert cluster.status.state == JobState.WAITING
    return cluster


def test_a_renamed_waiting_phase_keeps_its_waiting_seconds() -> None:
    cluster = _waiting("train")
    waited = cluster.status.phases[0].waiting_seconds
    assert waited >= 600
    cluster.the_spec = spec(phase("pretrain", 4, 4))
    cluster.advance(60)
    cluster.settle()
    assert [r.name for r in cluster.status.phases] == ["pretrain"]
    assert cluster.status.phases[0].waiting_seconds >= waited + 60


def test_the_phase_that_ran_before_it_keeps_its_own_record_and_nothing_goes_down() -> None:
    cluster = Cluster(
        spec(phase("prep", 2, 2), phase("train", 4, 4)), {n.name: n for n in nodes("h", 2)}
    )
    cluster.settle()
    cluster.advance(3600)
    cluster.finish_workers("prep")
    cluster.settle()
    cluster.advance(600)
    cluster.settle()
    assert cluster.status.state == JobState.WAITING and cluster.status.phase == "train"
    prep, train = cluster.status.phases
    paid = cluster.status.accounting.gpu_hours
    assert train.waiting_seconds >= 600
    cluster.the_spec = spec(phase("prep", 2, 2), phase("finetune", 2, 4))
    cluster.advance(60)
    cluster.step()
    after = cluster.status.phases
    assert [r.name for r in after] == ["prep", "finetune"]
    assert after[0] == prep  # the phase that ran keeps its record as it was
    assert after[1].waiting_seconds >= train.waiting_seconds
    assert after[1].gpu_hours >= train.gpu_hours
    assert cluster.status.accounting.gpu_hours >= paid


def test_the_nodes_held_across_the_rename_are_charged_to_it_as_they_were_held() -> None:
    pool = {n.name: n for n in nodes("h", 2)}
    pool.update({n.name: owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("o", 2)})
    cluster = Cluster(spec(phase("prep", 2, 2), phase("train", 4, 4)), pool)
    cluster.settle()
    cluster.advance(3600)
    cluster.finish_workers("prep")
    cluster.step()  # the boundary: train waits in line, keeping its 2 nodes one more pass
    assert cluster.status.state == JobState.WAITING and len(cluster.held(NodeRole.ACTIVE)) == 2
    paid = cluster.status.accounting.gpu_hours
    cluster.the_spec = spec(phase("prep", 2, 2), phase("finetune", 3, 4))
    cluster.advance(600)
    del cluster.nodes["h01"]  # gone meanwhile: the 2 nodes were held all the same
    cluster.step()
    held = 2 * 8 * 600 / 3600
    assert cluster.status.phases[1].name == "finetune"
    assert abs(cluster.status.phases[1].gpu_hours - held) < 1e-6
    assert abs(cluster.status.accounting.gpu_hours - paid - held) < 1e-6
