"""Once a job has started, switching its checkpoint claim between one Phased creates
(``checkpoint.volume.size``, named ``<job>-checkpoints``) and an existing one it names
(``claimName``) is a move, even when the existing claim has that very name: the CRD's rule
refuses it (``has(size)`` must not change), and the operator's re-check, judged against the
kind the phase record keeps (``checkpointClaimCreated``), holds a job the same way when
such an edit got past the schema (an older CRD). Before, the re-check compared the claims'
names only and let it through."""

from __future__ import annotations

from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, TrainingJobSpec, parse_spec
from phased.core.model import CreatePod, DeletePod, EmitEvent
from tests.core.builders import JOB, Cluster, events, nodes, phase, spec

OWN = f"{JOB.name}-checkpoints"  # the name of the claim Phased creates
CREATED = {"volume": {"size": "1Ti"}, "path": "/ckpt"}
NAMED = {"volume": {"claimName": OWN}, "path": "/ckpt"}


def _running(checkpoint: dict[str, Any]) -> Cluster:
    cluster = Cluster(
        spec(phase("train", 4, 4), checkpoint=checkpoint), {n.name: n for n in nodes("h", 4)}
    )
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _with(the_spec: TrainingJobSpec, checkpoint: dict[str, Any]) -> TrainingJobSpec:
    raw = the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["checkpoint"] = checkpoint
    return parse_spec(raw)


SWITCHES = [
    ("created to an existing claim of its name", CREATED, NAMED, "(now an existing claim"),
    ("an existing claim to a created one of its name", NAMED, CREATED, "(now a claim Phased"),
]


@pytest.mark.parametrize(
    ("case", "before", "after", "needle"), SWITCHES, ids=[s[0] for s in SWITCHES]
)
def test_the_switch_holds_the_job_until_it_is_put_back(
    case: str, before: dict[str, Any], after: dict[str, Any], needle: str
) -> None:
    cluster = _running(before)
    status, workers = cluster.status, sorted(p.name for p in cluster.running())
    original = cluster.the_spec
    cluster.the_spec = _with(original, after)

    plan = cluster.step()
    assert [type(a) for a in plan.actions] == [EmitEvent], plan.actions
    assert events(plan) == ["InvalidSpec"] and plan.status.state == JobState.INVALID
    (cond,) = [c for c in plan.status.conditions if c.type == "InvalidSpec"]
    assert "where its checkpoints are cannot move" in cond.message, cond.message
    assert f"claim {OWN!r} as" in cond.message and needle in cond.message, cond.message
    assert plan.status.phases == status.phases
    assert sorted(p.name for p in cluster.running()) == workers

    cluster.the_spec = original
    cluster.advance(30)
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, CreatePod | DeletePod)]
    assert cluster.status.state == JobState.RUNNING


@pytest.mark.parametrize(("before", "created"), [(CREATED, True), (NAMED, False)])
def test_the_record_keeps_which_kind_of_claim_the_phase_started_with(
    before: dict[str, Any], created: bool
) -> None:
    train = _running(before).status.phases[0]
    assert (train.checkpoint_claim, train.checkpoint_claim_created) == (OWN, created)


def test_a_record_from_before_the_kind_learns_it_and_then_judges_the_switch() -> None:
    cluster = _running(CREATED)
    old = [r.model_copy(update={"checkpoint_claim_created": None}) for r in cluster.status.phases]
    cluster.status = cluster.status.model_copy(update={"phases": old})
    cluster.advance(30)
    cluster.step()
    assert cluster.status.phases[0].checkpoint_claim_created is True
    cluster.the_spec = _with(cluster.the_spec, NAMED)
    assert cluster.step().status.state == JobState.INVALID


def test_the_size_of_a_created_claim_stays_editable() -> None:
    cluster = _running(CREATED)
    cluster.the_spec = _with(cluster.the_spec, {**CREATED, "volume": {"size": "4Ti"}})
    plan = cluster.step()
    assert plan.status.state == JobState.RUNNING and "InvalidSpec" not in events(plan)
