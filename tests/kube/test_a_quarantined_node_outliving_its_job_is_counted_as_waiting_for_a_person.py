"""A quarantined node keeps its ``job-uid`` label when its job is deleted: it outlives the job,
cordoned, with the note naming it, until a person runs ``phased release-node``. No job holds
it any more, so the ``phased_nodes_left_alone`` gauge counts it as ``Quarantined``, as it
counts a quarantined node its job let go of. Before, only the latter was counted: the
quarantined nodes of deleted jobs — the ones most surely waiting for a person, since no job's
status names them any more — showed in no metric at all. A quarantined node of a job the
operator knows is the job's, and not counted; nor is any before the jobs are listed."""

from __future__ import annotations

from phased.core import labels
from phased.core.model import JobRef
from phased.core.settings import Settings
from phased.reconcile import JobEntry, Reconciler
from tests.kube.fake_cluster import FakeCluster

JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")


def _quarantined(uid: str) -> dict[str, str]:
    return {
        labels.LABEL_JOB_UID: uid,
        labels.LABEL_JOB: "llm",
        labels.LABEL_JOB_NAMESPACE: "ml",
        labels.LABEL_ROLE: "quarantined",
        labels.LABEL_INSTALLATION: "default",
    }


def _reconciler(cluster: FakeCluster, synced: bool = True) -> Reconciler:
    reconciler = Reconciler(cluster, Settings(), operator_pod=("phased", "op-0"))  # type: ignore[arg-type]
    reconciler.jobs[JOB.uid] = JobEntry(ref=JOB, raw={})
    reconciler.jobs_synced = synced
    reconciler.nodes.replace_all(cluster.nodes.values())
    return reconciler


def test_a_quarantined_node_of_a_deleted_job_is_counted() -> None:
    cluster = FakeCluster()
    cluster.add_node("gone", _quarantined("uid-deleted"), spec={"unschedulable": True})
    cluster.add_node("let-go", {labels.LABEL_ROLE: "quarantined"}, spec={"unschedulable": True})
    assert _reconciler(cluster).left_alone() == {"Quarantined": 2}


def test_a_quarantined_node_of_a_known_job_is_its_own() -> None:
    cluster = FakeCluster()
    cluster.add_node("held", _quarantined(JOB.uid), spec={"unschedulable": True})
    assert _reconciler(cluster).left_alone() == {}


def test_nothing_is_counted_as_a_deleted_jobs_before_the_jobs_are_listed() -> None:
    cluster = FakeCluster()
    cluster.add_node("gone", _quarantined("uid-deleted"), spec={"unschedulable": True})
    assert _reconciler(cluster, synced=False).left_alone() == {}
