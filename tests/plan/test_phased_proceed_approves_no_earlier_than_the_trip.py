"""``phased proceed`` writes an approval the operator honours for the current trip only."""

from datetime import UTC, datetime, timedelta

from phased.cli.proceed import approval_time
from phased.core.failure import proceed_time

TRIP = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_the_approval_is_now_when_the_clock_is_past_the_trip() -> None:
    now = TRIP + timedelta(minutes=3)
    assert approval_time(now, TRIP) == "2026-03-01T12:03:00Z"


def test_a_clock_behind_the_cluster_still_approves_the_trip_it_saw() -> None:
    assert approval_time(TRIP - timedelta(minutes=2), TRIP) == "2026-03-01T12:00:00Z"


def test_what_the_command_writes_the_operator_reads_back_as_the_same_instant() -> None:
    value = approval_time(TRIP + timedelta(seconds=5), TRIP)
    assert proceed_time(value) == TRIP + timedelta(seconds=5)
    assert proceed_time("yes") is None and proceed_time("") is None
