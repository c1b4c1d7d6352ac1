"""The failure ledger's bookkeeping that several policies share."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from phased.api.v1alpha1 import FailureRecord
from phased.core import labels
from phased.core.model import NodeInfo
from phased.core.times import format_time, parse_time


def mark_replaced(
    ledger: list[FailureRecord], lost: str | None, spare: str, now: datetime
) -> str | None:
    """Record that ``spare`` took the place of ``lost`` (or, when the lost node is not
    known to the caller, of the latest open failure still without a replacement).

    Every promotion of a spare while a failure is open goes through here, whichever policy
    promoted it (the swap itself, or a pool formed anew after a gang restart), so an entry
    never ends ``resumed`` without its ``replacedBy`` while a spare did take its place.
    Returns the node of the entry marked, if any.
    """
    for i in range(len(ledger) - 1, -1, -1):
        entry = ledger[i]
        if entry.replaced_by is None and entry.resumed is None and lost in (None, entry.node):
            ledger[i] = entry.model_copy(
                update={"replaced_by": spare, "replaced": format_time(now)}
            )
            return entry.node
    return None


# The word after the time in a note written when the node took the place of one in trouble
# within its grace, not failed (yet): an operator without it reads no note there at all.
TROUBLED = "troubled"


class Replaces(NamedTuple):
    """``ANNOTATION_REPLACES`` read back: the node whose place this one took, and when;
    ``troubled``: that node was in trouble within its grace then, not failed."""

    node: str
    at: datetime
    troubled: bool = False


def encode_replaces(node: str, at: datetime, troubled: bool = False) -> str:
    return f"{node} {format_time(at)}" + (f" {TROUBLED}" if troubled else "")


def decode_replaces(value: str | None) -> Replaces | None:
    """``ANNOTATION_REPLACES`` read back; None when absent or not as Phased writes it."""
    node, _, rest = (value or "").partition(" ")
    stamp, _, word = rest.partition(" ")
    at = parse_time(stamp) if node and stamp and word in ("", TROUBLED) else None
    return Replaces(node, at, word == TROUBLED) if at is not None else None


def recover_replacements(ledger: list[FailureRecord], nodes: dict[str, NodeInfo]) -> None:
    """Entries without a replacement whose replacement is written on a node of the pool
    (a status write lost after the promotion; a node in trouble whose grace ran out after a
    spare took its place) get it back; so does an open entry whose replacement was handed
    on since to the node carrying the newer note (a replacement in trouble swapped out
    before any worker was placed on it).

    A note answers one entry, as the promotion that wrote it answered one: the notes are
    read oldest first, as they were written; one whose node an entry of its lost node
    already names is answered; else it goes to the entry of that node detected by its time
    that :func:`mark_replaced` would have chosen — the newest open one without a
    replacement (then one resumed without it) — or, with none, to the newest open one whose
    replacement is older than the note and not itself on record in a note read here
    (handed on). A ``troubled`` note (written when the node took the place of one in
    trouble, not failed yet) answers only a failure of that trouble: detected by its time
    and answered at it or after (its grace ran out once the node was a spare), never one
    that ended before it."""
    notes: list[tuple[datetime, str, Replaces]] = []
    for node in nodes.values():
        found = decode_replaces(node.annotations.get(labels.ANNOTATION_REPLACES))
        if found is not None:
            notes.append((found.at, node.name, found))
    confirmed: set[int] = set()  # entries a note read here answers
    for at, name, note in sorted(notes):
        fitting = [i for i, entry in enumerate(ledger) if _fits(entry, note)]
        named = [i for i in fitting if ledger[i].replaced_by == name]
        if named:
            confirmed.update(named)
            continue
        unanswered = [i for i in fitting if ledger[i].replaced_by is None]
        handed_on = [
            i
            for i in fitting
            if i not in confirmed
            and ledger[i].resumed is None
            and ((replaced := parse_time(ledger[i].replaced)) is None or replaced < at)
        ]
        chosen = [i for i in unanswered if ledger[i].resumed is None] or unanswered or handed_on
        if not chosen:
            continue
        i = chosen[-1]
        ledger[i] = ledger[i].model_copy(update={"replaced_by": name, "replaced": format_time(at)})
        confirmed.add(i)


def _fits(entry: FailureRecord, note: Replaces) -> bool:
    """``entry`` is one ``note`` may answer (:func:`recover_replacements`)."""
    detected = parse_time(entry.detected)
    if entry.node != note.node or detected is None or detected > note.at:
        return False
    answered = parse_time(entry.cordoned) or detected
    return not note.troubled or answered >= note.at
