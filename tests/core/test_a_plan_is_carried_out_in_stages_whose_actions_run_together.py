"""A plan's actions are carried out in four stages — what workers need, pods leave, nodes
change, pods come — and within a stage at once, except two actions on one object."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.model import (
    Action,
    ClaimNode,
    CreatePod,
    DeletePod,
    EmitEvent,
    EnsureService,
    EvictPod,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
)
from phased.core.stages import waves
from tests.core.builders import (
    Cluster,
    at,
    node,
    of_type,
    phase,
    spec,
    with_ready,
)


def kinds(wave: tuple[Action, ...]) -> set[str]:
    return {type(a).__name__ for a in wave}


def test_a_failure_is_answered_in_four_waves_not_one_request_after_another() -> None:
    pool = {f"n{i}": node(f"n{i}") for i in range(12)}
    cluster = Cluster(
        spec(phase("train", 8, 8), spares=2, failurePolicy={"notReadyGrace": "0s"}), pool
    )
    cluster.settle()
    cluster.advance(30)
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(1)
    plan = cluster.decide()
    assert of_type(plan, QuarantineNode) and of_type(plan, SetNodeRole)
    assert len(of_type(plan, DeletePod)) == 8 and len(of_type(plan, CreatePod)) == 8

    out = waves(plan.actions)

    assert [kinds(w) for w in out] == [
        {"DeletePod"},
        {"QuarantineNode", "SetNodeRole"},
        {"CreatePod"},
        {"ClaimNode"},  # a spare in the promoted one's place: no worker waits for it
    ]
    assert [len(w) for w in out] == [8, 2, 8, 1]
    # Every action but the events is carried out, once, in the plan's order within a wave.
    carried = [a for w in out for a in w]
    assert sorted(map(repr, carried)) == sorted(
        repr(a) for a in plan.actions if not isinstance(a, EmitEvent)
    )
    for wave in out:
        assert list(wave) == [a for a in plan.actions if a in wave]


def test_workers_are_stopped_before_their_nodes_are_given_back() -> None:
    plan = (
        ReleaseNode("a"),
        DeletePod("w-0", reason="TrainingJob deleted"),
        ReleaseNode("b"),
        DeletePod("w-1", reason="TrainingJob deleted"),
    )

    assert waves(plan) == [
        (
            DeletePod("w-0", reason="TrainingJob deleted"),
            DeletePod("w-1", reason="TrainingJob deleted"),
        ),
        (ReleaseNode("a"), ReleaseNode("b")),
    ]


def test_two_changes_of_one_node_keep_their_order_in_waves_of_their_own() -> None:
    when = at(0)
    quarantine = QuarantineNode("a", "NodeNotReady", "", when, when)
    plan = (
        ClaimNode("b", "7", NodeRole.ACTIVE),
        quarantine,
        ReleaseNode("a"),
        ClaimNode("c", "8", NodeRole.ACTIVE),
    )

    assert waves(plan) == [
        (ClaimNode("b", "7", NodeRole.ACTIVE), quarantine),
        (ReleaseNode("a"), ClaimNode("c", "8", NodeRole.ACTIVE)),
    ]


def test_a_pool_forms_its_active_nodes_then_its_workers_then_its_spares() -> None:
    plan = (
        ClaimNode("a", "1", NodeRole.ACTIVE),
        ClaimNode("b", "2", NodeRole.ACTIVE),
        ClaimNode("s", "3", NodeRole.SPARE),
        CreatePod(manifest={"metadata": {"name": "w-0"}}),
        CreatePod(manifest={"metadata": {"name": "w-1"}}),
    )

    assert [[type(a).__name__ for a in w] for w in waves(plan)] == [
        ["ClaimNode", "ClaimNode"],
        ["CreatePod", "CreatePod"],
        ["ClaimNode"],
    ]
    assert waves(plan)[2] == (ClaimNode("s", "3", NodeRole.SPARE),)


def test_what_workers_need_comes_first_and_new_workers_last() -> None:
    service = EnsureService(manifest={"metadata": {"name": "llm"}})
    create = CreatePod(manifest={"metadata": {"name": "llm-train-g0-0"}})
    evict = EvictPod(namespace="tenant", name="guest", node="a")
    plan = (create, EmitEvent("Normal", "Started", ""), evict, service)

    assert waves(plan) == [(service,), (evict,), (create,)]
