"""The node view keeps each Node's ``metadata.uid`` (which object the name stands for: the
job's status remembers it to tell a node recreated under its name), and a recreated node
whose every other field equals the old one's is never taken for the old one's heartbeat."""

from __future__ import annotations

from typing import Any

from phased.kube.nodeview import NodeView


def _raw(uid: str, rv: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "a",
            "uid": uid,
            "resourceVersion": rv,
            "creationTimestamp": "2026-03-01T12:00:00Z",
            "labels": {"kubernetes.io/hostname": "a"},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_the_view_reads_each_nodes_uid() -> None:
    view = NodeView()
    view.apply_event("ADDED", _raw("u1", "1"))
    held = view.get("a")
    assert held is not None and held.uid == "u1"


def test_a_recreated_node_with_the_same_fields_is_no_heartbeat_of_the_old_one() -> None:
    view = NodeView()
    view.apply_event("ADDED", _raw("u1", "1"))
    assert view.heartbeat(_raw("u1", "2"))  # the same object: a heartbeat
    assert not view.heartbeat(_raw("u2", "3"))  # another object under the name
    view.apply_event("ADDED", _raw("u2", "3"))
    held = view.get("a")
    assert held is not None and held.uid == "u2"
