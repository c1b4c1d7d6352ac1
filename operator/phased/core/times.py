"""One way to write and read instants in the status: ISO-8601, UTC, with a ``Z``.

Kubernetes writes whole seconds; Phased keeps microseconds when an instant has them, so that
sums over many short intervals (accounting, interruptions) do not drift.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# The ends of the calendar, for instants that a long duration would push past them.
EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


def format_time(moment: datetime) -> str:
    """``2026-01-02T03:04:05Z`` (or ``…05.250000Z``); naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    spec = "microseconds" if moment.microsecond else "seconds"
    return moment.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def parse_time(text: str | None) -> datetime | None:
    """The instant in ``text`` (UTC-aware), or ``None`` when empty or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def seconds_between(start: datetime | None, end: datetime) -> float:
    """Seconds from ``start`` to ``end``, never negative; 0 when ``start`` is unknown."""
    if start is None:
        return 0.0
    return max(0.0, (end - start).total_seconds())


def shifted(moment: datetime, seconds: float) -> datetime:
    """``moment`` plus ``seconds`` (may be negative), clamped to the calendar's ends.

    Durations in a spec may add up to thousands of years (``999999d`` matches the CRD's
    pattern); an instant beyond year 1 or 9999 is read as that end, never an error.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return LATEST if seconds > 0 else EARLIEST
