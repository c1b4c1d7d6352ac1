"""A job held by an edit that cannot be honoured (``InvalidSpec``) still holds its nodes and
its workers still run: every pass charges the interval at the pool it holds, as usual. The
hold is watched, not a gap: putting the spec back after an hour raises no ``AccountingGap``
and adds nothing to ``unobservedSeconds``, and the figures moved hour by hour meanwhile
instead of jumping when the hold ended."""

from __future__ import annotations

import pytest

from phased.api.v1alpha1 import JobState
from phased.core.times import parse_time
from tests.core.builders import events
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import (
    _drop_first,
    _edit,
    _training,
)


def test_an_hour_long_hold_is_charged_as_it_goes_and_is_no_gap() -> None:
    cluster = _training(spares=1)
    cluster.advance(30)
    cluster.settle()
    before = cluster.status.accounting
    train_before = cluster.status.phases[1].gpu_hours
    original = cluster.the_spec
    cluster.the_spec = _edit(original, _drop_first)

    said: list[str] = []
    for _ in range(120):  # an hour of passes, one every 30 s (the resync interval)
        cluster.advance(30)
        said += events(cluster.step())
    assert said == ["InvalidSpec"] and cluster.status.state == JobState.INVALID
    held = cluster.status.accounting
    assert parse_time(held.accounted_at) == cluster.now
    # 4 active + 1 spare H100 nodes of 8 GPUs for an hour, 4 workers running.
    assert held.gpu_hours - before.gpu_hours == pytest.approx(40.0)
    assert held.busy_gpu_hours - before.busy_gpu_hours == pytest.approx(32.0)
    assert held.cost - before.cost == pytest.approx(40.0 * 2.5)
    train = next(r for r in cluster.status.phases if r.name == "train")
    assert train.gpu_hours - train_before == pytest.approx(40.0)  # charged to its phase

    cluster.the_spec = original
    cluster.advance(30)
    plans = cluster.settle()
    assert "AccountingGap" not in [e for p in plans for e in events(p)]
    after = cluster.status.accounting
    assert after.unobserved_seconds == before.unobserved_seconds
    assert after.gpu_hours - before.gpu_hours == pytest.approx(40.0 + 40.0 / 120)
    assert cluster.status.state == JobState.RUNNING
