"""`kubectl phased nodes`: the nodes Phased holds, by job and role, and why any is quarantined,
read from the labels and annotations on the Nodes themselves."""

from __future__ import annotations

from phased.cli import views
from tests.kubectl_plugin.jobs import node

NOTE = {
    "job": "u-1",
    "reason": "NodeNotReady",
    "message": "node h100-003 NotReady (KubeletNotReady) for 30s",
    "detected": "2026-03-01T01:10:00Z",
    "cordoned": "2026-03-01T01:10:00.250000Z",
}
NODES = [
    node("h100-001", "active"),
    node("h100-011", "spare"),
    node("h100-003", "quarantined", ready="False", note=NOTE),
]


def test_each_node_with_its_job_role_health_and_note() -> None:
    rows = {r["name"]: r for r in views.nodes_view(NODES)}
    assert rows["h100-001"]["job"] == {"namespace": "ml", "name": "llm", "uid": "u-1"}
    assert rows["h100-001"]["role"] == "active" and rows["h100-001"]["ready"] == "True"
    assert rows["h100-001"]["accelerators"] == {"nvidia.com/gpu": "8"}
    assert rows["h100-001"]["quarantine"] is None
    q = rows["h100-003"]
    assert q["cordoned"] is True and q["ready"] == "False"
    assert q["quarantine"] == {
        "reason": "NodeNotReady",
        "message": NOTE["message"],
        "detected": "2026-03-01T01:10:00Z",
        "cordoned": "2026-03-01T01:10:00.250000Z",
    }


def test_the_text_sums_up_then_lists_then_explains_quarantine() -> None:
    text = views.render_nodes(views.nodes_view(NODES))
    lines = text.splitlines()
    assert lines[0] == "3 node(s): 1 active, 1 spare, 1 quarantined; held for 1 job(s)"
    assert lines[2].split() == [
        "NODE", "JOB", "ROLE", "READY", "CORDONED", "ACCELERATORS", "CLAIMED", "(UTC)",
    ]  # fmt: skip
    assert lines[3].split()[:5] == ["h100-001", "ml/llm", "active", "True", "no"]
    assert "  h100-003 (ml/llm): NodeNotReady, detected 2026-03-01 01:10:00, cordoned " in text
    assert "      node h100-003 NotReady (KubeletNotReady) for 30s" in text
    assert "phased release-node h100-003" in text


def test_a_quarantined_node_without_a_readable_note_says_so() -> None:
    broken = node("h100-005", "quarantined")
    broken["metadata"]["annotations"]["phased.dev/quarantine"] = "{not json"
    text = views.render_nodes(views.nodes_view([broken]))
    assert "h100-005 (ml/llm): no quarantine note on the node" in text


def test_no_node_at_all() -> None:
    assert views.nodes_view([]) == []
    assert views.render_nodes([]) == "No node is held or quarantined by Phased.\n"


def test_the_release_hint_names_the_installation_that_marked_the_nodes() -> None:
    """``phased release-node`` leaves another installation's nodes alone (its
    ``--installation`` defaults to ``$PHASED_INSTALLATION`` or ``default``): the hint names
    the installation each quarantined node carries, so that copying it releases the node."""
    nodes = [node(f"q{i}", "quarantined", note=NOTE) for i in range(3)]
    nodes[0]["metadata"]["labels"]["phased.dev/installation"] = "team-b"
    nodes[1]["metadata"]["labels"]["phased.dev/installation"] = "default"
    text = views.render_nodes(views.nodes_view(nodes))
    hints = [line.strip() for line in text.splitlines() if "release when repaired" in line]
    assert hints == [
        "release when repaired: phased release-node q2",  # marked before installations
        "release when repaired: phased release-node --installation default q1",
        "release when repaired: phased release-node --installation team-b q0",
    ]


def test_a_spare_a_worker_stalled_on_is_listed_as_promoted_last() -> None:
    spare = node("h100-012", "spare")
    mark = "2026-03-01T02:00:00Z did not start worker llm-train-g1-3 within pendingGrace"
    spare["metadata"]["annotations"]["phased.dev/stalled"] = mark
    rows = views.nodes_view([*NODES, spare])
    assert [r["stalled"] for r in rows if r["stalled"]] == [mark]
    text = views.render_nodes(rows)
    assert "PROMOTED LAST (a worker never started there while its peers did)" in text
    assert f"  h100-012 (ml/llm): {mark}" in text
    assert "PROMOTED LAST" not in views.render_nodes(views.nodes_view(NODES))
