"""Once a job has started, the place its checkpoints are written to and resumed from (the
claim its workers mount and ``checkpoint.path``) keeps: an edit that would move it (one that
slipped past the CRD's transition rule) holds the job untouched; what does not move it
(interval, finalTimeout, report; the size of a claim Phased created) is honoured."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, TrainingJobSpec, parse_spec
from phased.core.model import EmitEvent
from tests.core.builders import Cluster, events, nodes, phase, spec

CLAIMED = {"volume": {"claimName": "ckpt-a"}, "path": "/ckpt"}
CREATED = {"volume": {"size": "1Ti"}, "path": "/ckpt"}


def _training(checkpoint: dict[str, Any]) -> Cluster:
    cluster = Cluster(
        spec(phase("preprocess", 2, 2), phase("train", 4, 4), checkpoint=checkpoint),
        {n.name: n for n in nodes("h", 8)},
    )
    cluster.settle()
    cluster.advance(3600)
    cluster.finish_workers("preprocess")
    cluster.settle()
    assert cluster.status.phase == "train" and cluster.status.state == JobState.RUNNING
    return cluster


def _edit(the_spec: TrainingJobSpec, change: Callable[[dict[str, Any]], None]) -> TrainingJobSpec:
    raw = the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    change(raw["checkpoint"])
    return parse_spec(raw)


def _other_claim(c: dict[str, Any]) -> None:
    c["volume"] = {"claimName": "ckpt-b"}


def _to_created(c: dict[str, Any]) -> None:
    c["volume"] = {"size": "2Ti"}


def _to_existing(c: dict[str, Any]) -> None:
    c["volume"] = {"claimName": "ckpt-a"}


def _no_volume(c: dict[str, Any]) -> None:
    del c["volume"]


def _other_path(c: dict[str, Any]) -> None:
    c["path"] = "/elsewhere"


MOVES = [
    ("another existing claim", CLAIMED, _other_claim, "claim 'ckpt-a' (now 'ckpt-b')"),
    ("an existing claim for one Phased creates", CLAIMED, _to_created, "claim 'ckpt-a'"),
    ("a created claim for an existing one", CREATED, _to_existing, "(now 'ckpt-a')"),
    ("the volume removed", CLAIMED, _no_volume, "claim 'ckpt-a' (now none)"),
    ("another path", CLAIMED, _other_path, "path '/ckpt' (now '/elsewhere')"),
]


@pytest.mark.parametrize(("case", "before", "change", "needle"), MOVES, ids=[c[0] for c in MOVES])
def test_an_edit_moving_the_checkpoints_of_a_started_job_holds_it_untouched(
    case: str,
    before: dict[str, Any],
    change: Callable[[dict[str, Any]], None],
    needle: str,
) -> None:
    cluster = _training(before)
    status = cluster.status
    workers = sorted(p.name for p in cluster.running())
    cluster.the_spec = _edit(cluster.the_spec, change)

    plan = cluster.step()
    assert [type(a) for a in plan.actions] == [EmitEvent], plan.actions
    assert events(plan) == ["InvalidSpec"]
    assert plan.status.state == JobState.INVALID
    (cond,) = [c for c in plan.status.conditions if c.type == "InvalidSpec"]
    assert "checkpoints" in cond.message and needle in cond.message, cond.message
    assert plan.status.phases == status.phases
    assert sorted(p.name for p in cluster.running()) == workers


def test_putting_the_place_back_lets_the_job_go_on() -> None:
    cluster = _training(CLAIMED)
    original = cluster.the_spec
    cluster.the_spec = _edit(original, _other_claim)
    assert cluster.step().status.state == JobState.INVALID
    cluster.the_spec = original
    plan = cluster.step()
    assert plan.status.state == JobState.RUNNING
    assert not [c for c in plan.status.conditions if c.type == "InvalidSpec" and c.status == "True"]


def _tuned(c: dict[str, Any]) -> None:
    c["interval"] = "15m"
    c["finalTimeout"] = "30m"
    if "size" in c.get("volume", {}):
        c["volume"]["size"] = "4Ti"


@pytest.mark.parametrize("before", [CLAIMED, CREATED], ids=["existing claim", "created claim"])
def test_what_does_not_move_the_checkpoints_stays_editable(before: dict[str, Any]) -> None:
    cluster = _training(before)
    cluster.the_spec = _edit(cluster.the_spec, _tuned)
    plan = cluster.step()
    assert plan.status.state == JobState.RUNNING
    assert "InvalidSpec" not in events(plan)


def test_the_phase_record_says_where_its_checkpoints_are() -> None:
    cluster = _training(CLAIMED)
    train = cluster.status.phases[1]
    assert (train.checkpoint_claim, train.checkpoint_path) == ("ckpt-a", "/ckpt")


def test_a_job_not_yet_started_may_move_its_checkpoints() -> None:
    cluster = Cluster(
        spec(phase("train", 4, 4), checkpoint=CLAIMED), {n.name: n for n in nodes("h", 2)}
    )
    cluster.settle()
    assert cluster.status.state == JobState.WAITING
    cluster.the_spec = _edit(cluster.the_spec, _other_claim)
    assert cluster.step().status.state == JobState.WAITING
