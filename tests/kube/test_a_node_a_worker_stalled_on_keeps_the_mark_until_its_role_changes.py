"""An active node a worker never started on, swapped out for it, carries the ``stalled``
mark as a spare (``SetNodeRole.stalled``): the role written again keeps it, the next role
change (a promotion, the last resort) takes it off, and so does a release, as every mark
of ownership. A restarted operator reads it from the node: the pod that said what the node
did was deleted by the retry."""

from __future__ import annotations

import asyncio
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from tests.kube.fake_cluster import FakeCluster
from tests.kube.test_held_nodes_are_kept_from_the_autoscalers_and_given_back_as_found import (
    JOB,
    NOW,
    _claimed,
)

MARK = "2026-03-01T12:00:00Z did not start worker llm-train-g0-1 within pendingGrace"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _notes(cluster: FakeCluster) -> dict[str, str]:
    return dict(cluster.nodes["n"]["metadata"].get("annotations") or {})


def test_the_mark_is_written_kept_while_the_role_stays_and_gone_with_a_promotion() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    verbs = _claimed(cluster, "n", NodeRole.ACTIVE)
    assert run(verbs.set_role("n", JOB, NodeRole.SPARE, now=NOW, stalled=MARK))
    assert _notes(cluster)[labels.ANNOTATION_STALLED] == MARK
    assert not run(verbs.set_role("n", JOB, NodeRole.SPARE, now=NOW))  # nothing to do
    assert run(verbs.set_role("n", JOB, NodeRole.SPARE, spare_taint=True, now=NOW))
    assert _notes(cluster)[labels.ANNOTATION_STALLED] == MARK  # the role stayed
    assert run(verbs.set_role("n", JOB, NodeRole.ACTIVE, now=NOW))
    assert labels.ANNOTATION_STALLED not in _notes(cluster)


def test_a_release_takes_the_mark_off() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    verbs = _claimed(cluster, "n", NodeRole.ACTIVE)
    run(verbs.set_role("n", JOB, NodeRole.SPARE, now=NOW, stalled=MARK))
    assert run(verbs.release("n", JOB))
    assert not any(k.startswith("phased.dev/") for k in _notes(cluster))
