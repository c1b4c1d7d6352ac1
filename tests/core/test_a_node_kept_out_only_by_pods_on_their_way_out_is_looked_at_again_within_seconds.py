"""A node kept out only by pods of others on their way out (being deleted: another job's
workers stopping after its phase ended) is looked at again within seconds, not at the next
resync: while the job would take more nodes of its type, decide asks to be woken
``LOOK_AGAIN_SECONDS`` later, and the reconciler forgets such a node's pods as soon, so
that pass lists them afresh. Nothing else wakes a job waiting for that node — the pods going
away change no node, and their watch events wake only their own job — so a waiting job
started up to two resync intervals late; a node with a pod that stays (a tenant's) is
looked at again after a resync interval, as before."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.decide import decide
from phased.core.model import ClaimNode, NodePod
from phased.core.occupancy import LOOK_AGAIN_SECONDS, leaving
from tests.core.builders import (
    SETTINGS,
    T0,
    node,
    node_pod,
    nodes,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)

TRAIN = spec(phase("train", 2, 2))


def _stopping(name: str = "busy") -> NodePod:
    return node_pod("other-train-g0-0", name, namespace="ml", controller="uid-o", deleting=True)


def _tenant(name: str = "busy") -> NodePod:
    return node_pod("web", name)


def _waiting(*pods: NodePod):
    the_nodes = [node("busy"), node("free")]
    return decide(snapshot(TRAIN, the_nodes, node_pods={"busy": pods}), SETTINGS, T0)


def test_a_waiting_job_looks_again_within_seconds_at_a_node_being_freed() -> None:
    plan = _waiting(_stopping())
    assert of_type(plan, ClaimNode) == []
    assert plan.requeue_after == LOOK_AGAIN_SECONDS


def test_a_pod_that_stays_is_looked_at_again_only_as_before() -> None:
    plan = _waiting(_tenant())
    assert plan.requeue_after is not None and plan.requeue_after > 60  # the wait's timeout
    plan = _waiting(_stopping(), _tenant())
    assert plan.requeue_after is not None and plan.requeue_after > 60


def test_a_job_that_has_what_it_wants_looks_at_nothing() -> None:
    the_nodes = [node("busy"), *nodes("h", 2)]
    plan = decide(snapshot(TRAIN, the_nodes, node_pods={"busy": (_stopping(),)}), SETTINGS, T0)
    assert len(of_type(plan, ClaimNode)) == 2 and plan.requeue_after is None


def test_a_running_job_short_of_spares_looks_again_too() -> None:
    the_spec = spec(phase("train", 2, 2), spares=1)
    actives = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i:02d}") for i in range(2)]
    snap = snapshot(the_spec, [*actives, node("busy")], pods, node_pods={"busy": (_stopping(),)})
    plan = decide(snap, SETTINGS, T0)
    assert of_type(plan, ClaimNode) == [] and plan.requeue_after == LOOK_AGAIN_SECONDS


def test_a_node_of_another_type_is_none_of_its_business() -> None:
    the_nodes = [node("busy", gpu="H200"), node("free")]
    plan = decide(snapshot(TRAIN, the_nodes, node_pods={"busy": (_stopping(),)}), SETTINGS, T0)
    assert plan.requeue_after is not None and plan.requeue_after > 60


def test_only_pods_on_their_way_out_are_leaving() -> None:
    assert leaving([_stopping()], SETTINGS)
    assert not leaving([_stopping(), _tenant()], SETTINGS)
    assert not leaving([], SETTINGS)
