"""Where a job's checkpoints are (the claim its workers mount, ``checkpoint.path``) cannot move
once it has started. The re-check judges an edit against the phase records, each of which
records the place at its start; when none says it — the status write of the first start was
lost (so the CRD's rules, which read the status, let the move through), or an older operator
wrote the records — the workers' pods are the witness: the volume they mount and its path.
The move holds the job, a record without the place learns it from the workers, and a start
rebuilt from the workers records the place they use, never the spec's. Before, nothing was
judged and the next generation would silently resume from nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, TrainingJobSpec
from phased.core.draft import Draft
from phased.core.model import CreatePod, DeletePod, PodInfo
from phased.core.sizing import phase_type, recover_phase_start
from phased.core.storage import made_place
from phased.core.workers import Worker
from phased.kube.convert import checkpoint_fields
from tests.core.builders import JOB, Cluster, events, nodes, phase, spec
from tests.core.test_the_place_checkpoints_are_kept_cannot_move_once_the_job_started import (
    _edit,
    _no_volume,
    _other_claim,
    _other_path,
)

CLAIMED = {"volume": {"claimName": "ckpt-a"}, "path": "/ckpt"}


def _started_but_not_recorded(checkpoint: dict[str, Any]) -> Cluster:
    """A one-phase job whose start's status write was lost: its workers run, its record
    (and so every record) has no start and no place."""
    cluster = Cluster(
        spec(phase("train", 4, 4), checkpoint=checkpoint), {n.name: n for n in nodes("h", 4)}
    )
    for _ in range(6):
        before = cluster.status
        plan = cluster.step()
        if any(isinstance(a, CreatePod) for a in plan.actions):
            cluster.status = before  # the status write of this pass was lost
            break
    assert all(r.checkpoint_path is None and r.start_time is None for r in cluster.status.phases)
    assert len(cluster.running()) == 4
    return cluster


def _recorded_by_an_older_operator(checkpoint: dict[str, Any]) -> Cluster:
    """A running job whose records an operator from before the place was recorded wrote."""
    cluster = Cluster(
        spec(phase("train", 4, 4), checkpoint=checkpoint), {n.name: n for n in nodes("h", 4)}
    )
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    old = [
        r.model_copy(update={"checkpoint_claim": None, "checkpoint_path": None})
        for r in cluster.status.phases
    ]
    cluster.status = cluster.status.model_copy(update={"phases": old})
    return cluster


MOVES = [
    ("another claim", _other_claim, "claim 'ckpt-a' (now 'ckpt-b')"),
    ("another path", _other_path, "path '/ckpt' (now '/elsewhere')"),
    ("the volume removed", _no_volume, "claim 'ckpt-a' (now none)"),
]
WITNESSES = [_started_but_not_recorded, _recorded_by_an_older_operator]


@pytest.mark.parametrize("witness", WITNESSES, ids=["lost start", "older record"])
@pytest.mark.parametrize(("case", "change", "needle"), MOVES, ids=[m[0] for m in MOVES])
def test_a_move_is_judged_against_the_place_the_workers_use(
    witness: Callable[[dict[str, Any]], Cluster],
    case: str,
    change: Callable[[dict[str, Any]], None],
    needle: str,
) -> None:
    cluster = witness(CLAIMED)
    workers = sorted(p.name for p in cluster.running())
    original = cluster.the_spec
    cluster.the_spec = _edit(original, change)

    plan = cluster.step()
    assert events(plan) == ["InvalidSpec"] and plan.status.state == JobState.INVALID
    (cond,) = [c for c in plan.status.conditions if c.type == "InvalidSpec"]
    assert "where its checkpoints are cannot move" in cond.message and needle in cond.message
    assert sorted(p.name for p in cluster.running()) == workers

    cluster.the_spec = original
    cluster.advance(30)
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, CreatePod | DeletePod)]
    assert cluster.status.state == JobState.RUNNING
    train = cluster.status.phases[0]
    assert (train.checkpoint_claim, train.checkpoint_path) == ("ckpt-a", "/ckpt")
    assert sorted(p.name for p in cluster.running()) == workers


@pytest.mark.parametrize("witness", WITNESSES, ids=["lost start", "older record"])
def test_the_record_learns_the_place_from_the_workers(
    witness: Callable[[dict[str, Any]], Cluster],
) -> None:
    cluster = witness(CLAIMED)
    cluster.step()
    train = cluster.status.phases[0]
    assert (train.checkpoint_claim, train.checkpoint_path) == ("ckpt-a", "/ckpt")


@pytest.mark.parametrize("witness", WITNESSES, ids=["lost start", "older record"])
def test_a_start_rebuilt_from_the_workers_records_their_place_not_the_specs(
    witness: Callable[[dict[str, Any]], Cluster],
) -> None:
    """Whatever lets a moved spec reach it, the rebuilt record names the place the workers
    use, so every later check is judged against where the checkpoints really are."""
    cluster = witness(CLAIMED)
    moved = _edit(_edit(cluster.the_spec, _other_claim), _other_path)
    draft = Draft.for_snapshot(cluster.snapshot(), moved, cluster.settings, cluster.now)
    recover_phase_start(draft, phase_type(draft))
    assert (draft.record.checkpoint_claim, draft.record.checkpoint_path) == ("ckpt-a", "/ckpt")


def _made(checkpoint: dict[str, Any]) -> tuple[TrainingJobSpec, PodInfo]:
    the_spec = spec(phase("train", 1, 1), checkpoint=checkpoint)
    claim = checkpoint.get("volume", {}).get("claimName")
    worker = Worker(
        job=JOB, spec=the_spec, phase=the_spec.phases[0], generation=0, rank=0, world_size=1,
        claim=claim,
    )  # fmt: skip
    return the_spec, PodInfo(name=worker.name, **checkpoint_fields(worker.manifest()["spec"]))


@pytest.mark.parametrize(
    ("checkpoint", "place"),
    [
        (CLAIMED, ("ckpt-a", "/ckpt")),
        ({"volume": {"claimName": "ckpt-a"}, "path": "/ckpt/"}, ("ckpt-a", "/ckpt/")),
        ({"path": "/ckpt"}, ("", "/ckpt")),
        ({"path": "/ckpt/"}, ("", "/ckpt/")),
    ],
    ids=["a claim", "a claim, a trailing slash", "no volume", "no volume, a trailing slash"],
)
def test_the_place_reads_back_from_the_pod_as_it_was_made(
    checkpoint: dict[str, Any], place: tuple[str, str]
) -> None:
    the_spec, made = _made(checkpoint)
    assert made_place(JOB, the_spec, [made]) == place


def test_a_path_without_a_volume_is_read_from_the_root_when_the_spec_moved_it() -> None:
    _, made = _made({"path": "/ckpt"})
    assert made_place(JOB, spec(phase("train", 1, 1), checkpoint={"path": "/x"}), [made]) == (
        "",
        "/ckpt",
    )


def test_a_pod_that_says_nothing_of_its_checkpoints_is_no_witness() -> None:
    assert made_place(JOB, spec(phase("train", 1, 1)), [PodInfo(name="w")]) is None
