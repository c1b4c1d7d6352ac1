"""The kube layer quarantines a node and later returns it. An active or spare node that was
already cordoned when it is quarantined was cordoned by someone else (Phased cordons only
the nodes it quarantines): the note written on it says so (``cordonedBefore``), read from
the node as the patch finds it, and returning the node never uncordons it. A node Phased
cordoned itself is uncordoned on return, as before."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from phased.core import labels
from phased.core.model import JobRef
from phased.core.quarantine import QuarantineNote, decode_quarantine, encode_quarantine
from phased.kube.nodes import NodeVerbs
from tests.kube.fake_cluster import FakeCluster

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")
MINE = "default"
NOTE = encode_quarantine(QuarantineNote(JOB.uid, "NodeNotReady", "node n Ready=False", NOW, NOW))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _held(cluster: FakeCluster, cordoned: bool) -> NodeVerbs:
    held = {
        labels.LABEL_JOB_UID: JOB.uid,
        labels.LABEL_JOB: JOB.name,
        labels.LABEL_JOB_NAMESPACE: JOB.namespace,
        labels.LABEL_ROLE: "active",
        labels.LABEL_INSTALLATION: MINE,
    }
    taints = [{"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"}]
    cluster.add_node("n", held, spec={"unschedulable": cordoned, "taints": taints})
    return NodeVerbs(cluster, MINE)  # type: ignore[arg-type]


def _note(cluster: FakeCluster) -> QuarantineNote | None:
    return decode_quarantine(
        cluster.nodes["n"]["metadata"]["annotations"].get(labels.ANNOTATION_QUARANTINE)
    )


def test_a_node_cordoned_before_its_quarantine_stays_cordoned_when_it_returns():
    cluster = FakeCluster()
    verbs = _held(cluster, cordoned=True)
    assert run(verbs.quarantine("n", JOB, NOTE))
    note = _note(cluster)
    assert note is not None and note.cordoned_before
    assert run(verbs.unquarantine("n", JOB))
    assert cluster.nodes["n"]["spec"].get("unschedulable") is True
    taints = {t["key"] for t in cluster.nodes["n"]["spec"]["taints"]}
    assert labels.TAINT_QUARANTINE not in taints


def test_a_node_phased_cordoned_is_uncordoned_when_it_returns():
    cluster = FakeCluster()
    verbs = _held(cluster, cordoned=False)
    assert run(verbs.quarantine("n", JOB, NOTE))
    note = _note(cluster)
    assert note is not None and not note.cordoned_before
    assert cluster.nodes["n"]["spec"]["unschedulable"] is True
    assert run(verbs.unquarantine("n", JOB))
    assert not cluster.nodes["n"]["spec"].get("unschedulable")
