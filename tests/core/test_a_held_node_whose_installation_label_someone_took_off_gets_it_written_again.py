"""A node a job holds carries this installation's ``phased.dev/installation`` label, as its
claim wrote it. Someone taking it off leaves the node the job's — its ``job-uid`` label, the
taints agreeing and the claim's ``claimed-at``, say whose it is, as for a pool claimed by a
Phased from before installations — but whatever reads a node without the job at hand took it
for another's: it counted as ``NoInstallation`` in ``phased_nodes_left_alone``, the watch of
the installation's nodes lost it (out of the ``nodeSelector`` too, it would leave the
operator's sight), and once the job was gone without letting go the orphan release, which
gives back only nodes carrying this installation's label, never gave it back. The next pass
writes it again, moves nothing, and says so (``NodeLabelsRestored``). Before, nothing wrote
it until the node's role next changed."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import ClaimNode, CreatePod, DeletePod, EmitEvent, ReleaseNode, SetNodeRole
from phased.core.ownership import Kind, holds, ownership
from tests.core.builders import SETTINGS, Cluster
from tests.core.test_an_active_node_whose_pool_taint_someone_removed_gets_it_back import _running


def _claimed(cluster: Cluster) -> None:
    """Every held node carries the ``claimed-at`` the kube layer's claim writes."""
    for name, n in cluster.nodes.items():
        if n.owner_uid == cluster.job.uid:
            notes = {**n.annotations, labels.ANNOTATION_CLAIMED_AT: "2026-03-01T11:00:00Z"}
            cluster.nodes[name] = replace(n, annotations=notes)


def _unlabel(cluster: Cluster, name: str) -> None:
    n = cluster.nodes[name]
    found = {k: v for k, v in n.labels.items() if k != labels.LABEL_INSTALLATION}
    cluster.nodes[name] = replace(n, labels=found, resource_version="relabelled")


def test_the_installation_label_taken_off_an_active_node_and_a_spare_is_written_again() -> None:
    cluster = _running(spares=1)
    _claimed(cluster)
    active = cluster.held(NodeRole.ACTIVE)[1]
    (spare,) = cluster.held(NodeRole.SPARE)
    workers = sorted(p.name for p in cluster.running())
    for name in (active, spare):
        _unlabel(cluster, name)
        node = cluster.nodes[name]
        assert holds(node, cluster.job.uid, SETTINGS.installation)  # still the job's
        assert ownership(node, SETTINGS.installation).kind == Kind.LEFT_ALONE  # to the rest
    cluster.advance(30)

    plans = cluster.settle()
    actions = [a for p in plans for a in p.actions]

    for name in (active, spare):
        node = cluster.nodes[name]
        assert node.labels.get(labels.LABEL_INSTALLATION) == SETTINGS.installation
        assert ownership(node, SETTINGS.installation).kind == Kind.OURS
    assert sorted((a.node, a.role) for a in actions if isinstance(a, SetNodeRole)) == sorted(
        [(active, NodeRole.ACTIVE), (spare, NodeRole.SPARE)]
    )
    moved = (ClaimNode, ReleaseNode, CreatePod, DeletePod)
    assert not [a for a in actions if isinstance(a, moved)]
    said = [a for a in actions if isinstance(a, EmitEvent) and a.reason == "NodeLabelsRestored"]
    assert len(said) == 1 and said[0].type == "Warning"
    assert active in said[0].message and spare in said[0].message
    assert labels.LABEL_INSTALLATION in said[0].message
    assert sorted(p.name for p in cluster.running()) == workers
    assert cluster.status.state == JobState.RUNNING


def test_a_node_carrying_its_installation_label_is_not_written_again() -> None:
    cluster = _running(spares=1)
    _claimed(cluster)
    cluster.advance(30)
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, SetNodeRole)]
