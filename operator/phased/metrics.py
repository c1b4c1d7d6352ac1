"""Every Prometheus metric Phased exports, defined in this one module.

Nothing is created or registered at import time: the operator calls ``Metrics.create`` with a
registry at start-up (and tests call it with a fresh ``CollectorRegistry`` each).

Conventions: one ``phased_`` prefix; base units (seconds, ratios 0-1; GPU time is counted in
GPU-seconds); counters end in ``_total``, durations in ``_seconds``. Labels are bounded:
``namespace``, ``trainingjob`` (the job's name), ``phase`` (at most 8 per job), ``role``
(active/spare/quarantined), ``gpu_type`` (the accelerator types, ``none`` or ``other``),
``reason`` (the failure reasons or ``Other``), ``state`` (the job states), ``verb`` and
``resource``, ``kind`` and ``result`` (of a checkpoint report). Never a pod, node or UID:
those grow without bound over a 100-day run. The job's label is ``trainingjob``, not
``job``: Prometheus gives every scraped series a ``job`` label of its own (the scrape job)
and would rename ours to ``exported_job``.

Two kinds of per-job series:

- figures the status already holds (pool sizes, GPU-seconds, cost, interruption time, phase
  durations) are read from the last status seen, at scrape time, by a collector. Cumulative
  ones are counters whose value is the status's own running total, so they survive an
  operator restart and drop their old phase's series as soon as the job moves on;
- events (a new ledger entry, a recovery completed, a restart) are counted in-process,
  exactly once per ledger entry or restart, however often ``observe_job`` is called.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from phased.api.v1alpha1 import (
    FailureReason,
    FailureRecord,
    GPUType,
    JobState,
    NodeRole,
    PhaseRecord,
    TrainingJobStatus,
)

PREFIX = "phased"

# Failure recovery takes seconds of operator time and, at worst, hours of waiting for a node:
# the buckets run from 1 s to 12 h, with edges at the field's targets (15 min response, 35 min
# swap) so that "share of recoveries under target" is a bucket, not an interpolation.
RECOVERY_BUCKETS = (
    1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0,
    1800.0, 2100.0, 3600.0, 7200.0, 14400.0, 43200.0,
)  # fmt: skip
# One reconcile: milliseconds normally, seconds when the API server is slow.
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

NO_PHASE = "none"
NO_GPU = "none"
OTHER_GPU = "other"
OTHER_REASON = "Other"

LEFT_ALONE_REASONS = (
    "OtherInstallation",
    "NoInstallation",
    "PartialMarks",
    "Quarantined",
    "RunningPods",
)
CLAIM_REFUSALS = frozenset({"RunningPods", "NotFree"})
EVICTION_OUTCOMES = frozenset({"evicted", "blocked", "gone", "deleted"})
_GPU_TYPES = frozenset(t.value for t in GPUType)
_REASONS = frozenset(r.value for r in FailureReason)
_JOB = ("namespace", "trainingjob")


def _phase_label(name: str | None) -> str:
    return name or NO_PHASE


def _gpu_label(gpu_type: str | None) -> str:
    if not gpu_type:
        return NO_GPU
    return gpu_type if gpu_type in _GPU_TYPES else OTHER_GPU


def _reason_label(reason: str) -> str:
    """A ledger reason as a label value; anything unexpected collapses into ``Other``."""
    return reason if reason in _REASONS else OTHER_REASON


def _ratio(percent: float) -> float:
    return min(max(percent / 100.0, 0.0), 1.0)


def _instant(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _seconds_between(start: str | None, end: str | None) -> float | None:
    a, b = _instant(start), _instant(end)
    if a is None or b is None or (a.tzinfo is None) != (b.tzinfo is None):
        return None
    seconds = (b - a).total_seconds()
    return seconds if seconds >= 0 else None


@dataclass
class _JobView:
    """What the metrics know of one job: its last status and what was already counted."""

    status: TrainingJobStatus
    gpus_per_node: int
    running_workers: int
    counted_failures: set[int] = field(default_factory=set)
    counted_recoveries: set[int] = field(default_factory=set)
    restarts: int = 0
    # Label values handed to the in-process counters and histograms, for forget_job.
    label_sets: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)


def _gauge(name: str, doc: str, labels: Iterable[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


def _counter(name: str, doc: str, labels: Iterable[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=list(labels))


class _JobStatusCollector:
    """Renders the per-job figures from the last status ``observe_job`` stored."""

    def __init__(self, jobs: dict[tuple[str, str], _JobView], lock: threading.Lock) -> None:
        self._jobs = jobs
        self._lock = lock

    def describe(self) -> list[Metric]:
        return list(self._families().values())

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        with self._lock:
            views = list(self._jobs.items())
        families["jobs"].add_metric([], float(len(views)))
        for (namespace, name), view in views:
            self._add_job(families, namespace, name, view)
        yield from families.values()

    @staticmethod
    def _families() -> dict[str, GaugeMetricFamily | CounterMetricFamily]:
        p = PREFIX
        return {
            "jobs": _gauge(f"{p}_jobs", "TrainingJobs this operator currently tracks.", []),
            "state": _gauge(
                f"{p}_job_state",
                "1 for the job's current state (Pending, Waiting, Running, Recovering, "
                "Succeeded, Failed, Invalid), 0 for the others.",
                [*_JOB, "state"],
            ),
            "current_phase": _gauge(
                f"{p}_job_current_phase",
                "1 for the phase the job is in now, 0 for its other phases so far.",
                [*_JOB, "phase"],
            ),
            "nodes": _gauge(
                f"{p}_job_nodes",
                "Nodes in the job's pool now, by role (active, spare, quarantined).",
                [*_JOB, "phase", "role"],
            ),
            "gpus_reserved": _gauge(
                f"{p}_job_gpus_reserved",
                "GPUs held for the job now: active and spare nodes times GPUs per node.",
                [*_JOB, "phase", "gpu_type"],
            ),
            "gpus_running": _gauge(
                f"{p}_job_gpus_running",
                "GPUs running a worker now: Running worker pods times GPUs per node.",
                [*_JOB, "phase", "gpu_type"],
            ),
            "allocation_ratio": _gauge(
                f"{p}_job_allocation_utilization_ratio",
                "Busy GPU time over every reserved GPU time so far (spares included), 0-1.",
                _JOB,
            ),
            "active_ratio": _gauge(
                f"{p}_job_active_utilization_ratio",
                "Busy GPU time over the active pool's GPU time so far, 0-1.",
                _JOB,
            ),
            "current_ratio": _gauge(
                f"{p}_job_current_utilization_ratio",
                "GPUs running a worker now over GPUs reserved now, 0-1.",
                _JOB,
            ),
            "gpu_seconds": _counter(
                f"{p}_job_gpu_seconds",
                "GPU-seconds reserved by the job in a phase, by role (active, spare); "
                "the status's running total.",
                [*_JOB, "phase", "gpu_type", "role"],
            ),
            "busy_gpu_seconds": _counter(
                f"{p}_job_busy_gpu_seconds",
                "GPU-seconds in a phase during which the GPU ran a Running worker.",
                [*_JOB, "phase", "gpu_type"],
            ),
            "cost": _counter(
                f"{p}_job_cost",
                "Estimated cost of the job's reserved GPU time in a phase, spares included, "
                "in the currency of the operator settings.",
                [*_JOB, "phase"],
            ),
            "remaining_cost": _gauge(
                f"{p}_job_estimated_remaining_cost",
                "Estimated cost of the rest of the run at the current pool and prices, in "
                "the currency of the operator settings.",
                _JOB,
            ),
            "interruption": _counter(
                f"{p}_job_interruption_seconds",
                "Seconds of training lost to interruptions so far (detection to resume), "
                "counted against the interruption budget.",
                _JOB,
            ),
            "budget": _gauge(
                f"{p}_job_interruption_budget_seconds",
                "The job's interruption budget (spec.failurePolicy.interruptionBudget).",
                _JOB,
            ),
            "waiting": _counter(
                f"{p}_job_capacity_wait_seconds",
                "Seconds a phase spent waiting for enough free matching nodes.",
                [*_JOB, "phase"],
            ),
            "lost_work": _counter(
                f"{p}_job_lost_work_seconds",
                "Training time lost to failures so far: for each failure, the time from the "
                "last reported checkpoint to its detection (work the restart redoes). Only "
                "for jobs whose workers report checkpoints.",
                _JOB,
            ),
            "checkpoint_time": _gauge(
                f"{p}_job_last_checkpoint_timestamp_seconds",
                "Unix time of the last checkpoint a phase's workers reported; time() minus "
                "this is the checkpoint's age.",
                [*_JOB, "phase"],
            ),
            "checkpoint_step": _gauge(
                f"{p}_job_last_checkpoint_step",
                "Training step of the last checkpoint a phase's workers reported.",
                [*_JOB, "phase"],
            ),
            "phase_duration": _gauge(
                f"{p}_job_phase_duration_seconds",
                "How long a phase ran: from its start to its end, or to the last accounting "
                "instant while it runs.",
                [*_JOB, "phase"],
            ),
        }

    @staticmethod
    def _add_job(
        families: dict[str, GaugeMetricFamily | CounterMetricFamily],
        namespace: str,
        name: str,
        view: _JobView,
    ) -> None:
        status = view.status
        job = [namespace, name]
        phase = _phase_label(status.phase)
        current = next((r for r in status.phases if r.name == status.phase), None)
        gpu = _gpu_label(current.gpu_type if current else None)

        for state in JobState:
            families["state"].add_metric([*job, state.value], float(status.state == state))
        seen_phases = {r.name for r in status.phases}
        if status.phase:
            seen_phases.add(status.phase)
        for phase_name in sorted(seen_phases):
            families["current_phase"].add_metric(
                [*job, phase_name], float(phase_name == status.phase)
            )

        counts = {
            NodeRole.ACTIVE: status.active_nodes,
            NodeRole.SPARE: status.spare_nodes,
            NodeRole.QUARANTINED: status.quarantined_nodes,
        }
        for role, count in counts.items():
            families["nodes"].add_metric([*job, phase, role.value], float(count))
        reserved = (status.active_nodes + status.spare_nodes) * view.gpus_per_node
        families["gpus_reserved"].add_metric([*job, phase, gpu], float(reserved))
        running = view.running_workers * view.gpus_per_node
        families["gpus_running"].add_metric([*job, phase, gpu], float(running))

        families["allocation_ratio"].add_metric(job, _ratio(status.utilization.allocation))
        families["active_ratio"].add_metric(job, _ratio(status.utilization.active))
        families["current_ratio"].add_metric(job, _ratio(status.utilization.current))

        for record in status.phases:
            _add_phase(families, job, record, status.accounting.accounted_at)

        families["remaining_cost"].add_metric(
            job, max(status.accounting.estimated_remaining_cost, 0.0)
        )
        families["interruption"].add_metric(job, max(status.interruption.used_seconds, 0.0))
        lost = sum(max(f.lost_work_seconds or 0.0, 0.0) for f in status.failures)
        families["lost_work"].add_metric(job, lost)
        families["budget"].add_metric(job, max(status.interruption.budget_seconds, 0.0))


def _add_phase(
    families: dict[str, GaugeMetricFamily | CounterMetricFamily],
    job: list[str],
    record: PhaseRecord,
    accounted_at: str | None,
) -> None:
    labels = [*job, record.name]
    gpu = _gpu_label(record.gpu_type)
    families["gpu_seconds"].add_metric(
        [*labels, gpu, NodeRole.ACTIVE.value], max(record.active_gpu_hours, 0.0) * 3600.0
    )
    families["gpu_seconds"].add_metric(
        [*labels, gpu, NodeRole.SPARE.value], max(record.spare_gpu_hours, 0.0) * 3600.0
    )
    families["busy_gpu_seconds"].add_metric(
        [*labels, gpu], max(record.busy_gpu_hours, 0.0) * 3600.0
    )
    families["cost"].add_metric(labels, max(record.cost, 0.0))
    checkpoint = record.last_checkpoint
    moment = _instant(checkpoint.time.replace("Z", "+00:00")) if checkpoint else None
    if checkpoint is not None and moment is not None:
        families["checkpoint_time"].add_metric(labels, moment.timestamp())
        families["checkpoint_step"].add_metric(labels, float(max(checkpoint.step, 0)))
    families["waiting"].add_metric(labels, max(record.waiting_seconds, 0.0))
    duration = _seconds_between(record.start_time, record.end_time or accounted_at)
    if duration is not None:
        families["phase_duration"].add_metric(labels, duration)


class Metrics:
    """The operator's metrics; build one with ``Metrics.create(registry)`` at start-up."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[tuple[str, str], _JobView] = {}
        p = PREFIX
        job_phase = [*_JOB, "phase"]

        self.failures = Counter(
            f"{p}_job_failures",
            "Nodes taken out of a job's pool (new failure-ledger entries), by reason.",
            [*job_phase, "reason"],
            registry=registry,
        )
        self.restarts = Counter(
            f"{p}_job_restarts",
            "Worker restarts of a job (gang restarts from a checkpoint, or single workers).",
            job_phase,
            registry=registry,
        )
        self.detect_to_cordon = Histogram(
            f"{p}_job_failure_detect_to_cordon_seconds",
            "For each recovered failure: from detection to cordoning the failed node.",
            list(_JOB),
            buckets=RECOVERY_BUCKETS,
            registry=registry,
        )
        self.cordon_to_replace = Histogram(
            f"{p}_job_failure_cordon_to_replace_seconds",
            "For each recovered failure: from cordon to a replacement node being active "
            "(the swap).",
            list(_JOB),
            buckets=RECOVERY_BUCKETS,
            registry=registry,
        )
        self.replace_to_resume = Histogram(
            f"{p}_job_failure_replace_to_resume_seconds",
            "For each recovered failure: from the replacement to training resumed.",
            list(_JOB),
            buckets=RECOVERY_BUCKETS,
            registry=registry,
        )
        self.recovery = Histogram(
            f"{p}_job_failure_recovery_seconds",
            "For each recovered failure: from detection to training resumed.",
            list(_JOB),
            buckets=RECOVERY_BUCKETS,
            registry=registry,
        )

        self.reconcile_duration = Histogram(
            f"{p}_reconcile_duration_seconds",
            "Time one reconcile of one TrainingJob took (observe, decide, act).",
            buckets=RECONCILE_BUCKETS,
            registry=registry,
        )
        self.reconcile_errors = Counter(
            f"{p}_reconcile_errors",
            "Reconciles that ended in an error (they are retried).",
            registry=registry,
        )
        self.api_errors = Counter(
            f"{p}_api_errors",
            "Failed Kubernetes API calls, by verb and resource.",
            ["verb", "resource"],
            registry=registry,
        )
        self.reports = Counter(
            f"{p}_checkpoint_reports",
            "Reports workers sent to the report endpoint, by kind (checkpoint, progress, "
            "other) and result (recorded, superseded, unauthorized, invalid, unavailable).",
            ["kind", "result"],
            registry=registry,
        )
        self.nodes_left_alone_gauge = Gauge(
            f"{p}_nodes_left_alone",
            "Nodes this installation will not claim, release or adopt, by reason: marks it "
            "did not write (OtherInstallation, NoInstallation, PartialMarks), quarantined "
            "nodes no job holds (Quarantined), nodes recently found running others' pods "
            "(RunningPods).",
            ["reason"],
            registry=registry,
        )
        self.claims_refused = Counter(
            f"{p}_node_claims_refused",
            "Claims not made or undone at claim time, by reason: RunningPods (others' pods "
            "on the node), NotFree (the node changed or was taken meanwhile).",
            ["reason"],
            registry=registry,
        )
        self.events_dropped = Counter(
            f"{p}_events_dropped",
            "Events not posted because too many were still on their way to the API server "
            "(events are posted in the background; the job's status is its account).",
            registry=registry,
        )
        self.guest_evictions = Counter(
            f"{p}_guest_evictions",
            "Requests for guests to leave a node that became active, by outcome: evicted, "
            "blocked (a PodDisruptionBudget refused), gone, deleted (after the deadline).",
            ["outcome"],
            registry=registry,
        )
        self.last_event = Gauge(
            f"{p}_watch_last_event_timestamp_seconds",
            "Unix time of the last watch event the operator received (0: none yet); "
            "time() minus this is the watch's silence.",
            registry=registry,
        )
        self.tasks = Gauge(
            f"{p}_operator_tasks",
            "Tasks alive in the operator's event loop (refreshed every resync); a count "
            "that grows over a long run is a leak.",
            registry=registry,
        )
        self.timers = Gauge(
            f"{p}_operator_timers",
            "Planned looks at jobs (one timer per job at most; refreshed every resync).",
            registry=registry,
        )
        # The in-process per-job metrics, by the key observe_job and forget_job use.
        self._counters: dict[str, Counter] = {
            "failures": self.failures,
            "restarts": self.restarts,
        }
        self._histograms: dict[str, Histogram] = {
            "detect_to_cordon": self.detect_to_cordon,
            "cordon_to_replace": self.cordon_to_replace,
            "replace_to_resume": self.replace_to_resume,
            "recovery": self.recovery,
        }
        registry.register(_JobStatusCollector(self._jobs, self._lock))

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Metrics:
        """Create every metric and register it with ``registry``; call once at start-up."""
        return cls(registry)

    # -- per job ---------------------------------------------------------------------------

    def observe_job(
        self,
        namespace: str,
        name: str,
        before: TrainingJobStatus,
        after: TrainingJobStatus,
        gpus_per_node: int,
        running_workers: int,
    ) -> None:
        """Record a reconcile's outcome: ``before`` is the status read, ``after`` the one written.

        Gauges follow ``after``. Ledger entries (by id) absent from ``before`` are counted as
        failures once; entries whose ``resumed`` is set are observed in the recovery histograms
        once; restarts grow by the difference. Calling this again with the same statuses, or
        with ``after`` as ``before``, counts nothing twice.
        """
        key = (namespace, name)
        with self._lock:
            view = self._jobs.get(key)
            if view is None:
                view = _JobView(
                    status=after,
                    gpus_per_node=gpus_per_node,
                    running_workers=running_workers,
                    counted_failures={f.id for f in before.failures},
                    counted_recoveries={f.id for f in before.failures if f.resumed},
                    restarts=before.restarts,
                )
                self._jobs[key] = view
            view.status = after
            view.gpus_per_node = max(gpus_per_node, 0)
            view.running_workers = max(running_workers, 0)

        phase = _phase_label(after.phase)
        # Every series starts at 0, so that increase() sees a job's first failure.
        for reason in sorted(_REASONS):
            self._counter_labels(view, "failures", namespace, name, phase, reason)
        for histogram in self._histograms:
            self._histogram_labels(view, histogram, namespace, name)

        for entry in after.failures:
            if entry.id not in view.counted_failures:
                view.counted_failures.add(entry.id)
                labels = (namespace, name, _phase_label(entry.phase or after.phase))
                reason = _reason_label(entry.reason)
                self._counter_labels(view, "failures", *labels, reason).inc()
            if entry.resumed and entry.id not in view.counted_recoveries:
                view.counted_recoveries.add(entry.id)
                self._observe_recovery(view, namespace, name, entry)
        # Forget ids that left both statuses, so a long ledger does not grow memory forever.
        present = {f.id for f in before.failures} | {f.id for f in after.failures}
        view.counted_failures &= present
        view.counted_recoveries &= present

        restarts = self._counter_labels(view, "restarts", namespace, name, phase)
        if after.restarts > view.restarts:
            restarts.inc(after.restarts - view.restarts)
        view.restarts = after.restarts

    def _observe_recovery(
        self, view: _JobView, namespace: str, name: str, entry: FailureRecord
    ) -> None:
        stages = (
            ("detect_to_cordon", entry.detected, entry.cordoned),
            ("cordon_to_replace", entry.cordoned, entry.replaced),
            ("replace_to_resume", entry.replaced, entry.resumed),
            ("recovery", entry.detected, entry.resumed),
        )
        for histogram, start, end in stages:
            seconds = _seconds_between(start, end)
            if seconds is not None:
                self._histogram_labels(view, histogram, namespace, name).observe(seconds)

    def _counter_labels(self, view: _JobView, metric: str, *values: str) -> Counter:
        view.label_sets.add((metric, values))
        child: Counter = self._counters[metric].labels(*values)
        return child

    def _histogram_labels(self, view: _JobView, metric: str, *values: str) -> Histogram:
        view.label_sets.add((metric, values))
        child: Histogram = self._histograms[metric].labels(*values)
        return child

    def forget_job(self, namespace: str, name: str) -> None:
        """Drop every series of a deleted job."""
        with self._lock:
            view = self._jobs.pop((namespace, name), None)
        if view is None:
            return
        for metric, values in view.label_sets:
            parent = self._counters.get(metric) or self._histograms[metric]
            with contextlib.suppress(KeyError):
                parent.remove(*values)

    # -- the operator itself -----------------------------------------------------------------

    def reconcile_finished(self, seconds: float, error: bool) -> None:
        self.reconcile_duration.observe(max(seconds, 0.0))
        if error:
            self.reconcile_errors.inc()

    def api_error(self, verb: str, resource: str) -> None:
        """Count a failed API call; ``verb`` and ``resource`` are the code's own constants."""
        self.api_errors.labels(verb, resource).inc()

    def report_received(self, kind: str, result: str) -> None:
        kind = kind if kind in ("checkpoint", "progress") else "other"
        self.reports.labels(kind, result).inc()

    def event_seen(self, now: float) -> None:
        self.last_event.set(now)

    # -- nodes and guests ----------------------------------------------------------------------

    def nodes_left_alone(self, counts: Mapping[str, int]) -> None:
        """Set the gauge for every reason (0 for those with no node now)."""
        for reason in LEFT_ALONE_REASONS:
            self.nodes_left_alone_gauge.labels(reason).set(float(counts.get(reason, 0)))

    def internals(self, tasks: int, timers: int) -> None:
        self.tasks.set(float(tasks))
        self.timers.set(float(timers))

    def claim_refused(self, reason: str) -> None:
        self.claims_refused.labels(reason if reason in CLAIM_REFUSALS else "Other").inc()

    def event_dropped(self) -> None:
        self.events_dropped.inc()

    def guest_evicted(self, outcome: str) -> None:
        self.guest_evictions.labels(outcome if outcome in EVICTION_OUTCOMES else "other").inc()
