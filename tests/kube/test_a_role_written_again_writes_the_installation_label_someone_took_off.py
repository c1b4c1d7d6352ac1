"""The role of a held node written again with nothing else changed writes every label a
claim writes that the node lacks: the job's name labels, and this installation's
``phased.dev/installation`` label (someone took it off, or the node was claimed by a Phased
from before installations; the claim's ``claimed-at`` keeps it the job's meanwhile). Before,
the patch wrote the installation label only beside another change, so a node that lacked
only it was left as it was, the pass asking again and again."""

from __future__ import annotations

import asyncio
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.ownership import Kind, ownership
from phased.kube.convert import node_from_raw
from tests.kube.fake_cluster import FakeCluster
from tests.kube.test_held_nodes_are_kept_from_the_autoscalers_and_given_back_as_found import (
    JOB,
    NOW,
    _claimed,
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_held_node_lacking_only_the_installation_label_gets_it_back() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    verbs = _claimed(cluster, "n", NodeRole.ACTIVE)
    meta = cluster.nodes["n"]["metadata"]
    del meta["labels"][labels.LABEL_INSTALLATION]
    assert ownership(node_from_raw(cluster.nodes["n"]), "default").kind == Kind.LEFT_ALONE

    assert run(verbs.set_role("n", JOB, NodeRole.ACTIVE, now=NOW))

    node = cluster.nodes["n"]
    assert node["metadata"]["labels"][labels.LABEL_INSTALLATION] == "default"
    assert ownership(node_from_raw(node), "default").kind == Kind.OURS
    assert labels.ANNOTATION_CLEARING not in node["metadata"]["annotations"]  # same role
    assert not run(verbs.set_role("n", JOB, NodeRole.ACTIVE, now=NOW))  # nothing left to do
