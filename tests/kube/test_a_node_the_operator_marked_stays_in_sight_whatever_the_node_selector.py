"""With a ``nodeSelector``, the operator lists and watches the nodes carrying its installation
label too, whatever the selector: a node it marked never leaves its sight. A held node a
person relabels out of the selector leaves the selector's watch but stays seen (and is given
back by decide, never taken for a deleted node); a deleted node goes once every watch that
held it says so; orphan release reaches a node of a gone job out of the selector; and a pool
node that did leave every view (released out of the selector while the status write that
dropped it was lost) is read from the API before it is called deleted."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from phased.api.v1alpha1 import Accounting, Pool, TrainingJobStatus
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import JobRef
from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.kube.nodeview import NodeViews
from phased.kube.nodewatch import watched_selectors
from phased.reconcile import JobEntry, Reconciler
from tests.core.builders import phase, spec
from tests.kube.fake_cluster import FakeCluster
from tests.kube.test_the_node_watch_lists_then_watches_and_drops_heartbeats import (
    HANG,
    FakeApi,
    event,
    node_list,
    until,
)

SELECTOR = "pool=gpu"
MARKED = f"{labels.LABEL_INSTALLATION}=default"
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm", created=datetime(2026, 1, 1, tzinfo=UTC))
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def held(uid: str = JOB.uid, role: str = "active") -> dict[str, str]:
    return {
        labels.LABEL_JOB_UID: uid,
        labels.LABEL_JOB: JOB.name,
        labels.LABEL_JOB_NAMESPACE: JOB.namespace,
        labels.LABEL_ROLE: role,
        labels.LABEL_INSTALLATION: "default",
    }


def raw(name: str, rv: int, pool: str = "gpu", **extra: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": str(rv),
            "labels": {"pool": pool, **extra},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "capacity": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_the_operator_watches_its_marked_nodes_only_when_a_selector_limits_the_rest() -> None:
    assert watched_selectors("", "default") == ("",)
    assert watched_selectors(SELECTOR, "default") == (SELECTOR, MARKED)


# --- the views, read as one -------------------------------------------------------------------


def _views(*nodes: dict[str, Any]) -> NodeViews:
    views = NodeViews((SELECTOR, MARKED))
    views.replace_all([n for n in nodes if n["metadata"]["labels"].get("pool") == "gpu"], "10")
    views.replace_all(
        [n for n in nodes if labels.LABEL_INSTALLATION in n["metadata"]["labels"]], "10", source=1
    )
    return views


@pytest.mark.parametrize("first", ["the selector's watch", "the marked nodes' watch"])
def test_a_held_node_relabelled_out_of_the_selector_stays_seen(first: str) -> None:
    views = _views(raw("a", 5, **held()), raw("b", 6))
    relabelled = raw("a", 20, pool="cpu", **held())
    # The selector's watch says DELETED (with the object as it was); the other, MODIFIED.
    steps = [("DELETED", raw("a", 20, **held()), 0), ("MODIFIED", relabelled, 1)]
    if first != "the selector's watch":
        steps.reverse()
    for kind, obj, source in steps:
        before, after = views.apply_event(kind, obj, source)
        assert before is not None and after is not None
    seen = views.get("a")
    assert seen is not None and seen.labels["pool"] == "cpu" and seen.resource_version == "20"
    assert views.names() == {"a", "b"} and len(views.all()) == 2
    # A relist of the selector, which no longer lists it, does not drop it either.
    views.replace_all([raw("b", 6)], "30")
    assert "a" in views.names()


def test_a_deleted_node_goes_once_every_watch_that_held_it_says_so() -> None:
    views = _views(raw("a", 5, **held()))
    before, after = views.apply_event("DELETED", raw("a", 9, **held()), 0)
    assert after is not None  # the other watch has not said it yet
    before, after = views.apply_event("DELETED", raw("a", 9, **held()), 1)
    assert before is not None and after is None
    assert views.get("a") is None and "a" not in views.names()


def test_a_node_read_from_the_api_goes_into_the_views_that_select_it() -> None:
    views = _views(raw("a", 5))
    views.refresh("a", raw("a", 7, **held()))  # claimed: now in the marked selection too
    assert all(v.get("a") is not None for v in views.views)
    views.refresh("a", raw("a", 9, pool="cpu"))  # released out of the selector: in neither
    assert views.get("a") is None
    views.refresh("b", raw("b", 3))
    views.refresh("b", None)
    assert views.get("b") is None


# --- the reconciler ---------------------------------------------------------------------------


def test_the_reconciler_lists_and_watches_both_and_keeps_a_relabelled_node_in_sight() -> None:
    mine = raw("a", 5, **held())
    api = FakeApi(
        lists=[node_list(10, mine, raw("b", 6))],
        watches=[[event("DELETED", raw("a", 12, **held())), HANG]],
        marked=(
            [node_list(10, mine)],
            [[event("MODIFIED", raw("a", 12, pool="cpu", **held())), HANG]],
        ),
    )
    reconciler = Reconciler(KubeClient(api, retries=0), Settings(node_selector=SELECTOR))  # type: ignore[arg-type]

    async def scenario() -> None:
        await reconciler.node_watch.start()
        assert reconciler.nodes.synced
        await until(lambda: reconciler.node_watch.events == 2, "both events")
        await reconciler.drain()

    asyncio.run(scenario())
    selectors = {q.get("labelSelector") for kind, q in api.requests if kind == "list"}
    assert selectors == {SELECTOR, MARKED}
    watched = {q.get("labelSelector") for kind, q in api.requests if kind == "watch"}
    assert watched == {SELECTOR, MARKED}
    seen = reconciler.nodes.get("a")
    assert seen is not None and seen.owner_uid == JOB.uid and seen.labels["pool"] == "cpu"


def _reconciler(cluster: FakeCluster) -> Reconciler:
    return Reconciler(cluster, Settings(node_selector=SELECTOR))  # type: ignore[arg-type]


def test_orphan_release_reaches_a_node_of_a_gone_job_out_of_the_selector() -> None:
    cluster = FakeCluster()
    cluster.add_node("a", {"pool": "cpu", **held(uid="uid-gone", role="spare")})
    cluster.add_node("b", {"pool": "gpu"})
    reconciler = _reconciler(cluster)
    reconciler.jobs_synced = True  # and the cache knows no job at all

    async def scenario() -> int:
        await reconciler.relist_nodes()
        return await reconciler.release_orphans()

    assert asyncio.run(scenario()) == 1
    left = cluster.nodes["a"]["metadata"]["labels"]
    assert not any(k.startswith(labels.PREFIX) for k in left)


def test_a_pool_node_gone_from_every_view_is_read_before_it_is_called_deleted() -> None:
    cluster = FakeCluster()
    cluster.add_node("h0", {"pool": "gpu", **held()})
    cluster.add_node("h1", {"pool": "cpu"})  # released out of the selector; its write lost
    status = TrainingJobStatus(
        pool=Pool(active=["h0", "h1", "h2"]),  # h2 was deleted
        accounting=Accounting(accounted_at="2026-03-01T11:59:30Z"),
    )
    reconciler = _reconciler(cluster)
    entry = JobEntry(ref=JOB, raw={"status": status.to_k8s()})
    entry.spec = spec(phase("train", 1, 3))

    async def scenario() -> Any:
        await reconciler.relist_nodes()
        nodes = reconciler.nodes.snapshot()
        return await reconciler._observe(entry, [], nodes, await reconciler._node_pods(JOB, nodes))

    snapshot = asyncio.run(scenario())
    assert {n.name for n in snapshot.nodes.values()} == {"h0", "h1"}
    assert ("GET", "/api/v1/nodes/h2") in cluster.calls
    plan = decide(snapshot, reconciler.settings, NOW)
    assert [f.node for f in plan.status.failures] == ["h2"]
    assert "h1" not in plan.status.pool.active + plan.status.pool.spares
