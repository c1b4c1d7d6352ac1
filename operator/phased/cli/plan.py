"""``phased plan FILE``: what a TrainingJob will cost, phase by phase, before it is applied.

Reads one TrainingJob manifest (``-`` for stdin), validates it with the same models the
operator uses, and prints :func:`phased.core.planning.plan_run`'s figures as a table or JSON.
Exit codes: 0 planned, 2 the file, the manifest or the settings could not be used (the
messages say which field and why, with the API's field paths).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from phased.api.durations import format_duration
from phased.api.errors import explain
from phased.api.v1alpha1 import GPUType, TrainingJob, parse_manifest
from phased.core.planning import PhaseLine, RunPlan, Sizing, plan_run
from phased.core.settings import Settings, SettingsError, load_settings

EXIT_INVALID = 2


class PlanInputError(Exception):
    """Input ``phased plan`` cannot use; the message is for the person who ran it."""


def register(sub: Any) -> None:
    """Add the ``plan`` subcommand to ``phased``'s subparsers."""
    parser = sub.add_parser(
        "plan",
        help="price a TrainingJob phase by phase, against a pool sized for its largest phase",
        description="Price a TrainingJob phase by phase (nodes.max nodes of the first "
        "GPU type, for expectedDuration or else maxDuration), spares included, and compare "
        "it with the same run on a pool fixed at its largest phase.",
    )
    parser.add_argument("file", help="a YAML file holding one TrainingJob, or - for stdin")
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        type=parse_price,
        metavar="TYPE=USD_PER_GPU_HOUR",
        help="price of one GPU-hour of a type, e.g. H100=2.10 (repeatable; overrides settings)",
    )
    parser.add_argument("--settings", help="operator settings YAML (default: built-in prices)")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    parser.set_defaults(func=run)


def parse_price(text: str) -> tuple[GPUType, float]:
    """Read ``TYPE=PRICE``; argparse turns the error into a usage message and exit 2."""
    name, sep, amount = text.partition("=")
    known = ", ".join(t.value for t in GPUType)
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r}: write TYPE=USD_PER_GPU_HOUR, e.g. H100=2.10")
    try:
        gpu_type = GPUType(name)
    except ValueError:
        raise argparse.ArgumentTypeError(f"unknown GPU type {name!r}; known: {known}") from None
    try:
        price = float(amount)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the price must be a number") from None
    if not price >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the price must not be negative")
    return gpu_type, price


def run(args: argparse.Namespace) -> int:
    """Plan the file named in ``args``; print the plan, or the problems and return 2."""
    try:
        job = read_job(args.file, sys.stdin)
        settings = with_prices(read_settings(args.settings), dict(args.price))
    except PlanInputError as exc:
        print(f"phased plan: {exc}", file=sys.stderr)
        return EXIT_INVALID
    plan = plan_run(job.spec, settings)
    if args.output == "json":
        print(json.dumps(plan_as_json(job, plan), indent=2))
    else:
        print(render_table(job, plan, settings))
    return 0


# What PyYAML and Python raise on files that are not YAML they can build: besides YAMLError,
# ValueError (dates not in the calendar, "!!int x", integers over 4300 digits), TypeError,
# AttributeError and KeyError (explicit tags on the wrong node: "!!bool x", "!!timestamp x"),
# RecursionError (deep nesting),
# OverflowError (huge floats and dates), UnicodeDecodeError (not UTF-8, a ValueError).
UNREADABLE = (
    yaml.YAMLError,
    ValueError,
    TypeError,
    AttributeError,
    LookupError,
    RecursionError,
    OverflowError,
)


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return f"it is not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, LookupError):  # "!!bool x": the tag has no such value
        return f"a value its tag does not allow: {exc}"
    return str(exc).strip() or type(exc).__name__


def _read_text(name: str, stdin: TextIO | None) -> str:
    try:
        if name == "-" and stdin is not None:
            return stdin.read()
        return Path(name).read_bytes().decode("utf-8")
    except OSError as exc:
        raise PlanInputError(f"cannot read {name}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise PlanInputError(f"cannot read {name}: {_why(exc)}") from None


def read_job(name: str, stdin: TextIO) -> TrainingJob:
    """Load and validate the one TrainingJob in file ``name`` (``-``: ``stdin``).

    Every failure to read or parse the file is a :class:`PlanInputError` (exit 2), never a
    traceback.
    """
    text = _read_text(name, stdin)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except UNREADABLE as exc:
        raise PlanInputError(f"{name} is not valid YAML: {_why(exc)}") from None
    if len(docs) != 1:
        raise PlanInputError(f"{name} must hold exactly one TrainingJob, found {len(docs)}")
    if not isinstance(docs[0], dict):
        raise PlanInputError(
            f"{name} must hold one TrainingJob mapping, not a {type(docs[0]).__name__}"
        )
    try:
        return parse_manifest(docs[0])
    except ValidationError as exc:
        problems = "\n".join(f"  {line}" for line in explain(exc))
        raise PlanInputError(f"{name} is not a valid TrainingJob:\n{problems}") from None
    except RecursionError as exc:
        raise PlanInputError(f"{name} is not a valid TrainingJob: {_why(exc)}") from None


def read_settings(name: str | None) -> Settings:
    """The operator settings from file ``name``, or the built-in ones."""
    if name is None:
        return Settings()
    text = _read_text(name, None)
    try:
        return load_settings(text)
    except SettingsError as exc:
        raise PlanInputError(f"{name}: {exc}") from None
    except UNREADABLE as exc:
        raise PlanInputError(f"{name} is not valid YAML: {_why(exc)}") from None


def with_prices(settings: Settings, prices: dict[GPUType, float]) -> Settings:
    """``settings`` with the GPU-hour prices in ``prices`` put over the configured ones."""
    gpu_types = dict(settings.gpu_types)
    for gpu_type, price in prices.items():
        if gpu_type not in gpu_types:
            raise PlanInputError(f"--price {gpu_type.value}: the settings do not know this type")
        gpu_types[gpu_type] = gpu_types[gpu_type].model_copy(update={"price_per_gpu_hour": price})
    return settings.model_copy(update={"gpu_types": gpu_types})


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------


def plan_as_json(job: TrainingJob, plan: RunPlan) -> dict[str, Any]:
    """The plan as plain JSON values (enums as their strings)."""
    data = asdict(plan)
    data["name"] = job.metadata.name
    return json.loads(json.dumps(data, default=str))  # type: ignore[no-any-return]


def _number(value: float | None) -> str:
    """Whole numbers with separators; two decimals for small figures, so they do not read 0."""
    if value is None:
        return "unknown"
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


def _hours(hours: float | None) -> str:
    return "unknown" if hours is None else format_duration(hours * 3600)


def _row(cells: list[str]) -> str:
    widths = [12, 10, 6, 6, 9, 13, 14]
    left = cells[:2]
    right = cells[2:]
    text = "  ".join(c.ljust(w) for c, w in zip(left, widths[:2], strict=True))
    return text + "  " + "  ".join(c.rjust(w) for c, w in zip(right, widths[2:], strict=True))


def _phase_row(line: PhaseLine) -> str:
    return _row(
        [
            line.name,
            line.gpu_type.value if line.gpu_type else "CPU",
            str(line.nodes),
            str(line.gpus),
            _hours(line.hours),
            _number(line.gpu_hours),
            _number(line.cost),
        ]
    )


def _sizing_sentence(label: str, sizing: Sizing, currency: str) -> str:
    return (
        f"{label}: {_number(sizing.gpu_hours)} GPU-hours, {_number(sizing.cost)} {currency}, "
        f"allocation utilization {sizing.utilization_percent:.1f}%"
    )


def render_table(job: TrainingJob, plan: RunPlan, settings: Settings) -> str:
    """The plan as a table with totals, then the comparison with fixed sizing."""
    prices = ", ".join(
        f"{t.value} {settings.gpu_types[t].price_per_gpu_hour:.2f}"
        for t in dict.fromkeys(line.gpu_type for line in plan.phases if line.gpu_type)
        if t in settings.gpu_types
    )
    spares = plan.spares
    spare_type = "/".join(t.value for t in spares.gpu_types) or "CPU"
    lines = [
        f"TrainingJob {job.metadata.name or '(unnamed)'}: {len(plan.phases)} phases over "
        f"{_hours(plan.phased.hours)}; {plan.currency} per GPU-hour: {prices or 'none'}",
        "",
        _row(["PHASE", "GPU TYPE", "NODES", "GPUS", "DURATION", "GPU-HOURS", "COST"]),
        *(_phase_row(line) for line in plan.phases),
        _row(
            [
                f"spares ({spares.count})",
                spare_type,
                str(spares.count),
                "",
                _hours(spares.hours),
                _number(spares.gpu_hours),
                _number(spares.cost),
            ]
        ),
        _row(
            [
                "total",
                "",
                "",
                "",
                _hours(plan.phased.hours),
                _number(plan.phased.gpu_hours),
                _number(plan.phased.cost),
            ]
        ),
        "",
        _sizing_sentence("Phased sizing", plan.phased, plan.currency),
        _sizing_sentence(
            f"Fixed sizing ({plan.largest_phase}'s {plan.fixed.nodes} nodes + "
            f"{spares.count} spares all along)",
            plan.fixed,
            plan.currency,
        ),
        f"Following the phases saves {_number(plan.saving)} {plan.currency} "
        f"({plan.saving_percent:.1f}%) against fixed sizing.",
    ]
    if plan.unknown_durations:
        lines.append(
            "Left out of the totals (no expectedDuration or maxDuration): "
            + ", ".join(plan.unknown_durations)
        )
    return "\n".join(lines)
