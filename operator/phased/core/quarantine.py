"""The quarantine note written on a Node (``ANNOTATION_QUARANTINE``), shared by both sides.

The reconciler writes it when it performs a :class:`~phased.core.model.QuarantineNode`;
decide reads it back so that a ledger entry survives an operator killed between cordoning a
node and writing the job's status. The note is JSON::

    {"job": "<uid>", "reason": "NodeNotReady", "message": "...",
     "detected": "2026-01-02T03:04:05Z", "cordoned": "2026-01-02T03:04:35Z"}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from phased.core.times import format_time, parse_time


@dataclass(frozen=True)
class QuarantineNote:
    job: str
    reason: str
    message: str
    detected: datetime
    cordoned: datetime | None = None

    @classmethod
    def for_action(
        cls, job: str, reason: str, message: str, detected: datetime, cordoned: datetime
    ) -> QuarantineNote:
        return cls(job=job, reason=reason, message=message, detected=detected, cordoned=cordoned)


def encode_quarantine(note: QuarantineNote) -> str:
    """The annotation value for ``note`` (compact, stable key order)."""
    data = {
        "job": note.job,
        "reason": note.reason,
        "message": note.message,
        "detected": format_time(note.detected),
    }
    if note.cordoned is not None:
        data["cordoned"] = format_time(note.cordoned)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def decode_quarantine(text: str | None) -> QuarantineNote | None:
    """The note in an annotation value; ``None`` when missing or not a note Phased wrote."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    detected = parse_time(str(data.get("detected", "")))
    if detected is None or not data.get("job"):
        return None
    return QuarantineNote(
        job=str(data["job"]),
        reason=str(data.get("reason", "")),
        message=str(data.get("message", "")),
        detected=detected,
        cordoned=parse_time(str(data.get("cordoned", "")) or None),
    )
