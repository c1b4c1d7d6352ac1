"""A merge patch leaves absent keys alone, so the status patch names what must go."""

from __future__ import annotations

from phased.reconcile import _with_deletions


def test_a_field_that_became_empty_is_sent_as_null() -> None:
    old = {"state": "Running", "interruption": {"used": "5s", "openSince": "2026-01-01T00:00:00Z"}}
    new = {"state": "Running", "interruption": {"used": "6s"}}
    assert _with_deletions(new, old) == {
        "state": "Running",
        "interruption": {"used": "6s", "openSince": None},
    }


def test_lists_are_replaced_whole_and_new_keys_pass_through() -> None:
    old = {"failures": [{"id": 1, "resumed": "x"}], "gone": 1}
    new = {"failures": [{"id": 1}], "phase": "train"}
    assert _with_deletions(new, old) == {"failures": [{"id": 1}], "phase": "train", "gone": None}
