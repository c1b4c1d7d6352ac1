"""The report record on the job: latest checkpoint and progress, bounded firsts, tokens."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from phased.core.reports import (
    MAX_FIRSTS,
    Report,
    ReportKind,
    ReportStore,
    decode,
    encode,
    merge,
    report_token,
    superseded,
    token_matches,
)
from tests.core.builders import at


def _r(kind: ReportKind, step: int, seconds: float, generation: int = 0, attempt: int = 0):
    return Report(
        kind=kind,
        phase="train",
        generation=generation,
        attempt=attempt,
        rank=0,
        step=step,
        time=at(seconds),
        path="/c" if kind == ReportKind.CHECKPOINT else "",
    )


def test_progress_is_the_latest_report_and_checkpoint_the_latest_checkpoint():
    store = ReportStore()
    store = merge(store, _r(ReportKind.CHECKPOINT, 100, 0))
    store = merge(store, _r(ReportKind.PROGRESS, 150, 10))
    assert store.checkpoint is not None and store.checkpoint.step == 100
    assert store.progress is not None and store.progress.step == 150


def test_firsts_keep_the_first_report_of_each_generation_and_stay_bounded():
    store = ReportStore()
    for generation in range(MAX_FIRSTS + 4):
        for k in range(3):
            store = merge(store, _r(ReportKind.PROGRESS, k, generation * 10 + k, generation))
    assert len(store.firsts) == MAX_FIRSTS
    assert [r.generation for r in store.firsts] == list(range(4, MAX_FIRSTS + 4))
    assert all(r.step == 0 for r in store.firsts)  # the first of each, not the latest


def test_first_since_takes_later_generations_or_replacements_only():
    store = ReportStore()
    for report in (
        _r(ReportKind.PROGRESS, 1, 5, generation=0),  # a survivor of the failed generation
        _r(ReportKind.PROGRESS, 1, 7, generation=0, attempt=1),  # a replacement rank
        _r(ReportKind.PROGRESS, 1, 9, generation=1),
    ):
        store = merge(store, report)
    assert store.first_since("train", at(0), 0).time == at(7)
    assert store.first_since("train", at(8), 0).time == at(9)
    assert store.first_since("train", at(0), 1) is None
    assert store.first_since("validate", at(0), None) is None


def test_a_replaced_generation_never_overwrites_what_its_successor_reported():
    # Generation 0 was replaced by 1 (its worker on a silent node ran on); 1 resumed from
    # step 100 and reported 105. Generation 0's later step 120 is not the run's latest.
    store = ReportStore()
    for report in (
        _r(ReportKind.CHECKPOINT, 100, 0, generation=0),
        _r(ReportKind.CHECKPOINT, 105, 10, generation=1),
        _r(ReportKind.CHECKPOINT, 120, 11, generation=0),
        _r(ReportKind.PROGRESS, 121, 12, generation=0),
    ):
        store = merge(store, report)
    assert store.checkpoint is not None and (
        store.checkpoint.step,
        store.checkpoint.generation,
    ) == (105, 1)
    assert store.progress is not None and store.progress.generation == 1
    # A later generation, or another phase, replaces as before.
    later = merge(store, _r(ReportKind.CHECKPOINT, 110, 13, generation=2))
    assert later.checkpoint is not None and later.checkpoint.step == 110
    other = replace(_r(ReportKind.CHECKPOINT, 5, 14, generation=0), phase="validate")
    assert merge(store, other).checkpoint == other


@pytest.mark.parametrize(
    ("phase", "generation", "current_phase", "current_generation", "refused"),
    [
        ("train", 0, "train", 1, True),  # the gang restart replaced generation 0
        ("train", 2, "train", 5, True),
        ("train", 1, "train", 1, False),  # the current generation
        ("train", 2, "train", 1, False),  # ahead of a status not yet written
        ("prep", 0, "train", 1, False),  # another phase's late report: its own record
        ("train", 0, None, 0, False),  # no phase started yet
    ],
)
def test_only_a_replaced_generation_of_the_current_phase_is_superseded(
    phase, generation, current_phase, current_generation, refused
):
    report = replace(_r(ReportKind.CHECKPOINT, 7, 0, generation=generation), phase=phase)
    why = superseded(report, current_phase, current_generation)
    assert (why is not None) == refused
    if why:
        assert f"generation {generation}" in why and f"generation {current_generation}" in why


@pytest.mark.parametrize(
    ("generation", "attempt", "current_generation", "newest", "refused"),
    [
        (1, 0, 1, 1, True),  # rank 0 was replaced on its own: attempt 1 runs elsewhere
        (1, 1, 1, 3, True),
        (1, 1, 1, 1, False),  # the replacement itself
        (1, 2, 1, 1, False),  # a replacement the pod list has not caught up with
        (1, 0, 1, None, False),  # not looked up (a gang-scoped job)
        (1, 0, 1, 0, False),
        (2, 0, 1, 5, False),  # ahead of the status: not judged by the older pods
        (0, 3, 1, 0, True),  # an older generation, whatever its attempt
    ],
)
def test_a_rank_replaced_on_its_own_supersedes_its_older_attempts(
    generation, attempt, current_generation, newest, refused
):
    report = _r(ReportKind.CHECKPOINT, 7, 0, generation=generation, attempt=attempt)
    why = superseded(report, "train", current_generation, newest_attempt=newest)
    assert (why is not None) == refused
    if why and generation == current_generation:
        assert f"rank 0 attempt {attempt}" in why and f"replaced by attempt {newest}" in why


def test_the_record_round_trips_through_the_annotation():
    store = ReportStore()
    for report in (_r(ReportKind.CHECKPOINT, 5, 1), _r(ReportKind.PROGRESS, 6, 2, 1)):
        store = merge(store, report)
    assert decode(encode(store)) == store


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not json",
        "[]",
        json.dumps({"checkpoint": {"kind": "checkpoint", "step": -1}}),
        json.dumps({"checkpoint": {"kind": "nap", "phase": "t", "time": "2026-01-01T00:00:00Z"}}),
        json.dumps({"firsts": "many", "progress": 7}),
    ],
)
def test_an_edited_or_broken_annotation_reads_as_no_reports(text):
    store = decode(text)
    assert store.checkpoint is None and store.progress is None and store.firsts == ()


def test_tokens_are_per_job_and_checked_in_constant_time():
    key = b"k" * 32
    token = report_token(key, "ml", "llm", "uid-1")
    assert token_matches(key, "ml", "llm", "uid-1", token)
    assert not token_matches(key, "ml", "llm", "uid-2", token)  # a namesake job
    assert not token_matches(key, "ml", "other", "uid-1", token)
    assert not token_matches(b"x" * 32, "ml", "llm", "uid-1", token)  # another operator key
