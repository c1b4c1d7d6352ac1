"""A job held by an edit that cannot be honoured is edited again, still wrongly but
differently: the new problem gets its own Warning event (the condition's message alone
changing is easy to miss), while passes that find the same problem say nothing new."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import JobState
from phased.core.model import EmitEvent
from tests.core.builders import events
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import (
    _drop_first,
    _edit,
    _training,
)


def _more_gpus(raw: dict[str, Any]) -> None:
    raw["phases"][1]["gpusPerNode"] = 16


def test_a_different_problem_is_a_new_event_the_same_one_is_not() -> None:
    cluster = _training()
    original = cluster.the_spec
    cluster.the_spec = _edit(original, _drop_first)
    cluster.job = replace(cluster.job, generation=2)
    assert events(cluster.step()) == ["InvalidSpec"]
    cluster.advance(30)
    assert events(cluster.step()) == []

    cluster.the_spec = _edit(original, _more_gpus)
    cluster.job = replace(cluster.job, generation=3)
    cluster.advance(30)
    plan = cluster.step()
    (said,) = [a for a in plan.actions if isinstance(a, EmitEvent)]
    assert said.reason == "InvalidSpec" and "gpusPerNode 8 (now 16)" in said.message
    assert plan.status.state == JobState.INVALID and plan.status.observed_generation == 3
    cluster.advance(30)
    assert events(cluster.step()) == []
