"""The free nodes nearest a pool are found from the node set's topology index, a rack, a
block, a zone at a time, in the claim order a sort of every candidate gives (nearest the
anchors first, ties by name), whatever the labels (some missing, racks and blocks named
alike in other zones); and a few near the pool are found without looking at the rest of
the cluster."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from phased.core.model import NodeInfo, NodeSet
from phased.core.pools import nearest_first, nearest_fitting

ZONE, BLOCK, RACK = (
    "topology.kubernetes.io/zone",
    "topology.phased.dev/block",
    "topology.phased.dev/rack",
)


def node(name: str, zone: str = "", block: str = "", rack: str = "") -> NodeInfo:
    found = {k: v for k, v in ((ZONE, zone), (BLOCK, block), (RACK, rack)) if v}
    return NodeInfo(name, labels=found)


nodes_drawn = st.lists(
    st.tuples(
        st.sampled_from(["", "z1", "z2"]),
        st.sampled_from(["", "b1", "b2", "b3"]),
        st.sampled_from(["", "r1", "r2"]),
        st.booleans(),  # a candidate
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(nodes_drawn, st.data())
def test_the_order_found_from_the_index_is_the_order_of_every_candidate_sorted(
    drawn: list[tuple[str, str, str, bool]], data: st.DataObject
) -> None:
    nodes = [node(f"n{i:02d}", z, b, r) for i, (z, b, r, _) in enumerate(drawn)]
    wanted = {n.name for n, (*_, ok) in zip(nodes, drawn, strict=True) if ok}
    anchors = data.draw(st.lists(st.sampled_from(nodes), max_size=4)) if nodes else []
    seen = NodeSet.of(nodes)
    found = list(nearest_fitting(seen, anchors, lambda n: n.name in wanted))
    every = sorted((n for n in nodes if n.name in wanted), key=lambda n: n.name)
    assert found == nearest_first(every, anchors)


@settings(max_examples=100, deadline=None)
@given(nodes_drawn, nodes_drawn)
def test_nodes_put_in_or_changed_later_are_found_where_they_are_now(
    first: list[tuple[str, str, str, bool]], then: list[tuple[str, str, str, bool]]
) -> None:
    """The index follows the nodes: a set with nodes replaced (new topology, or moved out of
    every zone) orders them as a set made afresh from the same nodes."""
    before = [node(f"n{i:02d}", z, b, r) for i, (z, b, r, _) in enumerate(first)]
    after = [node(f"n{i:02d}", z, b, r) for i, (z, b, r, _) in enumerate(then)]
    moved = NodeSet.of(before).with_nodes(after)
    afresh = NodeSet.of([*before[len(after) :], *after])
    anchors = after[:2] or before[:2]
    assert list(nearest_fitting(moved, anchors, lambda n: True)) == list(
        nearest_fitting(afresh, anchors, lambda n: True)
    )


def test_a_spare_near_the_pool_is_found_without_looking_at_the_rest_of_the_cluster() -> None:
    """5,000 nodes in racks of 4, blocks of 32, two zones; the pool holds a rack and a half,
    and its block has free nodes: the first free node is found among the block's."""
    nodes = [node(f"n{i:05d}", f"z{i // 2500}", f"b{i // 32}", f"r{i // 4}") for i in range(5000)]
    pool = nodes[64:70]
    asked: list[str] = []

    def free(n: NodeInfo) -> bool:
        asked.append(n.name)
        return n not in pool

    first = list(itertools.islice(nearest_fitting(NodeSet.of(nodes), pool, free), 1))
    assert [n.name for n in first] == ["n00070"]  # the rest of the pool's second rack
    assert len(asked) <= 32
