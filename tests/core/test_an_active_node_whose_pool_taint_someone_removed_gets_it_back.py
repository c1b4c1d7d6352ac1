"""The pool taint keeps every other workload off the nodes a job holds. Someone else (a
person with ``kubectl taint nodes n phased.dev/pool-``, a tool that strips taints) removing
it from an active node leaves the node the job's — the taint is not what says whose it is —
but open to anyone: others' pods were scheduled there, and between two generations one
could take the GPUs the next worker needed. The next pass writes it again, moves nothing,
keeps the note of the failed node a promoted spare replaces, and says so
(``PoolTaintRestored``). Before, only spares got their taint back: an active node stayed
open for as long as it served."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.ledger import decode_replaces
from phased.core.model import (
    ClaimNode,
    CreatePod,
    DeletePod,
    EmitEvent,
    ReleaseNode,
    SetNodeRole,
)
from tests.core.builders import Cluster, node, phase, spec, with_ready


def _running(spares: int = 1) -> Cluster:
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}") for i in range(6)}
    cluster = Cluster(spec(phase("train", 3, 3), spares=spares), the_nodes)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _untaint(cluster: Cluster, name: str) -> None:
    n = cluster.nodes[name]
    kept = tuple(t for t in n.taints if t.key != labels.TAINT_POOL)
    cluster.nodes[name] = replace(n, taints=kept, resource_version="untainted")


def _pool_tainted(cluster: Cluster, name: str) -> bool:
    uid = cluster.job.uid
    return any(t.key == labels.TAINT_POOL and t.value == uid for t in cluster.nodes[name].taints)


def test_an_active_node_whose_pool_taint_was_removed_is_tainted_again_and_nothing_moves() -> None:
    cluster = _running()
    victim = cluster.held(NodeRole.ACTIVE)[1]
    workers = sorted(p.name for p in cluster.running())
    _untaint(cluster, victim)
    cluster.advance(30)

    plans = cluster.settle()
    actions = [a for p in plans for a in p.actions]

    assert _pool_tainted(cluster, victim)
    assert [a for a in actions if isinstance(a, SetNodeRole)] == [
        SetNodeRole(node=victim, role=NodeRole.ACTIVE)
    ]
    moved = (ClaimNode, ReleaseNode, CreatePod, DeletePod)
    assert not [a for a in actions if isinstance(a, moved)]
    said = [a for a in actions if isinstance(a, EmitEvent) and a.reason == "PoolTaintRestored"]
    assert len(said) == 1 and said[0].type == "Warning" and victim in said[0].message
    assert sorted(p.name for p in cluster.running()) == workers
    assert cluster.status.state == JobState.RUNNING


def test_a_promoted_spare_tainted_again_keeps_the_note_of_the_node_it_replaces() -> None:
    cluster = _running(spares=1)
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    (entry,) = cluster.status.failures
    promoted = entry.replaced_by
    assert promoted is not None and promoted in cluster.held(NodeRole.ACTIVE)
    note = cluster.nodes[promoted].annotations.get(labels.ANNOTATION_REPLACES)
    assert note is not None and decode_replaces(note) is not None

    _untaint(cluster, promoted)
    cluster.advance(30)
    cluster.settle()

    assert _pool_tainted(cluster, promoted)
    assert cluster.nodes[promoted].annotations.get(labels.ANNOTATION_REPLACES) == note


def test_a_spare_whose_pool_taint_was_removed_is_tainted_again_as_before() -> None:
    cluster = _running(spares=1)
    (spare,) = cluster.held(NodeRole.SPARE)
    _untaint(cluster, spare)
    cluster.advance(30)

    cluster.settle()

    assert _pool_tainted(cluster, spare)
    assert cluster.held(NodeRole.SPARE) == [spare]
