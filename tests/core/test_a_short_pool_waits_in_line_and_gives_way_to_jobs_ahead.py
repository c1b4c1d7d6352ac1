from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, ReleaseNode
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    events,
    node,
    nodes,
    of_type,
    owned,
    phase,
    snapshot,
    spec,
)

TRAIN = spec(phase("train", 8, 10))


def test_capacity_short_says_what_is_missing():
    plan = decide(snapshot(TRAIN, nodes("h", 5)), SETTINGS, T0)
    assert plan.status.state == JobState.WAITING
    (cond,) = [c for c in plan.status.conditions if c.type == "CapacityShort"]
    assert cond.status == "True"
    assert cond.message == "need 8 H100 nodes for phase train, have 5 (3 missing)"
    assert plan.status.waiting_for == {"H100": 3}
    assert events(plan) == ["CapacityShort"]
    assert len(of_type(plan, ClaimNode)) == 5


def test_the_first_acceptable_type_that_reaches_min_wins():
    the_spec = spec(phase("train", 3, 3, gpu_types=["H100", "H200"]))
    pool = nodes("h", 2) + nodes("k", 3, gpu="H200")
    plan = decide(snapshot(the_spec, pool), SETTINGS, T0)
    assert sorted(c.node for c in of_type(plan, ClaimNode)) == ["k00", "k01", "k02"]


def test_nodes_that_are_not_free_are_never_claimed():
    from phased.core.model import Taint

    busy = [
        node("cordoned", unschedulable=True),
        node("notready", ready=False),
        node("tainted", taints=(Taint("other", "x"),)),
        node("small", gpus=4),
        node("cpu", gpu=None),
    ]
    plan = decide(snapshot(TRAIN, busy), SETTINGS, T0)
    assert of_type(plan, ClaimNode) == []


def test_a_job_behind_another_in_line_claims_nothing_and_gives_back_half_a_pool():
    ahead = Claimant("uid-a", priority=5, created=T0, wants={"H100": 4})
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("m", 3)]
    plan = decide(snapshot(TRAIN, [*held, *nodes("h", 2)], waiting=(ahead,)), SETTINGS, T0)
    assert of_type(plan, ClaimNode) == []
    assert sorted(r.node for r in of_type(plan, ReleaseNode)) == ["m00", "m01", "m02"]
    assert plan.status.state == JobState.WAITING


def test_an_older_job_of_equal_priority_goes_first():
    younger = Claimant(
        "uid-y", priority=0, created=JOB.created + timedelta(hours=1), wants={"H100": 8}
    )
    plan = decide(snapshot(TRAIN, nodes("h", 9), waiting=(younger,)), SETTINGS, T0)
    assert len(of_type(plan, ClaimNode)) == 9


def test_claimants_wanting_another_type_do_not_block():
    other = Claimant("uid-o", priority=99, created=None, wants={"H200": 8})
    plan = decide(snapshot(TRAIN, nodes("h", 8), waiting=(other,)), SETTINGS, T0)
    assert len(of_type(plan, ClaimNode)) == 8


def test_more_than_max_plus_spares_is_released_spares_first_farthest_first():
    the_spec = spec(phase("train", 2, 2), spares=1)
    held = [owned(node("a0"), NodeRole.ACTIVE), owned(node("a1"), NodeRole.ACTIVE)]
    held += [owned(node("s-near"), NodeRole.SPARE), owned(node("s-far", zone="z9"), NodeRole.SPARE)]
    plan = decide(snapshot(the_spec, held), SETTINGS, T0)
    assert [r.node for r in of_type(plan, ReleaseNode)] == ["s-far"]
