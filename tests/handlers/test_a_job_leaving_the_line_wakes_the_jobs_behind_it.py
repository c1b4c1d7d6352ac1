"""A job that leaves the line or asks for less — deleted, admitted, failed, edited smaller —
wakes the jobs waiting for capacity at once: the free nodes they kept for it may be theirs
now, and no node changed, so no node event would wake them (before, they noticed only at the
next resync, 30 s by default, with free nodes idle meanwhile)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.handlers import line
from tests.handlers.line import job

KNOWN = [
    job("ahead", 10, "Waiting", {"H100": 8}),
    job("behind", 11, "Waiting", {"H100": 2}),
    job("running", 12, "Running", None),
]


def looked_at(monkeypatch: pytest.MonkeyPatch, event: str, ahead_now: dict[str, Any]) -> set[str]:
    """The jobs a pass looked at after the watch delivers ``event`` of job ``ahead``, with
    ``behind`` waiting in line and ``running`` running."""
    return line.looked_at(monkeypatch, KNOWN, event, ahead_now)


@pytest.mark.parametrize(
    ("event", "ahead_now"),
    [
        pytest.param("DELETED", job("ahead", 10, "Waiting", {"H100": 8}), id="deleted"),
        pytest.param("MODIFIED", job("ahead", 20, "Running", None), id="admitted"),
        pytest.param("MODIFIED", job("ahead", 20, "Failed", None), id="failed"),
        pytest.param("MODIFIED", job("ahead", 20, "Waiting", {"H100": 4}), id="asks-less"),
    ],
)
def test_the_jobs_behind_are_looked_at_at_once(
    monkeypatch: pytest.MonkeyPatch, event: str, ahead_now: dict[str, Any]
) -> None:
    seen = looked_at(monkeypatch, event, ahead_now)
    assert "behind" in seen
    assert "running" not in seen  # a running job never waits in line: nothing for it


def test_a_job_still_asking_the_same_wakes_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = looked_at(monkeypatch, "MODIFIED", job("ahead", 20, "Waiting", {"H100": 8}))
    assert seen == {"ahead"}
