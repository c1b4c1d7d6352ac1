"""The pool-distance lookup gives the same answer as measuring against every member, and
candidates ordered nearest first come by that distance, then by name, in whatever order
they are given."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from phased.core.model import NodeInfo
from phased.core.pools import _Anchors, distance, distance_to, nearest_first

labels = st.sampled_from(["", "a", "b"])


@st.composite
def nodes(draw: st.DrawFn) -> NodeInfo:
    return NodeInfo(
        name=draw(st.text("xyz", min_size=1, max_size=3)),
        labels={
            "topology.kubernetes.io/zone": draw(labels),
            "topology.phased.dev/block": draw(labels),
            "topology.phased.dev/rack": draw(labels),
        },
    )


@settings(max_examples=300, deadline=None)
@given(node=nodes(), pool=st.lists(nodes(), max_size=6))
def test_the_lookup_equals_the_minimum_over_the_pool(node: NodeInfo, pool: list[NodeInfo]) -> None:
    expected = min((distance(node, member) for member in pool), default=3)
    assert _Anchors(pool).distance(node) == expected


@settings(max_examples=300, deadline=None)
@given(
    candidates=st.lists(nodes(), max_size=12, unique_by=lambda n: n.name),
    pool=st.lists(nodes(), max_size=4),
)
def test_nearest_first_orders_by_distance_then_name(
    candidates: list[NodeInfo], pool: list[NodeInfo]
) -> None:
    expected = sorted(candidates, key=lambda n: (distance_to(n, pool), n.name))
    assert nearest_first(candidates, pool) == expected
    assert nearest_first(reversed(candidates), pool) == expected
