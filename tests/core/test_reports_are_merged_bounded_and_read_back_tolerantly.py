"""The report record on the job: latest checkpoint and progress, bounded firsts, tokens."""

from __future__ import annotations

import json

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
