"""Checkpoint and progress reports from workers: the record kept on the TrainingJob, and the
token that authenticates them.

A worker reports to the operator's report endpoint (:mod:`phased.endpoint`) with the job's
bearer token. The endpoint writes the report into the job's ``ANNOTATION_REPORTS`` annotation
*before* it answers, so a report that was acknowledged is in the cluster even if the operator
dies the next instant; decide reads the annotation back from the snapshot and folds it into
the status (:mod:`phased.core.checkpoints`). The reconciler never writes this annotation and
the endpoint never writes the status, so neither overwrites the other.

The record is small and bounded: the latest checkpoint, the latest report of any kind
(progress), and the first report of each of the last ``MAX_FIRSTS`` (phase, generation,
attempt) — the ledger's ``resumed`` is the first report of a generation started after the
failure. JSON, e.g.::

    {"checkpoint": {"kind": "checkpoint", "phase": "train", "generation": 1, "attempt": 0,
                    "rank": 0, "step": 1200, "path": "/checkpoints/llm/train/step-1200",
                    "final": false, "time": "2026-01-02T03:04:05Z"},
     "progress": {...}, "firsts": [{...}, ...]}

The token of a job is ``HMAC-SHA256(key, "<namespace>/<name>/<uid>")`` with the operator's
report key: the operator recomputes it to check a report, so it never reads a Secret back and
needs no ``get`` on Secrets anywhere (see docs/design.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from phased.core.labels import PREFIX
from phased.core.times import format_time, parse_time

ANNOTATION_REPORTS = f"{PREFIX}/reports"
MAX_FIRSTS = 16


class ReportKind(StrEnum):
    CHECKPOINT = "checkpoint"  # a checkpoint is complete on the volume
    PROGRESS = "progress"  # training reached a step (no checkpoint)


class Superseded(Exception):
    """A report refused because its workers were replaced (see :func:`superseded`)."""


@dataclass(frozen=True)
class Report:
    """One report, as the endpoint accepted it (``time``: when the operator received it)."""

    kind: ReportKind
    phase: str
    generation: int
    attempt: int
    rank: int
    step: int
    time: datetime
    path: str = ""
    final: bool = False

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.phase, self.generation, self.attempt)


@dataclass(frozen=True)
class ReportStore:
    checkpoint: Report | None = None  # the latest checkpoint
    progress: Report | None = None  # the latest report of any kind
    firsts: tuple[Report, ...] = ()  # the first report of each (phase, generation, attempt)

    def first_since(self, phase: str, since: datetime, generation: int | None) -> Report | None:
        """The earliest report of ``phase`` received at or after ``since`` from a worker
        started after a failure in ``generation``: a later generation, or a replacement
        (attempt > 0) in the same one. ``generation`` None: any worker."""
        found = [
            r
            for r in self.firsts
            if r.phase == phase
            and r.time >= since
            and (
                generation is None
                or r.generation > generation
                or (r.generation == generation and r.attempt > 0)
            )
        ]
        return min(found, key=lambda r: r.time) if found else None


def _older_lineage(report: Report, kept: Report | None) -> bool:
    """``report`` comes from a generation of ``kept``'s phase that a later one replaced."""
    return kept is not None and kept.phase == report.phase and report.generation < kept.generation


def merge(store: ReportStore, report: Report) -> ReportStore:
    """The record after ``report``: latest checkpoint and progress, first of its generation.

    A report of an older generation of the same phase than the one kept never replaces it:
    once a new generation has reported, what the old one writes is not its lineage (the
    endpoint refuses such reports already, :func:`superseded`; this holds for one that got in
    before the status said so)."""
    firsts = store.firsts
    if all(r.key != report.key for r in firsts):
        firsts = (*firsts, report)[-MAX_FIRSTS:]
    checkpoint = store.checkpoint
    if report.kind == ReportKind.CHECKPOINT and not _older_lineage(report, checkpoint):
        checkpoint = report
    progress = store.progress if _older_lineage(report, store.progress) else report
    return replace(store, checkpoint=checkpoint, progress=progress, firsts=firsts)


def superseded(
    report: Report, phase: str | None, generation: int, newest_attempt: int | None = None
) -> str | None:
    """Why ``report`` comes from workers Phased has already replaced, or None.

    ``phase`` and ``generation`` are the job's current phase and restart generation (its
    status). A report of the current phase from an older generation is from a worker the
    gang restart left behind — typically one on a silent node, whose container runs on until
    its kubelet is back: the checkpoints belong to the new generation now, and the endpoint
    refuses the report (the helper raises ``Superseded``) so the old worker stops instead of
    overwriting or pruning them. Reports of another phase are not judged here (a late final
    checkpoint of a phase just ended is harmless: each phase checkpoints to its own
    directory and keeps its own record).

    A rank replaced on its own (``restartScope: Worker``) keeps its generation and gets the
    next attempt: ``newest_attempt`` is the highest attempt among the worker pods of the
    report's rank in the current phase and generation (None: not looked up). A report of an
    older attempt of that rank is from the worker the replacement left behind, refused alike.
    """
    if phase is None or report.phase != phase or report.generation > generation:
        return None
    if report.generation < generation:
        return (
            f"generation {report.generation} of phase {phase} was replaced by generation "
            f"{generation}: stop, the checkpoints belong to the new generation"
        )
    if newest_attempt is not None and report.attempt < newest_attempt:
        return (
            f"rank {report.rank} attempt {report.attempt} of phase {phase} (generation "
            f"{generation}) was replaced by attempt {newest_attempt}: stop, the rank runs "
            "elsewhere now"
        )
    return None


def _report_data(report: Report) -> dict[str, Any]:
    return {
        "kind": report.kind.value,
        "phase": report.phase,
        "generation": report.generation,
        "attempt": report.attempt,
        "rank": report.rank,
        "step": report.step,
        "path": report.path,
        "final": report.final,
        "time": format_time(report.time),
    }


def encode(store: ReportStore) -> str:
    data: dict[str, Any] = {"firsts": [_report_data(r) for r in store.firsts]}
    if store.checkpoint is not None:
        data["checkpoint"] = _report_data(store.checkpoint)
    if store.progress is not None:
        data["progress"] = _report_data(store.progress)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _report(data: Any) -> Report | None:
    if not isinstance(data, dict):
        return None
    try:
        kind = ReportKind(str(data.get("kind")))
    except ValueError:
        return None
    time = parse_time(data.get("time") if isinstance(data.get("time"), str) else None)
    numbers = [_int(data.get(k)) for k in ("generation", "attempt", "rank", "step")]
    phase, path = data.get("phase"), data.get("path", "")
    if time is None or not isinstance(phase, str) or not isinstance(path, str):
        return None
    generation, attempt, rank, step = numbers
    if generation is None or attempt is None or rank is None or step is None:
        return None
    return Report(
        kind=kind,
        phase=phase,
        generation=generation,
        attempt=attempt,
        rank=rank,
        step=step,
        time=time,
        path=path,
        final=data.get("final") is True,
    )


def decode(text: str | None) -> ReportStore:
    """The record in an annotation value; anything unreadable is left out (never an error:
    the annotation is on an object people may edit)."""
    if not text:
        return ReportStore()
    try:
        data = json.loads(text)
    except ValueError:
        return ReportStore()
    if not isinstance(data, dict):
        return ReportStore()
    raw_firsts = data.get("firsts")
    firsts = tuple(
        r for r in (_report(x) for x in (raw_firsts if isinstance(raw_firsts, list) else [])) if r
    )
    return ReportStore(
        checkpoint=_report(data.get("checkpoint")),
        progress=_report(data.get("progress")),
        firsts=firsts[-MAX_FIRSTS:],
    )


def report_token(key: bytes, namespace: str, name: str, uid: str) -> str:
    """The bearer token of one job (hex); a job recreated under the same name gets another."""
    message = f"{namespace}/{name}/{uid}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def token_matches(key: bytes, namespace: str, name: str, uid: str, presented: str) -> bool:
    return hmac.compare_digest(report_token(key, namespace, name, uid), presented)
