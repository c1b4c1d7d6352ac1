"""A claim decided on a stale node view is not retried blindly: the node as the API holds it
goes into the view (so the next decision sees it taken), and the job is decided again after
a delay that grows while claims keep losing."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import ClaimNode, JobRef
from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def raw_node(rv: int, owner: str | None = None) -> dict[str, Any]:
    node_labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    if owner:
        node_labels.update(
            {
                labels.LABEL_JOB_UID: owner,
                labels.LABEL_ROLE: "active",
                labels.LABEL_INSTALLATION: Settings().installation,
            }
        )
    return {
        "metadata": {"name": "h1", "resourceVersion": str(rv), "labels": node_labels},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _reconciler(script: list[Any]) -> tuple[Reconciler, JobEntry, FakeApi]:
    api = FakeApi(script)
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    rec = Reconciler(kube, Settings())
    rec.nodes.replace_all([raw_node(1)])
    entry = JobEntry(ref=JOB, raw={})
    rec.jobs[JOB.uid] = entry
    return rec, entry, api


def _looked_empty(rec: Reconciler) -> None:
    """The node's pods were just listed (none): the claim goes straight to the node."""
    rec._looked["h1"] = (time.monotonic(), ())


def test_a_lost_claim_puts_the_fresh_node_in_the_view_and_backs_off() -> None:
    taken = raw_node(7, owner="uid-other")

    async def scenario() -> list[float]:
        conflict = (409, {"reason": "Conflict"})
        # The view's copy says free: its patch is refused (the node moved on), the node read.
        rec, entry, api = _reconciler([conflict, (200, taken), (200, taken)])
        dues = []
        for _ in range(2):
            start = time.monotonic()
            _looked_empty(rec)
            await rec._perform(entry, ClaimNode("h1", "1", NodeRole.ACTIVE), NOW)
            dues.append(entry.timer_due - start)
            assert entry.timer is not None
            entry.timer.cancel()
            entry.timer = None
        view = rec.nodes.get("h1")
        assert view is not None and view.owner_uid == "uid-other"
        assert view.resource_version == "7"
        assert entry.lost_claims == 2
        # The only patch is the one made from the view, refused by its precondition; the
        # second claim reads the view's new copy (taken), has nothing to patch, and reads.
        assert [m for m, _ in api.calls] == ["PATCH", "GET", "GET"]
        return dues

    first, second = asyncio.run(scenario())
    assert 0.05 < first < second <= 5.0


def test_a_won_claim_resets_the_backoff_and_updates_the_view() -> None:
    mine = raw_node(3, owner=JOB.uid)

    async def scenario() -> None:
        # One patch made from the view, then the look at the node's pods.
        rec, entry, api = _reconciler([(200, mine), (200, {"items": []})])
        entry.lost_claims = 4
        _looked_empty(rec)
        await rec._perform(entry, ClaimNode("h1", "1", NodeRole.ACTIVE), NOW)
        assert entry.lost_claims == 0
        view = rec.nodes.get("h1")
        assert view is not None and view.owner_uid == JOB.uid
        assert [m for m, _ in api.calls] == ["PATCH", "GET"]

    asyncio.run(scenario())


def test_a_node_gone_from_the_api_leaves_the_view() -> None:
    async def scenario() -> None:
        rec, entry, _ = _reconciler([(404, {"reason": "NotFound"})])
        _looked_empty(rec)
        await rec._perform(entry, ClaimNode("h1", "1", NodeRole.ACTIVE), NOW)
        assert rec.nodes.get("h1") is None
        if entry.timer is not None:
            entry.timer.cancel()

    asyncio.run(scenario())
