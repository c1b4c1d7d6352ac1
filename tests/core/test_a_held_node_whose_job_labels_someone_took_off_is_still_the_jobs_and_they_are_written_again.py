"""A node a job holds carries the job's name labels (``phased.dev/job``,
``phased.dev/job-namespace``) as its claim wrote them. Someone taking them off, or writing
others, leaves the node the job's — its ``job-uid`` label, the taints agreeing, says whose
it is — but whatever reads a node without the job at hand went wrong on it: it counted as
partially marked, ``phased release-node`` named its job "?/?", and once the job was gone
without letting go, the orphan release (which finds the job by those labels) never gave it
back. The next pass writes them again, moves nothing, keeps the note of the failed node a
promoted spare replaces, and says so (``NodeLabelsRestored``). Before, nothing wrote them
again: the node stayed half-named for as long as the job held it."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import ClaimNode, CreatePod, DeletePod, EmitEvent, ReleaseNode, SetNodeRole
from phased.core.ownership import Kind, ownership
from tests.core.builders import SETTINGS, Cluster, with_ready
from tests.core.test_an_active_node_whose_pool_taint_someone_removed_gets_it_back import _running


def _relabel(cluster: Cluster, name: str, **changed: str | None) -> None:
    n = cluster.nodes[name]
    found = {k: v for k, v in n.labels.items() if k not in changed}
    found.update({k: v for k, v in changed.items() if v is not None})
    cluster.nodes[name] = replace(n, labels=found, resource_version="relabelled")


def _ours(cluster: Cluster, name: str) -> bool:
    return ownership(cluster.nodes[name], SETTINGS.installation).kind == Kind.OURS


def test_name_labels_taken_off_an_active_node_and_rewritten_on_a_spare_are_written_again() -> None:
    cluster = _running(spares=1)
    active = cluster.held(NodeRole.ACTIVE)[1]
    (spare,) = cluster.held(NodeRole.SPARE)
    workers = sorted(p.name for p in cluster.running())
    _relabel(cluster, active, **{labels.LABEL_JOB: None})
    _relabel(cluster, spare, **{labels.LABEL_JOB_NAMESPACE: "elsewhere"})
    assert not _ours(cluster, active)  # partially marked; the spare names another job
    cluster.advance(30)

    plans = cluster.settle()
    actions = [a for p in plans for a in p.actions]

    assert _ours(cluster, active) and _ours(cluster, spare)
    assert cluster.nodes[spare].labels[labels.LABEL_JOB_NAMESPACE] == cluster.job.namespace
    assert sorted((a.node, a.role) for a in actions if isinstance(a, SetNodeRole)) == sorted(
        [(active, NodeRole.ACTIVE), (spare, NodeRole.SPARE)]
    )
    moved = (ClaimNode, ReleaseNode, CreatePod, DeletePod)
    assert not [a for a in actions if isinstance(a, moved)]
    said = [a for a in actions if isinstance(a, EmitEvent) and a.reason == "NodeLabelsRestored"]
    assert len(said) == 1 and said[0].type == "Warning"
    assert active in said[0].message and spare in said[0].message
    assert sorted(p.name for p in cluster.running()) == workers
    assert cluster.held(NodeRole.SPARE) == [spare]
    assert cluster.status.state == JobState.RUNNING


def test_a_promoted_spare_named_again_keeps_the_note_of_the_node_it_replaces() -> None:
    cluster = _running(spares=1)
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    (entry,) = cluster.status.failures
    promoted = entry.replaced_by
    assert promoted is not None and promoted in cluster.held(NodeRole.ACTIVE)
    note = cluster.nodes[promoted].annotations.get(labels.ANNOTATION_REPLACES)
    assert note is not None

    _relabel(cluster, promoted, **{labels.LABEL_JOB: None, labels.LABEL_JOB_NAMESPACE: None})
    cluster.advance(30)
    cluster.settle()

    assert _ours(cluster, promoted)
    assert cluster.nodes[promoted].annotations.get(labels.ANNOTATION_REPLACES) == note
    (entry,) = cluster.status.failures
    assert entry.replaced_by == promoted


def test_a_node_named_as_claimed_is_not_written_again() -> None:
    cluster = _running(spares=1)
    cluster.advance(30)
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, SetNodeRole)]
