"""The blast-radius breaker: it trips on many failures at once, holds them until they recover
or a person says proceed, with one event per transition and first-seen times that never
restart while it holds."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import FailureRecord, JobState, NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import (
    DeletePod,
    NodeCondition,
    NodeInfo,
    NodeSet,
    Plan,
    QuarantineNode,
    SetNodeRole,
    Snapshot,
)
from phased.core.times import format_time
from tests.core.builders import (
    SETTINGS,
    T0,
    at,
    events,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)

SIZE = 10
BREAKER_EVENTS = {"MassFailure", "MassFailureCleared", "MassFailureReleased"}


def _nodes(down: int, size: int = SIZE, since=None) -> list[NodeInfo]:
    actives = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(size)]
    for i in range(down):
        actives[i] = with_ready(actives[i], False, since or at(-60))
    return actives


def _pool(down: int, size: int = SIZE, ledger=(), since=None) -> Snapshot:
    actives = _nodes(down, size, since)
    pods = [
        pod(f"llm-train-g0-{i}", "train", i, world=size, node_name=f"a{i}") for i in range(size)
    ]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=size,
        failures=list(ledger),
        pool={"active": [n.name for n in actives]},
    )
    return snapshot(spec(phase("train", 2, size)), actives, pods, status)


def _again(snap: Snapshot, plan: Plan, **changes) -> Snapshot:
    """The next pass: the status the last plan wrote, and whatever else changed."""
    if "nodes" in changes:
        changes["nodes"] = NodeSet.of(changes["nodes"])
    return replace(snap, status=plan.status, **changes)


def _mass(plan: Plan):
    (cond,) = [c for c in plan.status.conditions if c.type == "MassFailure"]
    return cond


def _breaker_events(plan: Plan) -> list[str]:
    return [e for e in events(plan) if e in BREAKER_EVENTS]


def test_three_of_ten_at_once_trip_the_breaker_at_twenty_percent():
    plan = decide(_pool(3), SETTINGS, T0)
    assert of_type(plan, QuarantineNode) == [] and of_type(plan, DeletePod) == []
    assert of_type(plan, SetNodeRole) == []
    cond = _mass(plan)
    assert cond.status == "True" and "3 of 10" in cond.message and "30%" in cond.message
    assert "phased proceed ml/llm" in cond.message
    assert events(plan) == ["MassFailure"]
    assert plan.status.failures == []
    assert [h.node for h in plan.status.breaker.held] == ["a0", "a1", "a2"]
    assert plan.status.state == JobState.RECOVERING


def test_two_of_ten_are_answered():
    plan = decide(_pool(2), SETTINGS, T0)
    assert len(of_type(plan, QuarantineNode)) == 2
    assert plan.status.breaker.held == []


def test_failures_answered_inside_the_window_count():
    earlier = [
        FailureRecord(
            id=1,
            node="old",
            reason="NodeNotReady",
            detected=format_time(at(-120)),
            cordoned=format_time(at(-110)),
        )
    ]
    plan = decide(_pool(2, ledger=earlier), SETTINGS, T0)
    assert of_type(plan, QuarantineNode) == []
    assert _mass(plan).status == "True"


def test_failures_answered_before_the_window_do_not_count():
    earlier = [
        FailureRecord(id=1, node="old", reason="NodeNotReady", detected=format_time(at(-400)))
    ]
    plan = decide(_pool(2, ledger=earlier), SETTINGS, T0)
    assert len(of_type(plan, QuarantineNode)) == 2


def test_a_single_failure_in_a_tiny_pool_is_always_answered():
    plan = decide(_pool(1, size=3), SETTINGS, T0)
    assert len(of_type(plan, QuarantineNode)) == 1


def test_the_breaker_holds_long_after_the_window_with_no_further_event():
    snap = _pool(3)
    plan = decide(snap, SETTINGS, T0)
    tripped_at = _mass(plan).last_transition_time
    held = plan.status.breaker.held
    for seconds in (15, 30, 300, 301, 3600, 86400):
        plan = decide(_again(snap, plan), SETTINGS, at(seconds))
        assert of_type(plan, QuarantineNode) == [] and of_type(plan, DeletePod) == []
        assert _breaker_events(plan) == []
        assert _mass(plan).status == "True" and _mass(plan).last_transition_time == tripped_at
        assert plan.status.breaker.held == held
        assert plan.requeue_after is None or plan.requeue_after > 0


def test_a_lost_status_write_does_not_let_the_breaker_go():
    # The nodes went down long before the window; the status that said "tripped" was lost.
    snap = _pool(3, since=at(-3600))
    plan = decide(snap, SETTINGS, T0)
    assert of_type(plan, QuarantineNode) == []
    assert _mass(plan).status == "True"


def test_gpus_vanishing_from_many_nodes_keep_their_first_seen_time_and_one_event():
    actives = _nodes(0)
    gone = {f"a{i}" for i in range(4)}
    actives = [
        replace(n, allocatable={**n.allocatable, "nvidia.com/gpu": 0}) if n.name in gone else n
        for n in actives
    ]
    snap = replace(_pool(0), nodes=NodeSet.of(actives))
    plan = decide(snap, SETTINGS, T0)
    assert {s.node for s in plan.status.suspects} == gone  # within gpuDropGrace (10s)
    seen = []
    for seconds in range(5, 180, 5):
        plan = decide(_again(snap, plan), SETTINGS, at(seconds))
        seen += _breaker_events(plan)
        assert of_type(plan, QuarantineNode) == []
        since = {h.since for h in plan.status.breaker.held} | {
            s.since for s in plan.status.suspects
        }
        assert since == {format_time(T0)}, seconds
    assert seen == ["MassFailure"]
    assert {h.node for h in plan.status.breaker.held} == gone


def test_when_every_held_node_recovers_the_breaker_clears_with_one_event_and_quarantines_nothing():
    snap = _pool(3)
    plan = decide(snap, SETTINGS, T0)
    plan = decide(_again(snap, plan), SETTINGS, at(400))
    healed = tuple(
        with_ready(n, True, at(450)) if n.name in {"a0", "a1", "a2"} else n
        for n in snap.nodes.values()
    )
    plan = decide(_again(snap, plan, nodes=healed), SETTINGS, at(460))
    assert _breaker_events(plan) == ["MassFailureCleared"]
    assert _mass(plan).status == "False" and _mass(plan).reason == "Recovered"
    assert of_type(plan, QuarantineNode) == [] and of_type(plan, DeletePod) == []
    assert plan.status.breaker.held == [] and plan.status.failures == []
    plan = decide(_again(snap, plan, nodes=healed), SETTINGS, at(470))
    assert _breaker_events(plan) == []


def test_a_partial_recovery_keeps_holding_the_rest():
    snap = _pool(4)
    plan = decide(snap, SETTINGS, T0)
    some = tuple(with_ready(n, True, at(50)) if n.name == "a0" else n for n in snap.nodes.values())
    plan = decide(_again(snap, plan, nodes=some), SETTINGS, at(60))
    assert _breaker_events(plan) == [] and of_type(plan, QuarantineNode) == []
    assert _mass(plan).status == "True"
    assert [h.node for h in plan.status.breaker.held] == ["a1", "a2", "a3"]


def test_a_held_node_whose_not_ready_turns_unknown_stays_held_from_its_first_sight():
    # Ready=False, then the node lifecycle controller marks it Unknown (the kubelet went
    # silent): a new transition time, but the node never came back. It stays held, and the
    # time it is held from is still the one it was first held with.
    down = tuple(
        replace(n, conditions=(NodeCondition("Ready", "False", at(-60)),)) if i < 3 else n
        for i, n in enumerate(_nodes(0))
    )
    snap = replace(_pool(0), nodes=NodeSet.of(down))
    plan = decide(snap, SETTINGS, T0)
    held = plan.status.breaker.held
    assert [h.node for h in held] == ["a0", "a1", "a2"]
    silent = tuple(
        replace(n, conditions=(NodeCondition("Ready", "Unknown", at(30)),)) if n.name == "a1" else n
        for n in down
    )
    plan = decide(_again(snap, plan, nodes=silent), SETTINGS, at(31))
    assert _breaker_events(plan) == [] and of_type(plan, QuarantineNode) == []
    assert [(h.node, h.since) for h in plan.status.breaker.held] == [
        (h.node, h.since) for h in held
    ]
    assert plan.status.breaker.held[1].message == "node a1 Ready=Unknown"


def test_a_new_failure_while_holding_is_held_too_without_an_event():
    snap = _pool(3)
    plan = decide(snap, SETTINGS, T0)
    more = tuple(
        with_ready(n, False, at(100)) if n.name == "a5" else n for n in snap.nodes.values()
    )
    plan = decide(_again(snap, plan, nodes=more), SETTINGS, at(3600))
    assert _breaker_events(plan) == [] and of_type(plan, QuarantineNode) == []
    assert [h.node for h in plan.status.breaker.held] == ["a0", "a1", "a2", "a5"]


def _proceed(snap: Snapshot, value: str) -> dict:
    return {"annotations": {labels.ANNOTATION_PROCEED: value}}


def test_a_persons_proceed_answers_every_held_failure_once_and_rearms_the_breaker():
    snap = _pool(3)
    plan = decide(snap, SETTINGS, T0)
    plan = decide(_again(snap, plan), SETTINGS, at(600))
    approve = _proceed(snap, format_time(at(700)))
    plan = decide(_again(snap, plan, **approve), SETTINGS, at(701))
    assert sorted(q.node for q in of_type(plan, QuarantineNode)) == ["a0", "a1", "a2"]
    assert _breaker_events(plan) == ["MassFailureReleased"]
    assert [e for e in events(plan) if e == "NodeQuarantined"] == ["NodeQuarantined"] * 3
    assert _mass(plan).status == "False" and _mass(plan).reason == "ReleasedByPerson"
    assert plan.status.breaker.released_by == format_time(at(700))
    assert plan.status.breaker.held == []
    # Detection times are the nodes' own, not the release's.
    assert {f.detected for f in plan.status.failures} == {format_time(at(-60))}
    # Armed again: one new failure is answered (the released ones do not count), ...
    after = [
        with_ready(n, False, at(710)) if n.name == "a5" else n
        for n in _nodes(0)
        if n.name not in {"a0", "a1", "a2"}
    ]
    follow = replace(snap, nodes=NodeSet.of(after), status=plan.status, **approve)
    plan2 = decide(follow, SETTINGS, at(760))
    assert [q.node for q in of_type(plan2, QuarantineNode)] == ["a5"]
    assert _breaker_events(plan2) == []
    assert _mass(plan2).reason == "ReleasedByPerson"  # the last transition stays readable
    # ... and a new mass failure trips it again, which the old proceed does not release.
    worse = [
        with_ready(n, False, at(770)) if n.name in {"a6", "a7", "a8"} else n
        for n in _nodes(0)
        if n.name not in {"a0", "a1", "a2"}
    ]
    plan3 = decide(replace(follow, nodes=NodeSet.of(worse)), SETTINGS, at(820))
    assert _breaker_events(plan3) == ["MassFailure"]
    assert of_type(plan3, QuarantineNode) == []
    plan4 = decide(replace(follow, nodes=NodeSet.of(worse), status=plan3.status), SETTINGS, at(900))
    assert _breaker_events(plan4) == [] and of_type(plan4, QuarantineNode) == []


def test_a_proceed_older_than_the_trip_or_not_a_time_is_ignored():
    snap = _pool(3)
    plan = decide(snap, SETTINGS, T0)
    for value in (format_time(at(-1)), "yes", ""):
        again = decide(_again(snap, plan, **_proceed(snap, value)), SETTINGS, at(60))
        assert of_type(again, QuarantineNode) == [], value
        assert _breaker_events(again) == [], value


def test_a_held_node_deleted_while_held_stays_held_and_is_answered_on_proceed():
    snap = _pool(3)
    plan = decide(snap, SETTINGS, T0)
    remaining = tuple(n for n in snap.nodes.values() if n.name != "a1")
    gone = _again(
        snap, plan, nodes=remaining, known_node_names=frozenset(n.name for n in remaining)
    )
    plan = decide(gone, SETTINGS, at(30))
    plan = decide(replace(gone, status=plan.status), SETTINGS, at(60))
    assert [h.node for h in plan.status.breaker.held] == ["a0", "a1", "a2"]
    assert _breaker_events(plan) == []
    released = decide(
        replace(gone, status=plan.status, **_proceed(snap, format_time(at(90)))),
        SETTINGS,
        at(90),
    )
    assert sorted(q.node for q in of_type(released, QuarantineNode)) == ["a0", "a2"]
    reasons = {f.node: f.reason for f in released.status.failures}
    assert reasons == {"a0": "NodeNotReady", "a1": "NodeDeleted", "a2": "NodeNotReady"}


def test_tripping_again_after_recovery_is_a_new_transition_with_its_own_event():
    snap = _pool(3)
    plan = decide(snap, SETTINGS, T0)
    healthy = tuple(_nodes(0))
    plan = decide(_again(snap, plan, nodes=healthy), SETTINGS, at(30))
    assert _breaker_events(plan) == ["MassFailureCleared"]
    again = tuple(_nodes(3, since=at(40)))
    plan = decide(_again(snap, plan, nodes=again), SETTINGS, at(75))
    assert _breaker_events(plan) == ["MassFailure"]


def test_nodes_still_within_their_grace_count_so_a_rack_is_one_event():
    # a0 went dark a second before a1..a3: its grace runs out first, theirs a second later.
    nodes_now = _nodes(0)
    nodes_now[0] = with_ready(nodes_now[0], False, at(-31))
    for i in (1, 2, 3):
        nodes_now[i] = with_ready(nodes_now[i], False, at(-30) + timedelta(milliseconds=500))
    snap = replace(_pool(0), nodes=NodeSet.of(nodes_now))
    plan = decide(snap, SETTINGS, T0)
    assert of_type(plan, QuarantineNode) == []
    assert _breaker_events(plan) == ["MassFailure"]
    plan = decide(_again(snap, plan), SETTINGS, at(1))
    assert [h.node for h in plan.status.breaker.held] == ["a0", "a1", "a2", "a3"]
    assert of_type(plan, QuarantineNode) == [] and _breaker_events(plan) == []


def test_a_lone_failure_beside_one_suspect_in_a_big_pool_is_answered():
    nodes_now = _nodes(1)
    nodes_now[5] = with_ready(nodes_now[5], False, at(-5))
    plan = decide(replace(_pool(0), nodes=NodeSet.of(nodes_now)), SETTINGS, T0)
    assert [q.node for q in of_type(plan, QuarantineNode)] == ["a0"]
