"""What a TrainingJob will cost, phase by phase, against a pool sized for its largest phase.

Pure computation for ``phased plan``: a :class:`~phased.api.v1alpha1.TrainingJobSpec` and the
operator :class:`~phased.core.settings.Settings` (prices per GPU-hour) go in, frozen values
come out. No I/O; the CLI reads the file and prints the result.

Assumptions, stated once: each phase runs on ``nodes.max`` nodes of its first-preference GPU
type for its ``expectedDuration`` (else ``maxDuration``; a phase with neither has an unknown
duration and is left out of the totals). Spares are held for the whole run, of the running
phase's type. CPU-only phases have no GPU-hours; their nodes cost the settings' price per
node-hour.
"""

from __future__ import annotations

from dataclasses import dataclass

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import GPUType, Phase, TrainingJobSpec
from phased.core.settings import Settings


@dataclass(frozen=True)
class PhaseLine:
    """One phase as planned: its pool, how long it holds it, and what that costs."""

    name: str
    gpu_type: GPUType | None  # None: a CPU-only phase
    nodes: int
    gpus: int
    hours: float | None  # None: the phase has neither expectedDuration nor maxDuration
    gpu_hours: float | None
    cost: float | None


@dataclass(frozen=True)
class SparesLine:
    """The standby spares, held through every phase of known duration."""

    count: int
    gpu_types: tuple[GPUType, ...]  # the types the spares take, phase by phase, deduplicated
    hours: float
    gpu_hours: float
    cost: float


@dataclass(frozen=True)
class Sizing:
    """Totals for one way of sizing the run."""

    nodes: int | None  # the constant pool size; None when the pool follows the phases
    hours: float
    active_gpu_hours: float
    spare_gpu_hours: float
    gpu_hours: float  # active + spare: everything reserved
    cost: float
    utilization_percent: float  # the phases' active GPU-hours / every reserved GPU-hour


@dataclass(frozen=True)
class RunPlan:
    """The run priced phase by phase, and the same run on a fixed pool for comparison."""

    phases: tuple[PhaseLine, ...]
    spares: SparesLine
    phased: Sizing
    fixed: Sizing
    largest_phase: str
    saving: float  # fixed.cost - phased.cost
    saving_percent: float  # of the fixed cost
    unknown_durations: tuple[str, ...]  # phases left out of every total
    currency: str


def phase_hours(phase: Phase) -> float | None:
    """The hours a phase is planned to run: expectedDuration, else maxDuration, else unknown."""
    text = phase.expected_duration or phase.max_duration
    return parse_duration(text) / 3600 if text else None


def node_hour_price(phase: Phase, settings: Settings) -> float:
    """What one of the phase's nodes costs per hour on its first-preference type."""
    if phase.is_cpu_only:
        return settings.cpu.price_per_node_hour
    return settings.gpu_types[phase.gpu_types[0]].price_per_gpu_hour * phase.gpus_per_node


def plan_phase(phase: Phase, settings: Settings) -> PhaseLine:
    """Price one phase at ``nodes.max`` nodes of its first-preference type."""
    hours = phase_hours(phase)
    nodes = phase.nodes.max
    gpus = nodes * phase.gpus_per_node
    return PhaseLine(
        name=phase.name,
        gpu_type=None if phase.is_cpu_only else phase.gpu_types[0],
        nodes=nodes,
        gpus=gpus,
        hours=hours,
        gpu_hours=None if hours is None else gpus * hours,
        cost=None if hours is None else nodes * hours * node_hour_price(phase, settings),
    )


def plan_spares(spec: TrainingJobSpec, settings: Settings) -> SparesLine:
    """Price the spares: ``spares.count`` nodes like the running phase's, for every phase."""
    count = spec.spares.count
    timed = [(p, h) for p in spec.phases if (h := phase_hours(p)) is not None]
    types = tuple(dict.fromkeys(p.gpu_types[0] for p, _ in timed if not p.is_cpu_only))
    return SparesLine(
        count=count,
        gpu_types=types,
        hours=sum(h for _, h in timed),
        gpu_hours=sum(count * p.gpus_per_node * h for p, h in timed),
        cost=sum(count * node_hour_price(p, settings) * h for p, h in timed),
    )


def largest_phase(spec: TrainingJobSpec, settings: Settings) -> Phase:
    """The phase whose full pool is the biggest: most GPUs, then the dearest per hour."""
    return max(
        spec.phases,
        key=lambda p: (p.nodes.max * p.gpus_per_node, p.nodes.max * node_hour_price(p, settings)),
    )


def _percent(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def phased_sizing(lines: tuple[PhaseLine, ...], spares: SparesLine) -> Sizing:
    """Totals when the pool follows the phases (what Phased does)."""
    active = sum(line.gpu_hours or 0.0 for line in lines)
    reserved = active + spares.gpu_hours
    return Sizing(
        nodes=None,
        hours=spares.hours,
        active_gpu_hours=active,
        spare_gpu_hours=spares.gpu_hours,
        gpu_hours=reserved,
        cost=sum(line.cost or 0.0 for line in lines) + spares.cost,
        utilization_percent=_percent(active, reserved),
    )


def fixed_sizing(
    spec: TrainingJobSpec, settings: Settings, hours: float, active_gpu_hours: float
) -> Sizing:
    """Totals when the largest phase's pool, and the same spares, are held all along.

    The work done is the same, so utilization is the phases' ``active_gpu_hours`` over
    everything this fixed pool reserves.
    """
    largest = largest_phase(spec, settings)
    nodes = largest.nodes.max
    pool_gpu_hours = nodes * largest.gpus_per_node * hours
    spare_gpu_hours = spec.spares.count * largest.gpus_per_node * hours
    reserved = pool_gpu_hours + spare_gpu_hours
    return Sizing(
        nodes=nodes,
        hours=hours,
        active_gpu_hours=pool_gpu_hours,
        spare_gpu_hours=spare_gpu_hours,
        gpu_hours=reserved,
        cost=(nodes + spec.spares.count) * node_hour_price(largest, settings) * hours,
        utilization_percent=_percent(active_gpu_hours, reserved),
    )


def plan_run(spec: TrainingJobSpec, settings: Settings) -> RunPlan:
    """Price the run as Phased sizes it and as a fixed pool would; say what the phases save."""
    lines = tuple(plan_phase(p, settings) for p in spec.phases)
    spares = plan_spares(spec, settings)
    phased = phased_sizing(lines, spares)
    fixed = fixed_sizing(spec, settings, phased.hours, phased.active_gpu_hours)
    return RunPlan(
        phases=lines,
        spares=spares,
        phased=phased,
        fixed=fixed,
        largest_phase=largest_phase(spec, settings).name,
        saving=fixed.cost - phased.cost,
        saving_percent=_percent(fixed.cost - phased.cost, fixed.cost),
        unknown_durations=tuple(line.name for line in lines if line.hours is None),
        currency=settings.currency,
    )
