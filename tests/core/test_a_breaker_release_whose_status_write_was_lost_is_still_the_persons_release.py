"""A person's ``phased proceed`` released the breaker and the pass answering it quarantined
the held nodes and restarted the gang, but its status write was lost: the next pass reads a
breaker still tripped over nodes now quarantined by the job since the trip. Only a release
answers what the breaker holds, so that is what happened: ``MassFailure`` False with reason
``ReleasedByPerson``, ``status.breaker.releasedAt`` the time of those cordons, the
failures it answered do not count towards the next trip, and failures found since are
judged by the breaker armed again. Before, the pass took the held
nodes' absence from the active pool for their recovery (``MassFailureCleared``: "every node
the breaker held recovered; nothing was quarantined", beside the two nodes it had just
quarantined), forgot the release, and a single failure minutes later tripped the breaker
again on the failures the person had just approved."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import EmitEvent, Plan
from phased.core.times import format_time
from tests.core.builders import Cluster, events, nodes, phase, spec, with_ready

POLICY = {"notReadyGrace": "30s"}  # maxFailedPercent 20 of 6: one failure at a time


def _released_but_not_written() -> tuple[Cluster, str, Plan]:
    cluster = Cluster(
        spec(phase("train", 2, 6), failurePolicy=POLICY), {n.name: n for n in nodes("h", 6)}
    )
    cluster.settle()
    cluster.advance(60)
    for name in cluster.held(NodeRole.ACTIVE)[:2]:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    assert "MassFailure" in events(cluster.step())
    cluster.advance(30)
    cluster.step()
    approval = format_time(cluster.now)
    cluster.annotations[labels.ANNOTATION_PROCEED] = approval
    cluster.advance(5)
    before = cluster.status
    released = cluster.step()
    assert "MassFailureReleased" in events(released)
    assert cluster.held(NodeRole.QUARANTINED) == ["h00", "h01"]
    cluster.status = before  # the write after the release never landed
    cluster.advance(5)
    return cluster, approval, cluster.step()


def test_the_pass_after_says_the_person_released_it_not_that_the_nodes_recovered() -> None:
    cluster, approval, plan = _released_but_not_written()
    (mass,) = [c for c in cluster.status.conditions if c.type == "MassFailure"]
    assert (mass.status, mass.reason) == ("False", "ReleasedByPerson")
    said = [a for a in plan.actions if isinstance(a, EmitEvent)]
    assert "MassFailureCleared" not in [e.reason for e in said]
    assert not [e for e in said if "nothing was quarantined" in e.message]
    cordoned = {f.cordoned for f in cluster.status.failures}
    assert cluster.status.breaker.released_at in cordoned
    assert cluster.status.breaker.released_by == approval


def test_the_failures_it_answered_do_not_trip_the_breaker_on_the_next_one() -> None:
    cluster, _, _ = _released_but_not_written()
    cluster.settle()
    assert cluster.status.restarts == 1 and len(cluster.status.failures) == 2
    cluster.advance(60)
    third = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[third] = with_ready(cluster.nodes[third], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    assert third in cluster.held(NodeRole.QUARANTINED)
    (mass,) = [c for c in cluster.status.conditions if c.type == "MassFailure"]
    assert mass.status == "False"
    assert [f.node for f in cluster.status.failures] == ["h00", "h01", third]


def _tripped_on_three_of_ten() -> Cluster:
    cluster = Cluster(
        spec(phase("train", 2, 10), failurePolicy=POLICY), {n.name: n for n in nodes("h", 10)}
    )
    cluster.settle()
    cluster.advance(60)
    for name in ("h00", "h01", "h02"):
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    assert "MassFailure" in events(cluster.step())
    cluster.advance(30)
    cluster.step()
    cluster.annotations[labels.ANNOTATION_PROCEED] = format_time(cluster.now)
    cluster.advance(5)
    return cluster


def test_failures_found_after_it_are_judged_by_the_breaker_armed_again() -> None:
    """The approval was for what the breaker held then: three more failures found in the
    pass after trip the breaker armed again, as they would have had the write landed.
    Before, the approval still looked unused and answered them too."""
    cluster = _tripped_on_three_of_ten()
    before = cluster.status
    cluster.step()
    assert cluster.held(NodeRole.QUARANTINED) == ["h00", "h01", "h02"]
    cluster.status = before  # the write after the release never landed
    for name in ("h03", "h04", "h05"):
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    plan = cluster.step()
    assert cluster.held(NodeRole.QUARANTINED) == ["h00", "h01", "h02"]
    (mass,) = [c for c in cluster.status.conditions if c.type == "MassFailure"]
    assert mass.status == "True"
    assert [h.node for h in cluster.status.breaker.held] == ["h03", "h04", "h05"]
    assert events(plan).count("MassFailure") == 1
    assert [f.node for f in cluster.status.failures] == ["h00", "h01", "h02"]


def test_what_it_approved_that_a_pass_cut_short_left_unanswered_is_answered() -> None:
    """The release pass stopped after its first quarantine, before its status write: the
    nodes it had not reached yet are answered on the next pass, under the same approval."""
    cluster = _tripped_on_three_of_ten()
    plan = cluster.decide()
    first = next(i for i, a in enumerate(plan.actions) if type(a).__name__ == "QuarantineNode")
    for action in plan.actions[: first + 1]:
        cluster._apply(action)
    assert cluster.held(NodeRole.QUARANTINED) == ["h00"]
    cluster.advance(5)
    cluster.step()
    assert cluster.held(NodeRole.QUARANTINED) == ["h00", "h01", "h02"]
    (mass,) = [c for c in cluster.status.conditions if c.type == "MassFailure"]
    assert (mass.status, mass.reason) == ("False", "ReleasedByPerson")
    assert cluster.status.breaker.held == []


def test_what_it_approved_and_answered_late_does_not_trip_the_breaker_on_the_next_one() -> None:
    """The nodes a pass cut short left to the next one were approved by the person as much
    as the one it reached: answered later, they still do not count towards the next trip.
    Before, only the earliest cordon was the release: the two answered a pass later counted,
    and a single failure a minute after tripped the breaker again (3 of 10, 20 % allowed)."""
    cluster = _tripped_on_three_of_ten()
    plan = cluster.decide()
    first = next(i for i, a in enumerate(plan.actions) if type(a).__name__ == "QuarantineNode")
    for action in plan.actions[: first + 1]:
        cluster._apply(action)
    cluster.advance(5)
    cluster.settle()
    assert cluster.held(NodeRole.QUARANTINED) == ["h00", "h01", "h02"]
    cluster.advance(60)
    fourth = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[fourth] = with_ready(cluster.nodes[fourth], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    (mass,) = [c for c in cluster.status.conditions if c.type == "MassFailure"]
    assert mass.status == "False" and cluster.status.breaker.held == []
    assert fourth in cluster.held(NodeRole.QUARANTINED)
