"""``start_clearing`` (workers about to be placed on an active node the job holds) writes
``clearing-since`` only on the fresh object of a node this installation holds as active for
the job, and never moves a mark already there (its eviction deadline)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from phased.core import labels
from phased.core.model import JobRef
from phased.kube.nodes import NodeVerbs
from tests.kube.fake_cluster import FakeCluster

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")
MINE = "default"
EARLIER = "2026-03-01T11:59:00Z"


def _held(role: str = "active", installation: str = MINE) -> dict[str, str]:
    return {
        labels.LABEL_JOB_UID: JOB.uid,
        labels.LABEL_JOB: "llm",
        labels.LABEL_JOB_NAMESPACE: "ml",
        labels.LABEL_ROLE: role,
        labels.LABEL_INSTALLATION: installation,
    }


def test_an_active_node_the_job_holds_is_marked_now() -> None:
    cluster = FakeCluster()
    cluster.add_node("n", _held())
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    assert asyncio.run(verbs.start_clearing("n", JOB, NOW))
    notes = cluster.nodes["n"]["metadata"]["annotations"]
    assert notes[labels.ANNOTATION_CLEARING] == "2026-03-01T12:00:00Z"


def test_a_mark_already_there_keeps_its_time() -> None:
    cluster = FakeCluster()
    cluster.add_node("n", _held(), annotations={labels.ANNOTATION_CLEARING: EARLIER})
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    assert not asyncio.run(verbs.start_clearing("n", JOB, NOW))
    assert cluster.patches() == []


def test_a_spare_or_another_installations_node_is_not_touched() -> None:
    cluster = FakeCluster()
    cluster.add_node("s", _held(role="spare"))
    cluster.add_node("o", _held(installation="team-b"))
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    assert not asyncio.run(verbs.start_clearing("s", JOB, NOW))
    assert not asyncio.run(verbs.start_clearing("o", JOB, NOW))
    assert cluster.patches() == []
