"""The node view keeps the names of the nodes by their ``job-uid`` label, by their place
(rack, block, zone) and whether they are Ready as the nodes change (watch events,
heartbeats, a node read afresh, relists, two views together), so that a pass finds its
job's nodes, the free nodes near its pool and the nodes down without asking every node of
the cluster: whatever happened, what it keeps is what a look at every node would find, and
a copy a pass took keeps what it held."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from phased.core import labels
from phased.core.model import NodeInfo, NodeSet
from phased.core.pools import nearest_fitting
from phased.kube import nodeview
from phased.kube.nodeview import NodeView, NodeViews

NAMES = ("a", "b", "c", "d")
OWNERS = (None, "u1", "u2")
ZONE, BLOCK, RACK = (
    "topology.kubernetes.io/zone",
    "topology.phased.dev/block",
    "topology.phased.dev/rack",
)
PLACES = (
    {},
    {ZONE: "z1"},
    {ZONE: "z1", BLOCK: "b1", RACK: "r1"},
    {ZONE: "z1", BLOCK: "b1", RACK: "r2"},
    {ZONE: "z2", BLOCK: "b1", RACK: "r1"},
    {ZONE: "z1", BLOCK: "b1"},  # a block with no rack label
    {ZONE: "z2", RACK: "r1"},  # a rack label with no block
)


def raw(
    name: str,
    rv: int,
    owner: str | None,
    installed: bool = False,
    where: int = 0,
    ready: str = "True",
) -> dict[str, Any]:
    """A Node; ``where`` picks its topology labels (0: none)."""
    marks: dict[str, str] = dict(PLACES[where])
    if owner is not None:
        marks[labels.LABEL_JOB_UID] = owner
    if installed:
        marks[labels.LABEL_INSTALLATION] = "default"
    return {
        "metadata": {"name": name, "resourceVersion": str(rv), "labels": marks},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def by_walking(nodes: NodeSet | list[NodeInfo]) -> dict[str, frozenset[str]]:
    """The names by label as a look at every node finds them."""
    found: dict[str, set[str]] = {}
    for node in nodes.values() if isinstance(nodes, NodeSet) else nodes:
        if node.owner_uid is not None:
            found.setdefault(node.owner_uid, set()).add(node.name)
    return {uid: frozenset(names) for uid, names in found.items()}


def labelled(nodes: NodeSet) -> dict[str, frozenset[str]]:
    return {uid: nodes.labelled(uid) for uid in OWNERS if uid and nodes.labelled(uid)}


step = st.tuples(
    st.sampled_from(
        ["ADDED", "MODIFIED", "DELETED", "refresh", "gone", "relist", "relist-held", "heartbeat"]
    ),
    st.sampled_from(NAMES),
    st.sampled_from(OWNERS),
    st.integers(0, len(PLACES) - 1),
    st.sampled_from(["True", "False", "Unknown"]),
)


def same_order(seen: NodeSet, nodes: list[NodeInfo]) -> bool:
    """The set finds nodes near each of them in the order a set made afresh does."""
    afresh = NodeSet.of(nodes)
    return all(
        list(nearest_fitting(seen, [n], bool)) == list(nearest_fitting(afresh, [n], bool))
        for n in nodes
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(step, max_size=40),
    st.lists(st.sampled_from(NAMES), unique=True),
    st.sampled_from([0, 4, 10**6]),
)
def test_what_the_view_keeps_by_label_and_place_is_what_a_look_at_every_node_finds(
    steps: list[tuple[str, str, str | None, int, str]], listed: list[str], rebuilt_beyond: int
) -> None:
    # A relist puts its new objects into the index one by one, or builds it afresh when
    # they are many: each way, always one (0) or the other (10**6), or as the view chooses.
    with patch.object(nodeview, "_REBUILT_BEYOND", rebuilt_beyond):
        _follow(steps, listed)


def _follow(steps: list[tuple[str, str, str | None, int, str]], listed: list[str]) -> None:
    view = NodeView()
    for rv, (kind, name, owner, where, ready) in enumerate(steps, start=1):
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            view.apply_event(kind, raw(name, rv, owner, where=where, ready=ready))
        elif kind == "refresh":
            view.refresh(name, raw(name, rv, owner, where=where, ready=ready))
        elif kind == "gone":
            view.refresh(name, None)
        elif kind == "heartbeat":
            held = view.get(name)
            if held is not None:
                place, state = PLACES.index(held_place(held)), "True" if held.ready else ready
                view.heartbeat(raw(name, rv, held.owner_uid, where=place, ready=state))
        elif kind == "relist":
            view.replace_all([raw(n, rv, owner, where=where, ready=ready) for n in listed], str(rv))
        else:  # a relist that finds the nodes the view holds as it holds them, the rest new
            raws = [
                as_held(view.get(n)) or raw(n, rv, owner, where=where, ready=ready) for n in listed
            ]
            view.replace_converted((view.listed(r) for r in raws), str(rv))
        seen = view.snapshot()
        assert labelled(seen) == by_walking(list(view.all()))
        assert dict(seen.items()) == {n.name: n for n in view.all()}
        assert same_order(seen, list(view.all()))
        assert seen.not_ready() == {n.name for n in view.all() if not n.ready}
        zones = [n.topology[0] for n in view.all()]
        assert all(seen.in_zone(z) == zones.count(z) for z in ("z1", "z2"))


def held_place(node: NodeInfo) -> dict[str, str]:
    return {k: v for k, v in node.labels.items() if k in (ZONE, BLOCK, RACK)}


def as_held(node: NodeInfo | None) -> dict[str, Any] | None:
    """The Node as the view holds it, at the version it holds (a relist finding it as is)."""
    if node is None:
        return None
    place = PLACES.index(held_place(node))
    ready = "True" if node.ready else "False"
    return raw(node.name, int(node.resource_version), node.owner_uid, where=place, ready=ready)


def test_a_copy_a_pass_took_keeps_what_it_held_as_the_view_moves_on() -> None:
    view = NodeView()
    view.replace_all([raw("a", 1, "u1"), raw("b", 1, None)], "1")
    taken = view.snapshot()
    view.apply_event("MODIFIED", raw("b", 2, "u1"))
    view.apply_event("DELETED", raw("a", 3, "u1"))
    assert taken.labelled("u1") == {"a"} and set(taken) == {"a", "b"}
    assert view.snapshot().labelled("u1") == {"b"}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(OWNERS), st.integers(1, 9))),
    st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(OWNERS), st.integers(1, 9))),
)
def test_two_views_read_as_one_keep_the_later_copy_of_a_node_by_its_label(
    first: list[tuple[str, str | None, int]], second: list[tuple[str, str | None, int]]
) -> None:
    views = NodeViews(("", f"{labels.LABEL_INSTALLATION}=default"))
    views.replace_all([raw(n, rv, owner) for n, owner, rv in dict_last(first)], "0", source=0)
    views.replace_all(
        [raw(n, rv, owner, True) for n, owner, rv in dict_last(second)], "0", source=1
    )
    seen = views.snapshot()
    assert dict(seen.items()) == {n.name: n for n in views.all()}
    assert labelled(seen) == by_walking(seen)
    assert same_order(seen, list(views.all()))


def dict_last(entries: list[tuple[str, str | None, int]]) -> list[tuple[str, str | None, int]]:
    """One entry per name, the last (a list holds a node once)."""
    return list({name: (name, owner, rv) for name, owner, rv in entries}.values())


def test_nodes_put_in_replace_those_of_their_name_and_their_label() -> None:
    base = NodeSet.of([NodeInfo("a", labels={labels.LABEL_JOB_UID: "u1"}), NodeInfo("b")])
    more = base.with_nodes([NodeInfo("a"), NodeInfo("c", labels={labels.LABEL_JOB_UID: "u1"})])
    assert more.labelled("u1") == {"c"} and set(more) == {"a", "b", "c"}
    assert base.labelled("u1") == {"a"}  # the set put into is left as it was
    assert base.with_nodes([]) is base
