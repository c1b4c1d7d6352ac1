"""Random sequences of failures (the hostile simulator's), with passes whose clock reads
behind or ahead of the cluster's (stepped back, a new replica's) and restarts of the
operator that lose its status write, and the honest account checked after every pass:

* GPU-hours paid, active, spare, busy and cost never go down, and busy <= paid;
* the GPU-hours paid are the integral of the nodes the job held (after each pass's actions,
  whatever happened to them before the next) x GPUs per node over the time between passes,
  as far as the operator's clock went forward (a lost status write: the interval after it
  is charged, as the operator does, at the pool the status before it recorded); the cost is
  those GPU-hours at the price;
* the utilization figures are percentages in [0, 100];
* the interruption charged never goes down and never exceeds the job's age;
* each ledger entry's times are in order: detected <= cordoned <= replaced, resumed.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phased.api.v1alpha1 import NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.times import parse_time
from tests.hostile.test_random_failure_sequences_keep_the_pool_and_the_ledger_whole import (
    _cluster,
    _happen,
    _mine,
    events,
    jobs,
)

SMALL = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PRICE = 2.50  # H100, the default settings
GPUS = 8
EPS = 1e-6

# (A flap runs a pass of the hostile test's own, which the integral here would not see.)
happenings = st.one_of(
    events.filter(lambda e: e[0] != "flap"),
    st.tuples(st.just("clock"), st.sampled_from([-600, -5, 3600])),  # the operator's alone
    st.tuples(st.just("lost_write")),
)


class Ledger:
    """What the job held between passes, integrated by the test itself."""

    def __init__(self) -> None:
        self.held = 0
        self.last_seen = None  # the latest instant any pass ran at
        self.gpu_hours = 0.0

    def charge(self, now: Any) -> None:
        if self.last_seen is not None and now > self.last_seen:
            self.gpu_hours += self.held * GPUS * (now - self.last_seen).total_seconds() / 3600
        if self.last_seen is None or now > self.last_seen:
            self.last_seen = now


def _held(cluster: Any) -> int:
    return sum(1 for r in _mine(cluster).values() if r in (NodeRole.ACTIVE, NodeRole.SPARE))


def _ordered(status: TrainingJobStatus) -> None:
    for e in status.failures:
        detected = parse_time(e.detected)
        assert detected is not None
        for later in (e.cordoned, e.replaced, e.resumed):
            at = parse_time(later)
            assert at is None or at >= detected, (e.node, e.detected, later)
        cordoned, replaced = parse_time(e.cordoned), parse_time(e.replaced)
        if cordoned is not None and replaced is not None:
            assert replaced >= cordoned, (e.node, e.cordoned, e.replaced)
        assert e.interruption_seconds >= 0


def _check(before: TrainingJobStatus, status: TrainingJobStatus, paid: Ledger) -> None:
    acc, old = status.accounting, before.accounting
    for name in ("gpu_hours", "active_gpu_hours", "spare_gpu_hours", "busy_gpu_hours", "cost"):
        assert getattr(acc, name) >= getattr(old, name) - EPS, name
    assert acc.busy_gpu_hours <= acc.gpu_hours + EPS
    assert math.isclose(acc.gpu_hours, paid.gpu_hours, rel_tol=1e-6, abs_tol=1e-6), (
        acc.gpu_hours,
        paid.gpu_hours,
    )
    assert math.isclose(acc.cost, acc.gpu_hours * PRICE, rel_tol=1e-6, abs_tol=1e-6)
    util = status.utilization
    for value in (util.allocation, util.active, util.current, status.utilization_percent):
        assert 0.0 <= value <= 100.0, util
    spent, started = status.interruption, parse_time(status.start_time)
    assert spent.used_seconds >= before.interruption.used_seconds - 1e-3
    assert started is not None and paid.last_seen is not None
    assert spent.used_seconds <= (paid.last_seen - started).total_seconds() + 1e-3
    _ordered(status)


def _pass(cluster: Any, paid: Ledger, lose_write: bool = False, skew: float = 0.0) -> None:
    before = cluster.status
    cluster.advance(1)
    now = cluster.now + timedelta(seconds=skew)  # the operator's clock, off the cluster's
    plan = decide(cluster.snapshot(), cluster.settings, now)
    paid.charge(now)
    cluster.apply(plan)
    cluster.schedule()
    if lose_write:  # the operator died after the actions, before its status write
        cluster.status = before
        return
    paid.held = _held(cluster)
    _check(before, plan.status, paid)


@SMALL
@given(job=jobs, sequence=st.lists(happenings, min_size=1, max_size=12))
def test_the_account_charges_every_held_gpu_hour_once_and_never_goes_down(
    job: dict[str, Any], sequence: list[tuple[Any, ...]]
) -> None:
    cluster = _cluster(job)
    paid = Ledger()
    _pass(cluster, paid)
    for event in sequence:
        if event[0] == "clock":
            _pass(cluster, paid, skew=event[1])
        elif event[0] == "lost_write":
            _pass(cluster, paid, lose_write=True)
        else:
            _happen(cluster, event)
        for _ in range(2):
            _pass(cluster, paid)
        if cluster.finished:
            return
