"""Two nodes going dark a moment apart (a rack's switch, a power feed): the first one's grace
runs out first, its answer restarts the gang, and the second, still within its grace, trades
places with a spare before the new generation is made (``TroubledNodeSwapped``). When its
grace runs out too it fails as a spare, interrupting nothing more — and its ledger entry
names the spare that took its place, as the first one's does, whichever pass saw which
failure. The spare's ``phased.dev/replaces`` note says whose place it took while that node
was in trouble, so a status write lost after the failure names it again; the note answers
that trouble only: not an earlier failure of the node that had ended before the swap, nor a
later one once the node has come back. Before, the second entry had no replacement: seen in
the same pass the two failures named one each, a pass apart only the first did."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from phased.api.v1alpha1 import FailureRecord, NodeRole
from phased.core import labels
from phased.core.ledger import decode_replaces, encode_replaces, recover_replacements
from phased.core.model import NodeInfo
from phased.core.times import format_time, parse_time
from tests.core.builders import Cluster, at, node, nodes, owned, phase, spec, with_ready

GRACE = 10.0


def _running() -> Cluster:
    c = Cluster(
        spec(
            phase("train", 4, 4),
            spares=2,
            failurePolicy={"notReadyGrace": f"{GRACE:g}s", "massFailure": {"maxFailedPercent": 50}},
        ),
        {n.name: n for n in nodes("n", 6)},
    )
    c.settle()
    assert len(c.running()) == 4 and len(c.held(NodeRole.SPARE)) == 2
    return c


def _dark(c: Cluster, names: list[str], apart: float) -> None:
    """The nodes go NotReady ``apart`` seconds one after the other, from now."""
    for i, name in enumerate(names):
        c.nodes[name] = with_ready(c.nodes[name], False, c.now + timedelta(seconds=i * apart))


@pytest.mark.parametrize("apart", [0.0, 0.05, 2.0, GRACE - 0.5])
def test_each_of_two_nodes_going_dark_a_moment_apart_names_its_own_replacement(
    apart: float,
) -> None:
    c = _running()
    victims = c.held(NodeRole.ACTIVE)[:2]
    spares = c.held(NodeRole.SPARE)
    _dark(c, victims, apart)
    c.advance(GRACE + 0.01)  # the first one's grace has run out, the second's not (unless 0)
    c.step()
    c.advance(apart + 0.1)
    for plan in c.settle():
        # No status written on the way says a failure resumed without its replacement.
        assert all(e.replaced_by for e in plan.status.failures if e.resumed), plan.status

    ledger = c.status.failures
    assert [e.node for e in ledger] == victims
    assert sorted(e.replaced_by or "" for e in ledger) == spares
    assert set(spares) <= set(c.held(NodeRole.ACTIVE))
    assert {p.node_name for p in c.running()} == set(c.held(NodeRole.ACTIVE))
    for e in ledger:
        detected, replaced, cordoned = (parse_time(t) for t in (e.detected, e.replaced, e.cordoned))
        assert e.resumed is not None and detected and replaced and cordoned
        assert detected <= replaced <= cordoned
    # The restart interrupted the gang once, charged to the first failure only.
    first, second = ledger
    assert first.interruption_seconds is not None and first.interruption_seconds > GRACE
    if apart:
        assert second.interruption_seconds == 0.0 and second.resumed == second.detected


def test_a_status_write_lost_after_the_second_failure_names_its_replacement_again() -> None:
    c = _running()
    victims = c.held(NodeRole.ACTIVE)[:2]
    _dark(c, victims, 0.05)
    c.advance(GRACE + 0.01)
    c.step()
    c.settle()
    written = c.status
    c.advance(0.2)
    c.step()  # the second failure: quarantined; the status write saying so is lost
    assert len(c.status.failures) == 2
    named = c.status.failures[1].replaced_by
    assert named is not None
    c.status = written
    c.advance(1)
    c.settle()

    assert [e.node for e in c.status.failures] == victims
    assert c.status.failures[1].replaced_by == named


def _noted(name: str, lost: str, when: float, troubled: bool) -> NodeInfo:
    n = owned(node(name), NodeRole.ACTIVE)
    note = encode_replaces(lost, at(when), troubled)
    return replace(n, annotations={**n.annotations, labels.ANNOTATION_REPLACES: note})


def _entry(detected: float, cordoned: float, resumed: float | None = None) -> FailureRecord:
    return FailureRecord(
        id=1,
        node="h00",
        reason="NodeNotReady",
        detected=format_time(at(detected)),
        cordoned=format_time(at(cordoned)),
        resumed=format_time(at(resumed)) if resumed is not None else None,
    )


@pytest.mark.parametrize(
    ("entry", "answers"),
    [
        # in trouble at the swap (100), failed as a spare after it: this trouble
        (_entry(95, 105, resumed=95), True),
        # a spare's failure long before, ended: the node had come back, then the swap
        (_entry(10, 20, resumed=10), False),
        # an active's failure answered before the swap, still open: not this note's
        (_entry(90, 95), False),
        # a trouble that began after the swap: the node had come back since
        (_entry(110, 120, resumed=110), False),
    ],
)
def test_a_troubled_note_answers_only_the_failure_of_the_trouble_it_was_written_in(
    entry: FailureRecord, answers: bool
) -> None:
    ledger = [entry]
    recover_replacements(ledger, {"s1": _noted("s1", "h00", 100, troubled=True)})

    assert ledger[0].replaced_by == ("s1" if answers else None)


def test_a_failure_note_still_answers_an_entry_resumed_before_it_was_read() -> None:
    # A failure answered before its phase started is resumed at detection in the pass
    # that claims its replacement, cordoned passes before; its note is read a pass later.
    ledger = [_entry(10, 20, resumed=10)]
    recover_replacements(ledger, {"s1": _noted("s1", "h00", 100, troubled=False)})

    assert ledger[0].replaced_by == "s1"


def test_the_note_says_whether_the_node_whose_place_it_took_was_in_trouble_or_failed() -> None:
    for troubled in (False, True):
        note = decode_replaces(encode_replaces("h00", at(5), troubled))
        assert note is not None
        assert (note.node, note.at, note.troubled) == ("h00", at(5), troubled)
    # A word this operator does not know is no note it can read, not a failed node's.
    assert decode_replaces(f"h00 {format_time(at(5))} elsewhere") is None
