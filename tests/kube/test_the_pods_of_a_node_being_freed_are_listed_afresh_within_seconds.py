"""The reconciler remembers the pods of a node found occupied, so a claim is not tried on it
at every pass: for a resync interval when a pod there stays, but only
``LOOK_AGAIN_SECONDS`` when every pod keeping it out was on its way out (being deleted). The
pass decide asks for then (``phased.core.sizing``) no longer sees them, so the node is a
candidate again and its pods are listed afresh before it is claimed."""

from __future__ import annotations

import asyncio
import time

from phased.core.model import JobRef, NodePod
from phased.core.occupancy import LOOK_AGAIN_SECONDS
from phased.core.settings import Settings
from phased.reconcile import Reconciler
from tests.kube.fake_cluster import FakeCluster

JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")


def _remembered(ago: float, *pods: NodePod) -> set[str]:
    reconciler = Reconciler(FakeCluster(), Settings(), operator_pod=("phased", "op-0"))  # type: ignore[arg-type]
    reconciler.occupied["n"] = (time.monotonic() - ago, pods)
    return set(asyncio.run(reconciler._node_pods(JOB, reconciler.nodes.snapshot())))


STOPPING = NodePod(namespace="ml", name="other-train-g0-0", node="n", deleting=True)
TENANT = NodePod(namespace="tenant", name="web", node="n")


def test_a_node_kept_out_only_by_pods_on_their_way_out_is_forgotten_within_seconds() -> None:
    assert _remembered(LOOK_AGAIN_SECONDS / 2, STOPPING) == {"n"}
    assert _remembered(LOOK_AGAIN_SECONDS + 1, STOPPING) == set()


def test_a_node_with_a_pod_that_stays_is_remembered_for_a_resync_interval() -> None:
    assert _remembered(LOOK_AGAIN_SECONDS + 1, TENANT) == {"n"}
    assert _remembered(LOOK_AGAIN_SECONDS + 1, STOPPING, TENANT) == {"n"}
    assert _remembered(31, TENANT) == set()  # the default resync interval is 30 s
