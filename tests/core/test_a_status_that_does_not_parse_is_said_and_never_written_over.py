"""A status field a person (or another tool) broke is named, decided around, and left alone."""

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole, read_status
from phased.core.conditions import ConditionType, is_true
from phased.core.decide import decide
from phased.reconcile import status_patch
from tests.core.builders import SETTINGS, T0, at, events, node, owned, phase, snapshot, spec

GOOD = {"phase": "train", "restarts": 3, "worldSize": 2}


def test_the_fields_that_parse_are_kept_and_the_others_named():
    status, bad = read_status({**GOOD, "failures": "not a list", "phaseIndex": "x"})
    assert bad == ("failures", "phaseIndex")
    assert (status.phase, status.restarts, status.world_size) == ("train", 3, 2)
    assert status.failures == []


def test_a_readable_status_has_nothing_unreadable():
    assert read_status(GOOD)[1] == ()
    assert read_status(None)[1] == () and read_status({})[1] == ()


def test_the_job_says_so_once_and_carries_on():
    raw = {**GOOD, "failures": [{"id": "one"}]}
    status, bad = read_status(raw)
    held = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(2)]
    snap = snapshot(spec(phase("train", 2, 2)), held, status=status, unreadable_status=bad)
    plan = decide(snap, SETTINGS, T0)
    assert is_true(plan.status.conditions, ConditionType.STATUS_UNREADABLE)
    assert events(plan).count(ConditionType.STATUS_UNREADABLE) == 1
    assert "failures" in plan.status.message or any(
        "failures" in c.message for c in plan.status.conditions
    )
    again = decide(replace(snap, status=plan.status), SETTINGS, at(1))
    assert ConditionType.STATUS_UNREADABLE not in events(again)
    mended = decide(replace(snap, status=again.status, unreadable_status=()), SETTINGS, at(2))
    assert not is_true(mended.status.conditions, ConditionType.STATUS_UNREADABLE)


def test_the_patch_neither_writes_nor_nulls_an_unreadable_field():
    stored = {**GOOD, "failures": "not a list", "message": "old"}
    new = {"phase": "train", "restarts": 4, "failures": [], "worldSize": 2}
    patch = status_patch(new, stored, ("failures",))
    assert "failures" not in patch
    assert patch["restarts"] == 4 and patch["message"] is None
