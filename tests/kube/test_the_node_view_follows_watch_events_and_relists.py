"""The in-memory node view: events update it, a stale event after a relist does not roll it
back, nor does a relist taken before what the watch delivered since, a relist reports what
the watch missed, and nothing counts as vanished before the first full list."""

from __future__ import annotations

from typing import Any

from phased.kube.nodeview import NodeView


def node(name: str, rv: int, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": str(rv), "labels": labels},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8", "cpu": "96"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_the_view_is_not_synced_until_a_full_list() -> None:
    view = NodeView()
    view.apply_event("ADDED", node("a", 1))
    assert not view.synced
    view.replace_all([node("a", 1)])
    assert view.synced


def test_events_add_change_and_remove_nodes() -> None:
    view = NodeView()
    view.apply_event("ADDED", node("a", 1))
    before, after = view.apply_event("MODIFIED", node("a", 2, role="x"))
    assert before is not None and after is not None
    assert after.labels == {"role": "x"}
    assert after.allocatable == {"nvidia.com/gpu": 8}  # only extended resources are kept
    view.apply_event("DELETED", node("a", 3))
    assert view.get("a") is None and len(view) == 0


def test_an_event_older_than_what_a_relist_brought_is_ignored() -> None:
    view = NodeView()
    view.replace_all([node("a", 10, role="new")])
    before, after = view.apply_event("MODIFIED", node("a", 9, role="old"))
    assert after is before
    assert view.get("a") is not None and view.get("a").labels == {"role": "new"}  # type: ignore[union-attr]


def test_a_relist_reports_what_the_watch_missed() -> None:
    view = NodeView()
    view.replace_all([node("a", 1), node("b", 1)])
    changed = view.replace_all([node("a", 1), node("c", 4)])  # b deleted, c added unseen
    assert changed == {"b", "c"}
    assert view.relist_corrections == 2
    assert view.names() == frozenset({"a", "c"})


def _ready(name: str, rv: int, status: str) -> dict[str, Any]:
    raw = node(name, rv)
    raw["status"]["conditions"] = [{"type": "Ready", "status": status}]
    return raw


def test_a_list_taken_before_a_watch_event_does_not_roll_the_node_back() -> None:
    # The periodic relist is in flight when the watch delivers the node going NotReady.
    view = NodeView()
    view.replace_all([_ready("a", 5, "True")], "5")
    view.apply_event("MODIFIED", _ready("a", 12, "False"))
    changed = view.replace_all([_ready("a", 5, "True")], "10")
    a = view.get("a")
    assert a is not None and not a.ready and a.resource_version == "12"
    assert changed == set() and view.relist_corrections == 0


def test_a_node_the_watch_added_after_the_list_stays() -> None:
    view = NodeView()
    view.replace_all([node("a", 5)], "5")
    view.apply_event("ADDED", node("b", 12))
    assert view.replace_all([node("a", 5)], "10") == set()
    assert view.names() == frozenset({"a", "b"})


def test_a_node_the_watch_deleted_after_the_list_does_not_come_back() -> None:
    view = NodeView()
    view.replace_all([node("a", 5), node("b", 5)], "5")
    view.apply_event("DELETED", node("b", 12))
    assert view.replace_all([node("a", 5), node("b", 5)], "10") == set()
    assert view.names() == frozenset({"a"})
    # The next list, taken after the deletion, no longer needs the reminder; a node of the
    # same name created later is a new node.
    view.replace_all([node("a", 5)], "13")
    assert view.replace_all([node("a", 5), node("b", 20)], "20") == {"b"}


def test_a_list_newer_than_the_view_still_corrects_it() -> None:
    view = NodeView()
    view.replace_all([_ready("a", 5, "True"), node("b", 5)], "5")
    changed = view.replace_all([_ready("a", 9, "False")], "10")  # b deleted, a changed
    assert changed == {"a", "b"} and view.names() == frozenset({"a"})
    assert view.get("a") is not None and not view.get("a").ready  # type: ignore[union-attr]
