"""The status write that recorded a phase's start (its first workers created) was lost, so
the record still says Pending and the CRD's rules, which read the status, let an edit rename
or move that phase. Its workers are the witness that it started: the operator holds the job
(``InvalidSpec``, nothing touched) instead of starting a second gang beside the one that
runs unseen, or skipping a phase. Putting the spec back lets it carry on, no restart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState
from phased.core.model import CreatePod, DeletePod
from tests.core.builders import Cluster, events, nodes, phase, spec
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit


def _train_started_but_not_recorded() -> Cluster:
    cluster = Cluster(
        spec(phase("preprocess", 2, 2), phase("train", 4, 4), phase("validate", 2, 2)),
        {n.name: n for n in nodes("h", 6)},
    )
    cluster.settle()
    cluster.advance(3600)
    cluster.finish_workers("preprocess")
    for _ in range(6):
        before = cluster.status
        plan = cluster.step()
        if any(isinstance(a, CreatePod) for a in plan.actions):
            cluster.status = before  # the status write of this pass was lost
            break
    train = cluster.status.phases[1]
    assert train.name == "train" and train.start_time is None
    assert len([p for p in cluster.running() if p.phase_name == "train"]) == 4
    return cluster


def _rename(raw: dict[str, Any]) -> None:
    raw["phases"][1]["name"] = "pretrain"


def _swap(raw: dict[str, Any]) -> None:
    raw["phases"] = [raw["phases"][0], raw["phases"][2], raw["phases"][1]]


@pytest.mark.parametrize("change", [_rename, _swap], ids=["renamed", "moved after validate"])
def test_the_edit_holds_the_job_and_putting_it_back_carries_on(
    change: Callable[[dict[str, Any]], None],
) -> None:
    cluster = _train_started_but_not_recorded()
    workers = sorted(p.name for p in cluster.running())
    original = cluster.the_spec
    cluster.the_spec = _edit(original, change)

    plan = cluster.step()
    assert events(plan) == ["InvalidSpec"] and plan.status.state == JobState.INVALID
    (cond,) = [c for c in plan.status.conditions if c.type == "InvalidSpec"]
    assert "'train' has already started" in cond.message
    assert sorted(p.name for p in cluster.running()) == workers

    cluster.the_spec = original
    cluster.advance(30)
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, CreatePod | DeletePod)]
    assert cluster.status.phase == "train" and cluster.status.state == JobState.RUNNING
    assert cluster.status.phases[1].start_time is not None
    assert sorted(p.name for p in cluster.running()) == workers
