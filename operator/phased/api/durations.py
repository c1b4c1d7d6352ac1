"""Durations as people write them in a TrainingJob: ``90s``, ``15m``, ``2h``, ``1h30m``, ``12d``.

The same grammar is enforced by the CRD's ``pattern`` (see ``DURATION_PATTERN``), so a value
that the API server accepts always parses here.
"""

from __future__ import annotations

import re

DURATION_PATTERN = r"^([0-9]{1,6}d)?([0-9]{1,7}h)?([0-9]{1,9}m)?([0-9]{1,11}s)?$"
_DURATION = re.compile(DURATION_PATTERN)
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


class DurationError(ValueError):
    """A duration string that does not follow the grammar."""


def parse_duration(text: str) -> int:
    """Return the number of seconds in ``text``; raise :class:`DurationError` if malformed."""
    if not text or _DURATION.fullmatch(text) is None:
        raise DurationError(
            f"{text!r} is not a duration: write a number and a unit, "
            "e.g. 90s, 15m, 2h, 1h30m or 12d"
        )
    total = 0
    for part in re.findall(r"[0-9]+[dhms]", text):
        total += int(part[:-1]) * _UNITS[part[-1]]
    return total


def format_duration(seconds: float) -> str:
    """Format seconds compactly for people, e.g. ``3725`` → ``1h2m5s``; ``0`` → ``0s``."""
    remaining = max(0, round(seconds))
    if remaining == 0:
        return "0s"
    parts: list[str] = []
    for unit, size in _UNITS.items():
        amount, remaining = divmod(remaining, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts)
