"""Conditions on the TrainingJob status: set, read, and know when one flipped.

``last_transition_time`` changes only when the status flips, so decide can be called again
and again with the same snapshot without moving it; every condition carries the job's
``metadata.generation`` as ``observed_generation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from phased.api.v1alpha1 import Condition
from phased.core.times import format_time


class ConditionType(StrEnum):
    INVALID_SPEC = "InvalidSpec"
    CAPACITY_SHORT = "CapacityShort"
    ADMISSION_TIMED_OUT = "AdmissionTimedOut"
    WORKERS_PENDING = "WorkersPending"
    WORKERS_REFUSED = "WorkersRefused"
    MASS_FAILURE = "MassFailure"
    SPARES_EXHAUSTED = "SparesExhausted"
    INTERRUPTION_BUDGET_EXCEEDED = "InterruptionBudgetExceeded"
    CHECKPOINT_STALE = "CheckpointStale"
    FAILED = "Failed"
    STATUS_UNREADABLE = "StatusUnreadable"


@dataclass(frozen=True)
class Change:
    """The conditions after a set, and whether the set flipped the condition's status."""

    conditions: tuple[Condition, ...]
    flipped: bool


def find(conditions: Sequence[Condition], kind: str) -> Condition | None:
    for cond in conditions:
        if cond.type == kind:
            return cond
    return None


def is_true(conditions: Sequence[Condition], kind: str) -> bool:
    cond = find(conditions, kind)
    return cond is not None and cond.status == "True"


def set_condition(
    conditions: Sequence[Condition],
    kind: str,
    status: bool,
    reason: str,
    message: str,
    now: datetime,
    generation: int,
) -> Change:
    """Set ``kind`` to ``status``; a condition never seen before counts as ``False``.

    Setting a missing condition to False adds it without a flip (nothing changed for people).
    """
    value = "True" if status else "False"
    old = find(conditions, kind)
    flipped = (old.status if old is not None else "False") != value
    transition = (
        format_time(now)
        if flipped or old is None or not old.last_transition_time
        else old.last_transition_time
    )
    new = Condition(
        type=kind,
        status=value,
        reason=reason,
        message=message,
        last_transition_time=transition,
        observed_generation=generation,
    )
    if old is None:
        ordered = (*conditions, new)
    else:
        ordered = tuple(new if c.type == kind else c for c in conditions)
    return Change(conditions=ordered, flipped=flipped)
