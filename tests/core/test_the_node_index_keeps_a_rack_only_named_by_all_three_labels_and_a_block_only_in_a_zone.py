"""Where the node index keeps a node, by the topology labels it carries: under its rack only
when the zone, block and rack labels all name it (a rack label alone names no rack a pool
could be packed into); under its block, and the block under its zone, whenever it has a zone
(a node with no block label is in its zone's block ""); nowhere without a zone. The index
built at once from the nodes and the one kept node by node as they come and go agree."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phased.core.model import NodeIndex, NodeInfo
from tests.core.builders import node

SHAPES = [
    # (zone, block, rack) labels ("": absent) -> (rack entry, block entry)
    (("z1", "b1", "r1"), ("z1", "b1", "r1"), ("z1", "b1")),
    (("z1", "b1", ""), None, ("z1", "b1")),
    (("z1", "", "r1"), None, ("z1", "")),
    (("z1", "", ""), None, ("z1", "")),
    (("", "b1", "r1"), None, None),
    (("", "", ""), None, None),
]


def placed(name: str, zone: str, block: str, rack: str) -> NodeInfo:
    """A node whose topology labels are exactly those given ("" leaves one off)."""
    built = node(name, zone=zone, block=block, rack=rack)
    keys = {
        "topology.kubernetes.io/zone": zone,
        "topology.phased.dev/block": block,
        "topology.phased.dev/rack": rack,
    }
    kept = {k: v for k, v in built.labels.items() if k not in keys or keys[k]}
    return replace(built, labels=kept)


def entries(index: NodeIndex) -> tuple[dict, dict, dict]:
    return dict(index.racks), dict(index.blocks), dict(index.zones)


@pytest.mark.parametrize(("labels", "rack", "block"), SHAPES, ids=[str(s[0]) for s in SHAPES])
def test_a_node_is_kept_under_the_rack_and_block_its_labels_name(
    labels: tuple[str, str, str], rack: tuple[str, str, str] | None, block: tuple[str, str] | None
) -> None:
    n = placed("n", *labels)
    built = NodeIndex.of([n])
    assert built.racks == ({rack: ("n",)} if rack else {})
    assert built.blocks == ({block: ("n",)} if block else {})
    assert built.zones == ({block[0]: frozenset({block[1]})} if block else {})
    # Put in node by node, the same; taken out again, nothing is left.
    kept = NodeIndex()
    kept.put("n", None, n)
    assert entries(kept) == entries(built)
    kept.put("n", n, None)
    assert entries(kept) == ({}, {}, {})


def test_a_node_that_loses_a_label_moves_as_a_build_would_put_it() -> None:
    shapes = [labels for labels, _, _ in SHAPES]
    others = [placed(f"o{i}", *labels) for i, labels in enumerate(shapes)]
    for before in shapes:
        for after in shapes:
            kept = NodeIndex.of([*others, placed("n", *before)])
            kept.put("n", placed("n", *before), placed("n", *after))
            assert entries(kept) == entries(NodeIndex.of([*others, placed("n", *after)]))
