"""A node a job holds is kept from the cluster autoscalers, and given back as it was found.

A held spare runs no pod but DaemonSets', so Cluster Autoscaler and Karpenter take it for an
empty node and remove it within minutes (10 by Cluster Autoscaler's default): a job's spares
quietly went, and each refill after them, and the next failure found none. Every patch of a
held node now writes the guards the autoscalers read
(``cluster-autoscaler.kubernetes.io/scale-down-disabled`` and ``karpenter.sh/do-not-disrupt``,
"true") that the node lacks, and records in ``phased.dev/scale-down-guards`` which ones it
wrote; a release takes away only those. A guard an admin had set, whatever its value, is
theirs and stays; one a person changed while the job held the node is theirs too. A
quarantined node stays guarded until a person releases it (a broken node held for them)."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import JobRef
from phased.kube.nodes import NodeVerbs
from tests.kube.fake_cluster import FakeCluster

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")
CA, KARPENTER = labels.SCALE_DOWN_GUARDS
BOTH = f"{CA},{KARPENTER}"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _claimed(cluster: FakeCluster, name: str, role: NodeRole = NodeRole.SPARE) -> NodeVerbs:
    verbs = NodeVerbs(cluster, "default")  # type: ignore[arg-type]
    rv = cluster.nodes[name]["metadata"]["resourceVersion"]
    assert run(verbs.claim(name, rv, JOB, role, NOW)).won
    return verbs


def _notes(cluster: FakeCluster, name: str) -> dict[str, str]:
    return dict(cluster.nodes[name]["metadata"]["annotations"])


def test_a_claimed_node_is_guarded_and_a_released_one_is_as_it_was_found() -> None:
    cluster = FakeCluster()
    cluster.add_node("n", {"type": "h100"}, annotations={"team.example/owner": "infra"})
    found = copy.deepcopy(cluster.nodes["n"]["metadata"])
    verbs = _claimed(cluster, "n")
    notes = _notes(cluster, "n")
    assert (notes[CA], notes[KARPENTER], notes[labels.ANNOTATION_GUARDS]) == ("true", "true", BOTH)
    assert run(verbs.set_role("n", JOB, NodeRole.ACTIVE, now=NOW))  # promoted: still guarded
    assert _notes(cluster, "n")[CA] == "true"
    assert run(verbs.release("n", JOB))
    meta = cluster.nodes["n"]["metadata"]
    assert (meta["labels"], meta["annotations"]) == (found["labels"], found["annotations"])


def test_a_guard_an_admin_had_set_is_neither_written_over_nor_taken_away() -> None:
    cluster = FakeCluster()
    cluster.add_node("n", annotations={CA: "false"})  # the admin wants this one scaled down
    verbs = _claimed(cluster, "n")
    notes = _notes(cluster, "n")
    assert (notes[CA], notes[KARPENTER], notes[labels.ANNOTATION_GUARDS]) == (
        "false",
        "true",
        KARPENTER,
    )
    assert run(verbs.release("n", JOB))
    assert _notes(cluster, "n") == {CA: "false"}

    cluster.add_node("m", annotations={CA: "true", KARPENTER: "true"})
    verbs = _claimed(cluster, "m")
    assert labels.ANNOTATION_GUARDS not in _notes(cluster, "m")  # it wrote none
    assert run(verbs.release("m", JOB))
    assert _notes(cluster, "m") == {CA: "true", KARPENTER: "true"}


def test_a_guard_a_person_changed_while_the_node_was_held_is_theirs() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    verbs = _claimed(cluster, "n")
    cluster.nodes["n"]["metadata"]["annotations"][KARPENTER] = "false"
    assert run(verbs.release("n", JOB))
    assert _notes(cluster, "n") == {KARPENTER: "false"}


def test_a_node_held_before_guards_were_written_is_guarded_at_its_next_change() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    verbs = _claimed(cluster, "n")
    for key in (CA, KARPENTER, labels.ANNOTATION_GUARDS):  # as an older Phased claimed it
        del cluster.nodes["n"]["metadata"]["annotations"][key]
    assert run(verbs.set_role("n", JOB, NodeRole.SPARE))  # same role: only the guards change
    notes = _notes(cluster, "n")
    assert (notes[CA], notes[KARPENTER], notes[labels.ANNOTATION_GUARDS]) == ("true", "true", BOTH)
    patches = len(cluster.patches())
    assert not run(verbs.set_role("n", JOB, NodeRole.SPARE))  # nothing left to change
    assert len(cluster.patches()) == patches


def test_a_quarantined_node_stays_guarded_until_a_person_releases_it() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    verbs = _claimed(cluster, "n", NodeRole.ACTIVE)
    assert run(verbs.quarantine("n", JOB, '{"reason": "NodeNotReady"}'))
    assert run(verbs.release("n", JOB))  # the job lets go; the node is kept for a person
    notes = _notes(cluster, "n")
    assert (notes[CA], notes[KARPENTER], notes[labels.ANNOTATION_GUARDS]) == ("true", "true", BOTH)
    assert run(verbs.release_quarantined("n"))  # `phased release-node n`
    assert _notes(cluster, "n") == {}
    assert cluster.nodes["n"]["metadata"]["labels"] == {}
