"""The checkpoint contract: storage, reports folded into the status, staleness, the final
checkpoint at a phase boundary, what a new generation resumes from, and lost work.

Every function here reads the :class:`~phased.core.draft.Draft` and the reports in its
snapshot and changes only the draft (status, conditions, events, wake-ups); none does I/O.

* **Storage** (:func:`prepare`): with ``checkpoint.volume.size`` an ``EnsureClaim``; with
  ``checkpoint.report`` an ``EnsureSecret`` holding the job's token — each until this
  operator has ensured it once (an AlreadyExists counts).
* **Reports** (:func:`fold_reports`): the latest checkpoint and progress of each phase go into
  ``status.phases[].lastCheckpoint`` / ``lastProgress``; a report for a phase the spec no
  longer has is ignored.
* **Staleness** (:func:`check_staleness`): while the phase's workers run, a checkpoint is due
  within the interval they were told (``checkpoint.interval`` when they were made, read back
  from each worker, :func:`_told_interval`) of the phase's last one (or of its start, or of
  a restarted generation's start, :func:`_due_from`): past that, ``CheckpointStale`` is True
  with a Warning event, and decide is woken when the next one falls due.
  Recovering (no Running worker) leaves the condition as it is.
* **Final checkpoint** (:func:`final_checkpoint_due`): when the workers meet the phase's
  completion rule, the boundary waits until the current generation reported a checkpoint
  with ``final: true``, at most ``checkpoint.finalTimeout`` from when the completion was first
  seen (``completedWorkersAt``); then it goes on with a ``FinalCheckpointMissing`` Warning.
* **Resume** (:func:`resume_point`): workers created for a phase that has a reported
  checkpoint get ``PHASED_RESUME_FROM`` / ``PHASED_RESUME_STEP``.
* **Ledger** (:func:`lost_work`, :func:`resumed_at`): a failure interrupting workers records
  the step the next generation resumes from (the last checkpoint, even one reported after
  detection while the other workers went on) and the training time from that checkpoint to
  detection (from the phase start when there is none; 0 when it came after detection) —
  and when the workers that answer it are created (:func:`answered`), the step they are
  told and the lost work to it, for the stopped survivors may checkpoint once more in their
  grace; it is resumed by the first report of a worker started after it (a later
  generation, or a replacement rank).

All of it applies only with ``checkpoint.report: true``, except storage and resume, which
need no reports to work (resume does: without reports no checkpoint is known). Staleness,
the final checkpoint, ``resumed`` by report and lost work apply only while the running
generation's workers were all made to report (:func:`judged`): ``checkpoint.report`` turned
on while they run is judged from the next generation, turned off no longer at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from phased.api.durations import format_duration, parse_duration
from phased.api.v1alpha1 import CheckpointRecord, FailureRecord, ProgressRecord
from phased.core import labels
from phased.core.conditions import ConditionType, find
from phased.core.draft import NORMAL, WARNING, Draft
from phased.core.model import EnsureClaim, EnsureSecret, PodPhase
from phased.core.phases import generation_pods, interrupted_generation, latest_attempts, live
from phased.core.reports import Report
from phased.core.storage import (
    claim_manifest,
    claim_name,
    report_secret_manifest,
    report_secret_name,
)
from phased.core.times import format_time, parse_time, shifted


def reporting(draft: Draft) -> bool:
    """The spec asks for reports: new workers are made to report."""
    return draft.spec.checkpoint.report


def judged(draft: Draft) -> bool:
    """Reports are expected of the running generation, so the rules that wait for them
    apply: staleness, the final checkpoint, ``resumed`` by report and lost work.

    The spec asks for them, and every worker of the generation (the newest attempt of each
    rank) was made to report (``LABEL_REPORTING``). A job whose ``checkpoint.report`` was
    turned on while its workers ran is judged from its next generation on (a rank replaced
    alone meanwhile does not make its peers report); one turned off is no longer judged, its
    workers' reports are still recorded. A worker made before the label existed is taken as
    the spec says."""
    if not reporting(draft):
        return False
    pods = latest_attempts(live(generation_pods(draft)))
    return all(p.labels.get(labels.LABEL_REPORTING, "true") == "true" for p in pods)


def prepare(draft: Draft) -> None:
    """Ensure the checkpoint claim and the report Secret before any worker needs them."""
    volume = draft.spec.checkpoint.volume
    if volume is not None and not draft.snap.claim_exists:
        manifest = claim_manifest(draft.snap.job, volume)
        if manifest is not None:
            draft.act(EnsureClaim(manifest=manifest))
    token = draft.snap.report_token
    if reporting(draft) and token is not None and not draft.snap.report_secret_exists:
        draft.act(EnsureSecret(manifest=report_secret_manifest(draft.snap.job, token)))


def worker_options(draft: Draft) -> dict[str, Any]:
    """The checkpoint fields of a new worker of the current phase (see ``Worker``)."""
    volume = draft.spec.checkpoint.volume
    report = reporting(draft) and draft.snap.report_token is not None
    return {
        "claim": claim_name(draft.snap.job, volume) if volume is not None else None,
        "report_url": draft.settings.reports.url if report else None,
        "report_secret": report_secret_name(draft.snap.job) if report else None,
        "resume": resume_point(draft),
    }


# --- reports into the status -----------------------------------------------------------------


def _newer(
    report: Report | None, phase: str, record: CheckpointRecord | ProgressRecord | None
) -> bool:
    """``report`` is of ``phase`` and newer than what its record holds."""
    if report is None or report.phase != phase:
        return False
    known = parse_time(record.time) if record is not None else None
    return known is None or report.time > known


def fold_reports(draft: Draft) -> None:
    """Copy the latest checkpoint and progress reports into their phases' records."""
    store = draft.snap.reports
    for i, record in enumerate(draft.records):
        update: dict[str, Any] = {}
        ckpt = store.checkpoint
        last = record.last_checkpoint
        if ckpt is not None and _newer(ckpt, record.name, last):
            update["last_checkpoint"] = CheckpointRecord(
                step=ckpt.step,
                time=format_time(ckpt.time),
                path=ckpt.path,
                generation=ckpt.generation,
                final=ckpt.final,
            )
        prog = store.progress
        seen = record.last_progress
        if prog is not None and _newer(prog, record.name, seen):
            update["last_progress"] = ProgressRecord(
                step=prog.step, time=format_time(prog.time), generation=prog.generation
            )
        if update:
            draft.records[i] = record.model_copy(update=update)


def resume_point(draft: Draft) -> CheckpointRecord | None:
    return draft.record.last_checkpoint


# --- staleness and the final checkpoint ------------------------------------------------------


def check_staleness(draft: Draft) -> None:
    if not judged(draft):
        _not_judged(draft)
        return
    running = [p for p in live(generation_pods(draft)) if p.phase == PodPhase.RUNNING]
    if not running:
        return
    interval, told = _told_interval(draft)
    since, what = _due_from(draft)
    if since is None:
        return
    age = (draft.now - since).total_seconds()
    if age <= interval:
        draft.condition(ConditionType.CHECKPOINT_STALE, False, "Recent", "")
        draft.later(interval - age + 0.5)
        return
    message = (
        f"phase {draft.phase.name}: no checkpoint reported for {format_duration(age)} since "
        f"{what}; {told}"
    )
    draft.condition(ConditionType.CHECKPOINT_STALE, True, "NoRecentCheckpoint", message, WARNING)


def _told_interval(draft: Draft) -> tuple[int, str]:
    """The checkpoint interval the running generation is judged by, in seconds, and how to
    say it: the one its workers were told when they were made (``LABEL_CHECKPOINT_INTERVAL``,
    the longest if ranks differ), not ``checkpoint.interval`` as edited since — they
    checkpoint at what they were told until the next generation is made from the edit. A
    worker made before the label existed (or with a label Phased could not have written) is
    taken as the spec says."""
    spec = parse_duration(draft.spec.checkpoint.interval)
    told: list[int] = []
    for p in latest_attempts(live(generation_pods(draft))):
        text = p.labels.get(labels.LABEL_CHECKPOINT_INTERVAL, "")
        told.append(int(text) if text.isdigit() and int(text) > 0 else spec)
    interval = max(told, default=spec)
    if interval == spec:
        return interval, f"checkpoint.interval is {draft.spec.checkpoint.interval}"
    return interval, (
        f"its workers were made with checkpoint.interval {format_duration(interval)} "
        f"(the spec's {draft.spec.checkpoint.interval} applies from the next generation)"
    )


def _due_from(draft: Draft) -> tuple[datetime | None, str]:
    """What the next checkpoint is due an interval after, and how to say it: the phase's last
    checkpoint; without one, the phase start, or for a restarted generation its own start
    (its first worker's creation): with nothing to resume from it begins the phase's work
    afresh, so a generation restarted — or the first made to report once
    ``checkpoint.report`` was turned on while the phase ran — is not stale at its start.

    A generation restarted after the last checkpoint (made by an earlier one) resumes from
    it and does again the work since: its own first checkpoint is due an interval after it
    began, not after the checkpoint. Judged from the checkpoint, a gang restarted 55
    minutes into an hourly interval was stale five minutes after it began."""
    gen = draft.status.restart_generation
    created = [p.created for p in generation_pods(draft) if p.created is not None]
    began = min(created) if created and gen > 0 else None
    last = draft.record.last_checkpoint
    if last is not None and (when := parse_time(last.time)) is not None:
        if began is not None and last.generation < gen and began > when:
            return began, f"the start of generation {gen} (resumed from step {last.step})"
        return when, f"the last one (step {last.step})"
    phase_start = parse_time(draft.record.start_time)
    if began is not None and (phase_start is None or began > phase_start):
        return began, f"the start of generation {gen}"
    return phase_start, "the phase start"


def _not_judged(draft: Draft) -> None:
    """No staleness for workers that cannot report, nor once the spec stopped asking: a
    ``CheckpointStale`` condition says so (False, ``NotReporting``)."""
    if reporting(draft):
        message = (
            f"phase {draft.phase.name}: workers of generation {draft.status.restart_generation} "
            "were created before checkpoint.report was turned on and cannot report; "
            "checkpoints are judged from the next generation"
        )
    elif find(draft.conditions, ConditionType.CHECKPOINT_STALE) is not None:
        message = "checkpoint.report is off: checkpoints are not judged"
    else:
        return  # a job that never reported has no such condition
    draft.condition(ConditionType.CHECKPOINT_STALE, False, "NotReporting", message)


def final_checkpoint_due(draft: Draft) -> bool:
    """The workers met the completion rule: True while the boundary waits for their final
    checkpoint (see the module docstring)."""
    if not judged(draft):
        return False
    last = draft.record.last_checkpoint
    if last is not None and last.final and last.generation == draft.status.restart_generation:
        return False
    seen = parse_time(draft.record.completed_workers_at)
    if seen is None:
        draft.update_record(completed_workers_at=format_time(draft.now))
        draft.event(
            NORMAL,
            "WaitingForFinalCheckpoint",
            f"phase {draft.phase.name}: workers done; waiting up to "
            f"{draft.spec.checkpoint.final_timeout} for their final checkpoint report",
        )
        seen = draft.now
    deadline = shifted(seen, parse_duration(draft.spec.checkpoint.final_timeout))
    if deadline > draft.now:
        draft.later((deadline - draft.now).total_seconds())
        draft.awaiting_final = True
        return True
    draft.event(
        WARNING,
        "FinalCheckpointMissing",
        f"phase {draft.phase.name}: no final checkpoint reported within "
        f"{draft.spec.checkpoint.final_timeout}; going on",
    )
    return False


# --- the ledger ------------------------------------------------------------------------------


def lost_work(draft: Draft, detected: datetime) -> dict[str, Any]:
    """Ledger fields of a failure that interrupts the workers: its generation, and with
    reports the step the next generation resumes from (:func:`resume_point`, whenever it was
    reported: a silent node is found only after the node monitor grace, and the other
    workers may checkpoint meanwhile) and the lost work, from that checkpoint (or the phase
    start) to detection, 0 when the checkpoint came after it — less what the phase's earlier
    entries count (:func:`_lost_since`)."""
    fields: dict[str, Any] = {"generation": interrupted_generation(draft.status)}
    if not judged(draft):
        return fields
    return fields | _lost_since(draft, detected, resume_point(draft), len(draft.ledger))


def _lost_since(
    draft: Draft, detected: datetime, last: CheckpointRecord | None, before: int
) -> dict[str, Any]:
    """The resume step and lost work of a failure detected at ``detected``, resumed from
    ``last`` (see :func:`lost_work`), the ``before`` entries of the ledger ahead of it.

    Each stretch of training is lost once: the work is counted from the checkpoint, or from
    the latest resume (or, while open, detection) of an earlier entry of the phase that
    counts lost work, whichever is later. Two nodes failing together stop the gang once,
    and the restart redoes the work since the checkpoint once; before, each entry counted
    it, and ``phased_job_lost_work_seconds_total`` twice what was lost."""
    fields: dict[str, Any] = {}
    since: datetime | None = parse_time(draft.record.start_time)
    if last is not None:
        fields["resume_step"] = last.step
        since = parse_time(last.time) or since
    for earlier in draft.ledger[:before]:
        if earlier.phase != draft.phase.name or earlier.lost_work_seconds is None:
            continue
        counted = parse_time(earlier.resumed) or parse_time(earlier.detected)
        if counted is not None and counted <= detected and (since is None or counted > since):
            since = counted
    if since is not None:
        fields["lost_work_seconds"] = round(max(0.0, (detected - since).total_seconds()), 3)
    return fields


def answered(draft: Draft, generation: int, *, gang: bool) -> None:
    """Workers of ``generation`` are being created: the open failures they answer take the
    step these workers are told to resume from, and the lost work to that checkpoint.

    A gang restart (``gang``) answers the phase's open failures of every earlier generation;
    a rank replaced alone, those of its own. What the failure's pass recorded was the last
    checkpoint then; the survivors it stopped may report one more in their termination
    grace, and the new generation, created once they are gone, resumes from that one — the
    ledger said ``resumeStep`` 130 while the workers were told 140. An entry already resumed
    keeps what it has; one recorded without reports (or whose worker had succeeded: no lost
    work) has no step to take."""
    last = resume_point(draft)
    for i, _, gen in _open_entries(draft):
        if gen < generation if gang else gen == generation:
            _take_step(draft, i, last)


def recover_told(draft: Draft) -> None:
    """The open failures of the phase take the step the later generation answering them
    carries on its workers (``LABEL_RESUME_STEP``, what they were told): a status write lost
    after their creates landed left the entry with the step of the failure's pass. The lost
    work follows when that step is the phase's last checkpoint (its time is known); a
    generation told no step (none was reported) leaves the entry as it is."""
    pods = draft.phase_pods()
    for i, entry, gen in _open_entries(draft):
        later = [p for p in pods if p.generation > gen]
        if not later:
            continue
        first = min(p.generation for p in later)
        told = (p.labels.get(labels.LABEL_RESUME_STEP, "") for p in later if p.generation == first)
        steps = sorted(int(t) for t in told if t.isdigit())
        if not steps or steps[0] == entry.resume_step:
            continue
        last = resume_point(draft)
        if last is not None and last.step == steps[0]:
            _take_step(draft, i, last)
        else:
            draft.ledger[i] = entry.model_copy(update={"resume_step": steps[0]})


def _open_entries(draft: Draft) -> list[tuple[int, FailureRecord, int]]:
    """The ledger entries of the running phase that interrupted workers whose step is still
    to be taken — answered (cordoned), not resumed, recorded with reports judged (a resume
    step or lost work; an entry whose worker had succeeded has neither) — with their index
    and the generation they interrupted."""
    if not judged(draft):
        return []
    return [
        (i, e, e.generation)
        for i, e in enumerate(draft.ledger)
        if e.resumed is None
        and e.cordoned is not None
        and e.phase == draft.phase.name
        and e.generation is not None
        and (e.lost_work_seconds, e.resume_step) != (None, None)
    ]


def _take_step(draft: Draft, i: int, last: CheckpointRecord | None) -> None:
    entry = draft.ledger[i]
    detected = parse_time(entry.detected)
    if detected is None:
        return
    fields = _lost_since(draft, detected, last, i)
    if any(getattr(entry, k) != v for k, v in fields.items()):
        draft.ledger[i] = entry.model_copy(update=fields)


def resumed_at(draft: Draft, entry: FailureRecord) -> datetime | None:
    """With reports: when training resumed after ``entry`` (None: not yet)."""
    cordoned = parse_time(entry.cordoned)
    if cordoned is None:
        return None
    first = draft.snap.reports.first_since(entry.phase, cordoned, entry.generation)
    return first.time if first is not None else None
