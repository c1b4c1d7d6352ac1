"""The failure ledger's bookkeeping that several policies share."""

from __future__ import annotations

from datetime import datetime

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


def encode_replaces(node: str, at: datetime) -> str:
    return f"{node} {format_time(at)}"


def decode_replaces(value: str | None) -> tuple[str, datetime] | None:
    """``ANNOTATION_REPLACES`` read back; None when absent or not as Phased writes it."""
    node, _, stamp = (value or "").partition(" ")
    at = parse_time(stamp) if node and stamp else None
    return (node, at) if at is not None else None


def recover_replacements(ledger: list[FailureRecord], nodes: dict[str, NodeInfo]) -> None:
    """Entries without a replacement whose replacement is written on a node of the pool
    (a status write lost after the promotion) get it back; so does an open entry whose
    replacement was handed on since to the node carrying the newer note (a replacement in
    trouble swapped out before any worker was placed on it).

    A note answers one entry, as the promotion that wrote it answered one: the notes are
    read oldest first, as they were written; one whose node an entry of its lost node
    already names is answered; else it goes to the entry of that node detected by its time
    that :func:`mark_replaced` would have chosen — the newest open one without a
    replacement (then one resumed without it) — or, with none, to the newest open one whose
    replacement is older than the note and not itself on record in a note read here (handed
    on)."""
    notes: list[tuple[datetime, str, str]] = []
    for node in nodes.values():
        found = decode_replaces(node.annotations.get(labels.ANNOTATION_REPLACES))
        if found is not None:
            notes.append((found[1], node.name, found[0]))
    confirmed: set[int] = set()  # entries a note read here answers
    for at, name, lost in sorted(notes):
        fitting = [
            i
            for i, entry in enumerate(ledger)
            if entry.node == lost
            and (detected := parse_time(entry.detected)) is not None
            and detected <= at
        ]
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
