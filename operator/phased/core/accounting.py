"""GPU-hours, cost, utilization and interruption time: the numbers a finance team sees.

Accounting runs on every decide, over the interval from ``status.accounting.accounted_at``
to ``now``, at the pool that held during it: ``status.accounting.basis``, what the previous
call left (the first call only sets ``accounted_at``; see :func:`phased.core.decide._account`).
Per interval:

* active GPU-hours = active nodes x gpusPerNode x hours; spare GPU-hours likewise;
* busy GPU-hours = Running workers on its active nodes x gpusPerNode x hours;
* cost = (active + spare) GPU-hours x the type's price per GPU-hour; a CPU phase costs
  node-hours x ``cpu.pricePerNodeHour`` and adds no GPU-hours — except for a GPU node it
  holds (only with ``cpu.allowGpuNodes``), which is billed as the GPU node it is: its GPUs
  count as reserved GPU-hours (busy none) at its type's price.

Utilization (percent): allocation = busy / (active + spare); active = busy / active;
current = GPUs running a worker now / GPUs reserved now. CPU phases are not counted.

Interruptions run from a failure's ``detected`` to its ``resumed`` (now while still open),
and over each stop (:mod:`phased.core.interruptions`: a restart or the breaker's hold that no
ledger entry records); overlapping ones are merged, so concurrent failures, and a stop and an
entry over the same interval, are never counted twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from phased.api.durations import format_duration, parse_duration
from phased.api.v1alpha1 import (
    Accounting,
    FailureRecord,
    GPUType,
    Interruption,
    PhaseRecord,
    Stop,
    TrainingJobSpec,
    Utilization,
)
from phased.core.pools import CPU_TYPE, type_keys
from phased.core.settings import Settings
from phased.core.times import format_time, parse_time

HOUR = 3600.0


@dataclass(frozen=True)
class GPUNode:
    """A GPU node held by a CPU phase: billed at what it is, not at the CPU price."""

    type_key: str
    gpus: int
    active: bool


@dataclass(frozen=True)
class Usage:
    """What the job held and ran, as counted for one interval."""

    active_nodes: int
    spare_nodes: int
    running_workers: int
    gpus_per_node: int
    type_key: str  # CPU_TYPE for a CPU phase
    gpu_nodes: tuple[GPUNode, ...] = ()  # a CPU phase's GPU nodes (counted in the nodes too)


def _price(type_key: str, settings: Settings) -> float:
    if type_key == CPU_TYPE:
        return settings.cpu.price_per_node_hour
    conf = settings.gpu_types.get(GPUType(type_key))
    return conf.price_per_gpu_hour if conf is not None else 0.0


@dataclass(frozen=True)
class Slice:
    active_gpu_hours: float
    spare_gpu_hours: float
    busy_gpu_hours: float
    cost: float

    @classmethod
    def of(cls, usage: Usage, seconds: float, settings: Settings) -> Slice:
        hours = seconds / HOUR
        price = _price(usage.type_key, settings)
        if usage.type_key == CPU_TYPE:
            cpu_nodes = usage.active_nodes + usage.spare_nodes - len(usage.gpu_nodes)
            active = sum(g.gpus * hours for g in usage.gpu_nodes if g.active)
            spare = sum(g.gpus * hours for g in usage.gpu_nodes if not g.active)
            gpu_cost = sum(g.gpus * hours * _price(g.type_key, settings) for g in usage.gpu_nodes)
            return cls(active, spare, 0.0, max(0, cpu_nodes) * hours * price + gpu_cost)
        gpus = usage.gpus_per_node * hours
        active = usage.active_nodes * gpus
        spare = usage.spare_nodes * gpus
        return cls(active, spare, usage.running_workers * gpus, (active + spare) * price)


def add_to_phase(record: PhaseRecord, part: Slice) -> PhaseRecord:
    return record.model_copy(
        update={
            "active_gpu_hours": record.active_gpu_hours + part.active_gpu_hours,
            "spare_gpu_hours": record.spare_gpu_hours + part.spare_gpu_hours,
            "busy_gpu_hours": record.busy_gpu_hours + part.busy_gpu_hours,
            "gpu_hours": record.gpu_hours + part.active_gpu_hours + part.spare_gpu_hours,
            "cost": record.cost + part.cost,
        }
    )


def add_to_job(acc: Accounting, part: Slice, now: datetime, currency: str) -> Accounting:
    """Add ``part`` and move ``accountedAt`` to ``now`` — never back: a clock that reads
    earlier than it (stepped back, or a new replica's running behind) charged nothing, and
    the interval up to ``accountedAt`` is charged already."""
    last = parse_time(acc.accounted_at)
    stamp = now if last is None else max(last, now)
    return acc.model_copy(
        update={
            "active_gpu_hours": acc.active_gpu_hours + part.active_gpu_hours,
            "spare_gpu_hours": acc.spare_gpu_hours + part.spare_gpu_hours,
            "busy_gpu_hours": acc.busy_gpu_hours + part.busy_gpu_hours,
            "gpu_hours": acc.gpu_hours + part.active_gpu_hours + part.spare_gpu_hours,
            "cost": acc.cost + part.cost,
            "currency": currency,
            "accounted_at": format_time(stamp),
        }
    )


def _percent(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


def utilization(acc: Accounting, usage: Usage) -> Utilization:
    reserved_now = (usage.active_nodes + usage.spare_nodes) * usage.gpus_per_node
    running_now = usage.running_workers * usage.gpus_per_node
    return Utilization(
        allocation=_percent(acc.busy_gpu_hours, acc.active_gpu_hours + acc.spare_gpu_hours),
        active=_percent(acc.busy_gpu_hours, acc.active_gpu_hours),
        current=_percent(running_now, reserved_now) if usage.type_key != CPU_TYPE else 0.0,
    )


def estimate_remaining_cost(
    spec: TrainingJobSpec,
    phase_index: int,
    elapsed_in_phase: float,
    chosen_type: str | None,
    settings: Settings,
) -> float:
    """Cost of the rest of the run: each remaining phase's ``expectedDuration`` (the current
    phase: what is left of it) at ``nodes.max`` plus the spares, at the price of the current
    phase's chosen type or each later phase's first preference. Phases without an expected
    duration add nothing."""
    total = 0.0
    for index, phase in enumerate(spec.phases):
        if index < phase_index or phase.expected_duration is None:
            continue
        seconds = float(parse_duration(phase.expected_duration))
        if index == phase_index:
            seconds = max(0.0, seconds - elapsed_in_phase)
        key = chosen_type if index == phase_index and chosen_type is not None else None
        key = key if key is not None else type_keys(phase)[0]
        nodes = phase.nodes.max + spec.spares.count
        per_node = phase.gpus_per_node if key != CPU_TYPE else 1
        total += nodes * per_node * seconds / HOUR * _price(key, settings)
    return round(total, 2)


def _spans(
    ledger: Sequence[FailureRecord], stops: Sequence[Stop], stop: datetime
) -> list[tuple[datetime, datetime]]:
    """Each ledger entry and each stop as (start, end); open ones run to ``stop``."""
    spans: list[tuple[datetime, datetime]] = []
    for start_text, end_text in [(r.detected, r.resumed) for r in ledger] + [
        (s.since, s.resumed) for s in stops
    ]:
        start = parse_time(start_text)
        if start is None:
            continue
        finish = parse_time(end_text) or stop
        if finish > start:
            spans.append((start, finish))
    spans.sort()
    return spans


def _merged(
    spans: list[tuple[datetime, datetime]],
) -> tuple[float, tuple[datetime, datetime] | None]:
    """Seconds covered by ``spans`` (sorted), and the last merged span."""
    used = 0.0
    current: tuple[datetime, datetime] | None = None
    for start, finish in spans:
        if current is not None and start <= current[1]:
            current = (current[0], max(current[1], finish))
            continue
        if current is not None:
            used += (current[1] - current[0]).total_seconds()
        current = (start, finish)
    if current is not None:
        used += (current[1] - current[0]).total_seconds()
    return used, current


def fold(
    ledger: Sequence[FailureRecord],
    stops: Sequence[Stop],
    folded: float,
    now: datetime,
    end: datetime | None,
    *,
    keep: int,
) -> tuple[list[Stop], float]:
    """Keep the latest ``keep`` stops: older closed ones go, and the seconds only they covered
    are added to ``folded``, so the interruption charged stays what it was."""
    ordered = sorted(stops, key=lambda s: (parse_time(s.since) is None, s.since))
    excess = len(ordered) - keep
    if excess <= 0:
        return list(stops), folded
    gone = [s for s in ordered if s.resumed is not None][:excess]
    kept = [s for s in ordered if all(s is not g for g in gone)]
    stop = end or now
    before, _ = _merged(_spans(ledger, ordered, stop))
    after, _ = _merged(_spans(ledger, kept, stop))
    return kept, folded + max(0.0, before - after)


def interruption(
    ledger: Sequence[FailureRecord],
    budget: str,
    now: datetime,
    end: datetime | None = None,
    stops: Sequence[Stop] = (),
    folded: float = 0.0,
) -> Interruption:
    """Merged interruption time over the ledger and the stops (open ones run to ``end`` or
    ``now``), plus the seconds of stops folded away."""
    used, current = _merged(_spans(ledger, stops, end or now))
    used += folded
    going = any(r.resumed is None for r in ledger) or any(s.resumed is None for s in stops)
    open_since: datetime | None = None
    if current is not None and end is None and going and current[1] >= now:
        open_since = current[0]
    return Interruption(
        used_seconds=round(used, 3),
        budget_seconds=float(parse_duration(budget)),
        used=format_duration(used),
        open_since=format_time(open_since) if open_since is not None else None,
        stops=list(stops),
        folded_seconds=round(folded, 3),
    )
