"""A promoted spare's ``phased.dev/replaces`` note, read back into the ledger after a lost
status write, answers exactly one failure of the node it names: the one the promotion
answered — of the failures of that node detected by the note's time, the newest without a
replacement, as ``mark_replaced`` chooses when it promotes — and notes are read oldest
first, so two notes for a node that failed twice answer its two entries as the promotions
did. A note whose node an entry already names is answered and takes no other entry. Before,
every open entry of the node detected before the note took it: a node that failed twice had
both entries name the same spare, and an entry whose own replacement was on record was
taken over by the note of the spare answering the other."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import FailureRecord, NodeRole
from phased.core import labels
from phased.core.ledger import encode_replaces, mark_replaced, recover_replacements
from phased.core.model import NodeInfo
from phased.core.times import format_time
from tests.core.builders import at, node, owned


def _entry(
    id: int, lost: str, detected: float, by: str | None = None, when: float = 0
) -> FailureRecord:
    return FailureRecord(
        id=id,
        node=lost,
        reason="NodeNotReady",
        detected=format_time(at(detected)),
        replaced_by=by,
        replaced=format_time(at(when)) if by is not None else None,
    )


def _noted(name: str, lost: str, when: float) -> NodeInfo:
    n = owned(node(name), NodeRole.ACTIVE)
    notes = {**n.annotations, labels.ANNOTATION_REPLACES: encode_replaces(lost, at(when))}
    return replace(n, annotations=notes)


def _replacements(ledger: list[FailureRecord]) -> list[tuple[str | None, str | None]]:
    return [(e.replaced_by, e.replaced) for e in ledger]


def test_one_note_answers_the_newest_open_failure_of_its_node_alone() -> None:
    ledger = [_entry(1, "h00", 10), _entry(2, "h00", 20)]
    recover_replacements(ledger, {"s1": _noted("s1", "h00", 30)})

    assert _replacements(ledger) == [(None, None), ("s1", format_time(at(30)))]


def test_two_notes_answer_the_two_failures_as_the_promotions_did() -> None:
    promoted = [_entry(1, "h00", 10), _entry(2, "h00", 20)]
    mark_replaced(promoted, "h00", "s1", at(30))
    mark_replaced(promoted, "h00", "s2", at(40))

    rebuilt = [_entry(1, "h00", 10), _entry(2, "h00", 20)]
    # The newer note first: the rebuild reads them by their time, not the view's order.
    recover_replacements(rebuilt, {"s2": _noted("s2", "h00", 40), "s1": _noted("s1", "h00", 30)})

    assert _replacements(rebuilt) == _replacements(promoted)
    assert {e.replaced_by for e in rebuilt} == {"s1", "s2"}


def test_a_note_an_entry_already_names_takes_no_other_entry() -> None:
    ledger = [_entry(1, "h00", 10, by="s1", when=30), _entry(2, "h00", 20)]
    recover_replacements(ledger, {"s1": _noted("s1", "h00", 30)})

    assert _replacements(ledger) == [("s1", format_time(at(30))), (None, None)]


def test_entries_whose_replacements_are_on_record_keep_them() -> None:
    ledger = [_entry(1, "h00", 10, by="s2", when=40), _entry(2, "h00", 20, by="s1", when=30)]
    before = _replacements(ledger)
    recover_replacements(ledger, {"s1": _noted("s1", "h00", 30), "s2": _noted("s2", "h00", 40)})

    assert _replacements(ledger) == before


def test_a_handed_on_failure_still_takes_the_newer_note() -> None:
    # s1 replaced h00 at 30, fell ill and was swapped for s2 at 40 (its note cleared);
    # the status write naming s2 was lost.
    ledger = [_entry(1, "h00", 10, by="s1", when=30)]
    recover_replacements(ledger, {"s2": _noted("s2", "h00", 40)})

    assert _replacements(ledger) == [("s2", format_time(at(40)))]
