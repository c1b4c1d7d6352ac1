"""A waiting job whose ``spec.priority`` is edited changes its place in the line at once,
and wakes the other jobs waiting for capacity: the ones it now falls behind may take the
free nodes they kept for it. Its ``waitingFor`` stays the same (it still needs its
``nodes.min``), so no status change and no node event woke them: before, they noticed only
at the next resync (30 s by default) with free nodes kept idle meanwhile."""

from __future__ import annotations

from typing import Any

import pytest

from phased.reconcile import Reconciler
from tests.handlers import line
from tests.handlers.line import job


def looked_at(monkeypatch: pytest.MonkeyPatch, edited: dict[str, Any]) -> set[str]:
    """The jobs a pass looked at after the watch delivers ``edited`` (job ``ahead``, of
    priority 10, waiting for 8 H100 nodes), with ``behind`` waiting and ``running`` running."""

    def edit_in_line(rec: Reconciler) -> None:
        # The line each job's next pass reads: the edit is in it.
        priorities = {c.uid: c.priority for c in rec._claimants("behind")}
        assert priorities == {"ahead": edited["spec"]["priority"]}

    known = [
        job("ahead", 10, "Waiting", {"H100": 8}, 10),
        job("behind", 11, "Waiting", {"H100": 2}, 5),
        job("running", 12, "Running", None, 0),
    ]
    return line.looked_at(monkeypatch, known, "MODIFIED", edited, edit_in_line)


@pytest.mark.parametrize("priority", [0, 20], ids=["lowered", "raised"])
def test_the_waiting_jobs_are_looked_at_at_once(
    monkeypatch: pytest.MonkeyPatch, priority: int
) -> None:
    seen = looked_at(monkeypatch, job("ahead", 20, "Waiting", {"H100": 8}, priority))
    assert seen == {"ahead", "behind"}  # a running job never waits in line: nothing for it


def test_an_edit_leaving_its_place_as_it_was_wakes_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = looked_at(monkeypatch, job("ahead", 20, "Waiting", {"H100": 8}, 10))
    assert seen == {"ahead"}


def test_a_job_not_in_line_edited_wakes_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    known = [job("behind", 11, "Waiting", {"H100": 2}, 5), job("running", 12, "Running", None, 0)]
    edited = job("running", 20, "Running", None, 50)
    assert line.looked_at(monkeypatch, known, "MODIFIED", edited) == {"running"}
