"""A job being deleted is charged up to the pass that lets its nodes go, and no further.

Its last interval (from the last pass's ``accountedAt`` to the deletion's first pass) was
held at the pool the last pass left; the deletion pass charges it, as any pass does, and
leaves an empty pool as the basis: what the job holds once its releases land.
"""

from dataclasses import replace

import pytest

from phased.api.v1alpha1 import (
    Accounting,
    JobState,
    PhaseRecord,
    TrainingJobStatus,
    UsageBasis,
)
from phased.core.decide import decide
from phased.core.times import format_time
from tests.core.builders import JOB, SETTINGS, T0, at, snapshot, spec
from tests.core.test_each_interval_is_charged_at_the_pool_that_held_during_it import _pool

MINUTE = 60 / 3600


def _running_status() -> TrainingJobStatus:
    basis = UsageBasis(
        phase="train",
        gpu_type="H100",
        active_nodes=2,
        spare_nodes=1,
        running_workers=2,
        gpus_per_node=8,
    )
    return TrainingJobStatus(
        phase="train",
        world_size=2,
        state=JobState.RUNNING,
        phases=[PhaseRecord(name="train", start_time=format_time(T0))],
        accounting=Accounting(accounted_at=format_time(T0), basis=basis),
    )


def test_the_deletion_pass_charges_the_interval_since_the_last_pass_at_the_pool_it_pool():
    held, pods = _pool()
    deleting = replace(JOB, deleting=True)
    plan = decide(snapshot(spec(), held, pods, _running_status(), job=deleting), SETTINGS, at(60))
    acc = plan.status.accounting
    assert acc.active_gpu_hours == 16 * MINUTE
    assert acc.spare_gpu_hours == 8 * MINUTE
    assert acc.busy_gpu_hours == 16 * MINUTE
    assert acc.accounted_at == format_time(at(60))
    assert plan.status.phases[0].gpu_hours == 24 * MINUTE
    assert acc.cost > 0


def test_the_passes_after_the_releases_charge_nothing_more():
    held, pods = _pool()
    deleting = replace(JOB, deleting=True)
    first = decide(snapshot(spec(), held, pods, _running_status(), job=deleting), SETTINGS, at(60))
    assert not first.finished
    # The releases landed and the workers are gone: the job holds nothing a minute later.
    later = decide(snapshot(spec(), [], [], first.status, job=deleting), SETTINGS, at(120))
    assert later.finished
    assert later.status.accounting.gpu_hours == first.status.accounting.gpu_hours
    assert later.status.accounting.cost == first.status.accounting.cost


def test_a_deletion_pass_whose_releases_were_lost_charges_the_pool_again_from_the_last_write():
    held, pods = _pool()
    deleting = replace(JOB, deleting=True)
    status = _running_status()
    # The first deletion pass's actions failed: its status was not written; the next pass
    # starts again from the last written status and charges the whole time the pool held.
    plan = decide(snapshot(spec(), held, pods, status, job=deleting), SETTINGS, at(90))
    assert plan.status.accounting.gpu_hours == pytest.approx(24 * 90 / 3600)
