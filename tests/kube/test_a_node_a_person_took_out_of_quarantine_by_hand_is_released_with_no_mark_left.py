"""A quarantined node a person took back by hand — its role set to ``spare`` or ``active``
(``kubectl label --overwrite``), the ``quarantined`` taint removed, perhaps uncordoned —
is the job's again (its marks agree: :mod:`phased.core.ownership`), but still carries the
quarantine note (``phased.dev/quarantine``): people do not remove annotations they did not
write. When the job gives it back (the job ends, the pool shrinks, the person's cordon
releases it), the release takes every Phased mark away, the note too. Before, the note
stayed: the node, with no job label left, was ``PartialMarks`` for ever — never claimed
again — and ``phased release-node`` refused it as not quarantined."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import JobRef
from phased.core.ownership import Kind, holds, ownership
from phased.kube.convert import node_from_raw
from phased.kube.nodes import NodeVerbs
from tests.kube.fake_cluster import FakeCluster

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")
MINE = "default"
NOTE = '{"reason": "NodeNotReady", "job": "uid-llm", "detected": "2026-03-01T10:00:00Z"}'


def _taken_back_by_hand(cluster: FakeCluster, role: NodeRole, cordoned: bool) -> None:
    cluster.add_node(
        "n",
        {
            labels.LABEL_JOB_UID: JOB.uid,
            labels.LABEL_JOB: JOB.name,
            labels.LABEL_JOB_NAMESPACE: JOB.namespace,
            labels.LABEL_ROLE: role.value,  # was quarantined
            labels.LABEL_INSTALLATION: MINE,
        },
        annotations={
            labels.ANNOTATION_CLAIMED_AT: "2026-03-01T09:00:00Z",
            labels.ANNOTATION_QUARANTINE: NOTE,  # left by the person
            "example.com/kept": "yes",
        },
        spec={
            "unschedulable": cordoned,
            "taints": [
                {"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"},
                {"key": "example.com/kept", "value": "yes", "effect": "NoSchedule"},
            ],
        },
    )


@pytest.mark.parametrize("role", [NodeRole.SPARE, NodeRole.ACTIVE])
@pytest.mark.parametrize("cordoned", [False, True], ids=["uncordoned", "cordoned"])
def test_its_release_leaves_no_mark_and_it_can_be_claimed_again(
    role: NodeRole, cordoned: bool
) -> None:
    cluster = FakeCluster()
    _taken_back_by_hand(cluster, role, cordoned)
    assert holds(node_from_raw(cluster.nodes["n"]), JOB.uid, MINE)  # the job's again
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]

    assert asyncio.run(verbs.release("n", JOB))

    node = node_from_raw(cluster.nodes["n"])
    assert ownership(node, MINE).kind == Kind.UNMARKED
    notes = {k: v for k, v in cluster.nodes["n"]["metadata"]["annotations"].items() if v}
    assert notes == {"example.com/kept": "yes"}
    assert [t.key for t in node.taints] == ["example.com/kept"]
    assert node.unschedulable == cordoned  # a release never uncordons: the cordon is theirs
    if cordoned:
        uncordoned = cluster.nodes["n"]
        uncordoned["spec"]["unschedulable"] = False
        node = node_from_raw(uncordoned)
    other = JobRef(namespace="ml", name="next", uid="uid-next")
    assert asyncio.run(verbs.claim("n", node.resource_version, other, NodeRole.SPARE, NOW)).won


def test_a_quarantined_node_released_by_its_job_keeps_its_note_for_a_person() -> None:
    cluster = FakeCluster()
    _taken_back_by_hand(cluster, NodeRole.QUARANTINED, True)
    raw = cluster.nodes["n"]
    raw["spec"]["taints"].append(
        {"key": labels.TAINT_QUARANTINE, "value": JOB.uid, "effect": "NoSchedule"}
    )
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]

    assert asyncio.run(verbs.release("n", JOB))

    notes = cluster.nodes["n"]["metadata"]["annotations"]
    assert notes.get(labels.ANNOTATION_QUARANTINE) == NOTE
    assert ownership(node_from_raw(cluster.nodes["n"]), MINE).reason == "Quarantined"
