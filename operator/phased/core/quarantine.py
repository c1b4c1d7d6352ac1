"""The quarantine note written on a Node (``ANNOTATION_QUARANTINE``), shared by both sides.

The reconciler writes it when it performs a :class:`~phased.core.model.QuarantineNode`;
decide reads it back so that a ledger entry survives an operator killed between cordoning a
node and writing the job's status. The note is JSON::

    {"job": "<uid>", "reason": "NodeNotReady", "message": "...",
     "detected": "2026-01-02T03:04:05Z", "cordoned": "2026-01-02T03:04:35Z"}

with ``"cordonedBefore": true`` when the node was already cordoned as it was quarantined:
Phased cordons only the nodes it quarantines, so that cordon is someone else's (a person
who found the node suspicious, a drain for maintenance), and it outlives the quarantine —
the node is never uncordoned by Phased nor made a spare again (:mod:`phased.core.recovery`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime

from phased.core.times import format_time, parse_time


@dataclass(frozen=True)
class QuarantineNote:
    job: str
    reason: str
    message: str
    detected: datetime
    cordoned: datetime | None = None
    cordoned_before: bool = False  # someone else's cordon was there: it outlives the quarantine

    @classmethod
    def for_action(
        cls, job: str, reason: str, message: str, detected: datetime, cordoned: datetime
    ) -> QuarantineNote:
        return cls(job=job, reason=reason, message=message, detected=detected, cordoned=cordoned)

    def over_a_cordon(self) -> QuarantineNote:
        """The note written on a node someone else had cordoned already."""
        return replace(self, cordoned_before=True)


def encode_quarantine(note: QuarantineNote) -> str:
    """The annotation value for ``note`` (compact, stable key order)."""
    data: dict[str, object] = {
        "job": note.job,
        "reason": note.reason,
        "message": note.message,
        "detected": format_time(note.detected),
    }
    if note.cordoned is not None:
        data["cordoned"] = format_time(note.cordoned)
    if note.cordoned_before:
        data["cordonedBefore"] = True
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
        cordoned_before=data.get("cordonedBefore") is True,
    )
