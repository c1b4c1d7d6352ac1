"""A job that has ended stays Succeeded or Failed whatever its spec is edited to.

An edit the operator alone can judge wrong (here a GPU resource in the template, the same for
an image outside the allowed prefixes or ``checkpoint.report`` on an operator with no
endpoint) used to turn a finished job ``Invalid``; putting the spec back then took it for a
job to run again: a Failed job claimed nodes and started a new generation, a Succeeded one
said ``JobSucceeded`` a second time. The condition says what is wrong with the edit; the
state and the pool stay as the end left them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, TrainingJobSpec, parse_spec
from phased.core.model import ClaimNode, CreatePod
from tests.core.builders import Cluster, events, nodes, phase, spec


def _gpus_in_template(the_spec: TrainingJobSpec) -> TrainingJobSpec:
    raw: dict[str, Any] = the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["template"]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    return parse_spec(raw)


def _failed() -> Cluster:
    """A job that failed: its worker failed with no restart budget left."""
    cluster = Cluster(
        spec(phase("train", 2, 2), failurePolicy={"restartBudget": 0}),
        {n.name: n for n in nodes("h", 4)},
    )
    cluster.settle()
    name = next(p.name for p in cluster.running())
    cluster.pods[name] = replace(cluster.pods[name], phase="Failed", exit_code=1)
    cluster.settle()
    assert cluster.status.state == JobState.FAILED
    return cluster


def _succeeded() -> Cluster:
    cluster = Cluster(spec(phase("train", 2, 2)), {n.name: n for n in nodes("h", 4)})
    cluster.settle()
    cluster.advance(3600)
    cluster.finish_workers("train")
    cluster.settle()
    assert cluster.status.state == JobState.SUCCEEDED
    return cluster


@pytest.mark.parametrize("ended", [_failed, _succeeded], ids=["failed", "succeeded"])
def test_an_edit_only_the_operator_can_judge_leaves_a_finished_job_finished(ended: Any) -> None:
    cluster = ended()
    end = cluster.status.state
    history = cluster.status.phases
    original = cluster.the_spec

    cluster.the_spec = _gpus_in_template(original)
    plan = cluster.step()
    assert plan.status.state == end
    assert events(plan) == ["InvalidSpec"]
    (cond,) = [c for c in plan.status.conditions if c.type == "InvalidSpec"]
    assert cond.status == "True" and "nvidia.com/gpu" in cond.message

    cluster.the_spec = original  # put back: still the end it was, said once
    cluster.advance(60)
    plans = cluster.settle()
    actions = [a for p in plans for a in p.actions]
    assert not [a for a in actions if isinstance(a, ClaimNode | CreatePod)]
    assert [e for p in plans for e in events(p)] == []
    assert cluster.status.state == end
    assert cluster.status.phases[0].state == history[0].state
    assert cluster.status.phases[0].end_time == history[0].end_time
    assert cluster.running() == []
