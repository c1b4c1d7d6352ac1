"""A node change is first made from the node as the operator's view holds it, as a
controller writes from its informer's cache: one PATCH with the view's resourceVersion as
its precondition, no read before it. The view keeps every field a change reads (labels, our
annotations and the autoscalers' guards, taints with their ``timeAdded``, the cordon), so
what is written is what a fresh read would have given. A view that is behind the API (the
patch answers 409) is looked at again: moved on meanwhile (the watch brought the write
that beat ours), the change is made from it again; else it is followed by the read and the
change made again from that, as is a view on which there is nothing to change."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import JobRef, NodeInfo
from phased.kube.convert import node_from_raw
from phased.kube.nodes import NodeVerbs
from phased.kube.nodeview import NodeView
from tests.kube.fake_cluster import FakeCluster, verbs_on_a_view

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")
MINE = "default"
UNREACHABLE = {
    "key": "node.kubernetes.io/unreachable",
    "effect": "NoExecute",
    "timeAdded": "2026-03-01T11:59:30Z",
}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _spare() -> dict[str, str]:
    return {
        labels.LABEL_JOB_UID: JOB.uid,
        labels.LABEL_JOB: "llm",
        labels.LABEL_JOB_NAMESPACE: "ml",
        labels.LABEL_ROLE: "spare",
        labels.LABEL_INSTALLATION: MINE,
    }


def _setup(**node: Any) -> tuple[FakeCluster, NodeView, NodeVerbs]:
    cluster = FakeCluster()
    cluster.add_node("n", _spare(), **node)
    view, verbs = verbs_on_a_view(cluster, MINE)
    return cluster, view, verbs


def test_a_promotion_from_a_current_view_is_one_patch_that_keeps_the_taints_time() -> None:
    spec = {
        "taints": [
            UNREACHABLE,
            {"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"},
        ]
    }
    guards = dict.fromkeys(labels.SCALE_DOWN_GUARDS, "true")
    guards[labels.ANNOTATION_GUARDS] = ",".join(labels.SCALE_DOWN_GUARDS)
    cluster, view, verbs = _setup(spec=spec, annotations=guards)
    assert run(verbs.set_role("n", JOB, NodeRole.ACTIVE, now=NOW))
    assert cluster.calls == [("PATCH", "/api/v1/nodes/n")]  # no read before it
    node = cluster.nodes["n"]
    assert node["metadata"]["labels"][labels.LABEL_ROLE] == "active"
    # Another's NoExecute taint is written back with the time it was added: the eviction
    # clock of the pods that tolerate it for a while does not start again.
    assert UNREACHABLE in node["spec"]["taints"]
    # The guards were read from the view: the node had them all, none is written again.
    assert node["metadata"]["annotations"] == {
        **guards,
        labels.ANNOTATION_CLEARING: "2026-03-01T12:00:00Z",
    }
    # The patch's answer is the view's node now.
    held = view.get("n")
    assert isinstance(held, NodeInfo) and held.role == NodeRole.ACTIVE
    assert held.resource_version == node["metadata"]["resourceVersion"]


def test_a_view_behind_the_api_is_followed_by_a_read_and_the_change_made_from_it() -> None:
    cluster, _, verbs = _setup()
    # Someone else adds a taint the view has not seen yet.
    raw = cluster.nodes["n"]
    raw["spec"]["taints"] = [UNREACHABLE]
    raw["metadata"]["resourceVersion"] = "999"
    assert run(verbs.quarantine("n", JOB, "{}"))
    assert cluster.calls == [
        ("PATCH", "/api/v1/nodes/n"),  # 409: the view's resourceVersion is gone
        ("GET", "/api/v1/nodes/n"),
        ("PATCH", "/api/v1/nodes/n"),
    ]
    node = cluster.nodes["n"]
    assert UNREACHABLE in node["spec"]["taints"]  # not lost to the view's older copy
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["labels"][labels.LABEL_ROLE] == "quarantined"


def test_a_view_the_watch_brought_on_during_a_409_is_written_from_without_a_read() -> None:
    cluster, view, verbs = _setup()
    raw = cluster.nodes["n"]
    raw["spec"]["taints"] = [UNREACHABLE]  # the node lifecycle controller's taint ...
    raw["metadata"]["resourceVersion"] = "999"

    def watched(name: str) -> None:  # ... which the watch brings as the 409 comes back
        view.refresh(name, copy.deepcopy(cluster.nodes[name]))

    cluster.on_conflict = watched
    # A merge patch writes the taint list whole (a quarantine appends its taint instead:
    # test_a_quarantine_is_one_patch_whatever_else_is_written_to_the_node_meanwhile.py).
    assert run(verbs.set_role("n", JOB, NodeRole.ACTIVE, now=NOW))
    assert cluster.calls == [("PATCH", "/api/v1/nodes/n"), ("PATCH", "/api/v1/nodes/n")]
    node = cluster.nodes["n"]
    assert UNREACHABLE in node["spec"]["taints"]
    assert node["metadata"]["labels"][labels.LABEL_ROLE] == "active"


def test_a_view_that_moves_on_and_is_still_behind_is_given_up_for_a_read_after_two_tries() -> None:
    cluster, view, verbs = _setup()

    def watched(name: str) -> None:
        view.refresh(name, copy.deepcopy(cluster.nodes[name]))

    cluster.on_conflict = watched
    cluster.busy["n"] = 2  # another writer beats the next two patches
    assert run(verbs.set_role("n", JOB, NodeRole.ACTIVE, now=NOW))
    assert cluster.calls == [
        ("PATCH", "/api/v1/nodes/n"),
        ("PATCH", "/api/v1/nodes/n"),
        ("GET", "/api/v1/nodes/n"),
        ("PATCH", "/api/v1/nodes/n"),
    ]
    assert cluster.nodes["n"]["metadata"]["labels"][labels.LABEL_ROLE] == "active"


def _whole() -> dict[str, Any]:
    """A spare with every mark a role write writes: its pool taint and the guards."""
    guards = dict.fromkeys(labels.SCALE_DOWN_GUARDS, "true")
    guards[labels.ANNOTATION_GUARDS] = ",".join(labels.SCALE_DOWN_GUARDS)
    pool = {"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"}
    return {"spec": {"taints": [pool]}, "annotations": guards}


def test_nothing_to_change_on_the_view_is_checked_on_a_fresh_read() -> None:
    cluster, _, verbs = _setup(**_whole())
    assert not run(verbs.set_role("n", JOB, NodeRole.SPARE))  # the view was right: no write
    assert cluster.calls == [("GET", "/api/v1/nodes/n")]
    cluster.calls.clear()
    # The API has the node active already (another replica's write the view lacks): the
    # view says spare, so writing spare looks like nothing to do — the read says otherwise.
    raw = cluster.nodes["n"]
    raw["metadata"]["labels"][labels.LABEL_ROLE] = "active"
    raw["metadata"]["resourceVersion"] = "999"
    assert run(verbs.set_role("n", JOB, NodeRole.SPARE))
    assert cluster.calls == [("GET", "/api/v1/nodes/n"), ("PATCH", "/api/v1/nodes/n")]
    assert cluster.nodes["n"]["metadata"]["labels"][labels.LABEL_ROLE] == "spare"


def test_a_claim_from_the_view_is_one_patch_and_a_node_gone_leaves_the_view() -> None:
    cluster = FakeCluster()
    raw = cluster.add_node("free")
    view, verbs = verbs_on_a_view(cluster, MINE)
    rv = raw["metadata"]["resourceVersion"]
    assert run(verbs.claim("free", rv, JOB, NodeRole.SPARE, NOW)).won
    assert cluster.calls == [("PATCH", "/api/v1/nodes/free")]
    assert node_from_raw(cluster.nodes["free"]).owner_uid == JOB.uid
    del cluster.nodes["free"]
    assert not run(verbs.release("free", JOB))
    assert view.get("free") is None


def test_a_taint_added_again_is_no_heartbeat_so_the_view_never_writes_its_old_time() -> None:
    cluster, view, _ = _setup(spec={"taints": [UNREACHABLE]})
    raw = cluster.nodes["n"]
    again = {**UNREACHABLE, "timeAdded": "2026-03-01T12:05:00Z"}  # gone and back meanwhile
    raw["spec"]["taints"] = [again]
    raw["metadata"]["resourceVersion"] = "999"
    assert not view.heartbeat(raw)  # taken as a change: the view holds the new time
    view.apply_event("MODIFIED", raw)
    held = view.get("n")
    assert held is not None and held.taints[0].time_added == "2026-03-01T12:05:00Z"
