"""``restartScope: Worker`` replaces a lost rank alone, to rejoin its peers' rendezvous.

The replacement is made from the spec as it is now; its peers from the spec as it was when
their generation was made. An edit of the running phase's worker — its template (image, env,
volumes, resources, tolerations, ...), its launcher, the checkpoint settings it is given —
made the replacement unlike its peers: another image beside them, or, with a new
``launcher.port``, a rendezvous endpoint nobody listened on, so it could never rejoin (it
failed at each attempt, spending ``restartBudget``, while the job said Recovering). Each
worker carries the label ``phased.dev/worker-spec``, a digest of what the spec made it from;
a rank lost while its generation's workers were made from another restarts the gang (a new
generation, every rank from the edit, resuming from the last checkpoint). An edit put back
before the loss, or one that does not touch the worker (spares, budgets, priority), still
replaces the rank alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, TrainingJobSpec, parse_spec
from phased.core.model import CreatePod, PodPhase
from tests.core.builders import Cluster, events, node, of_type, phase, spec

Edit = Callable[[dict[str, Any]], None]


def _cluster() -> Cluster:
    """Three ranks of train (Worker scope, torchrun over c10d), one spare."""
    the_spec = spec(
        phase("train", 3, 3),
        spares=1,
        failurePolicy={"restartScope": "Worker"},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(5)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _edit(the_spec: TrainingJobSpec, change: Edit) -> TrainingJobSpec:
    raw = the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    change(raw)
    return parse_spec(raw)


def _image(raw: dict[str, Any]) -> None:
    raw["template"]["image"] = "registry.example/llm:2"


def _port(raw: dict[str, Any]) -> None:
    raw["launcher"]["port"] = 29600


def _phase_env(raw: dict[str, Any]) -> None:
    raw["phases"][0]["template"] = {"env": [{"name": "NCCL_ALGO", "value": "Ring"}]}


def _checkpoint_interval(raw: dict[str, Any]) -> None:
    # (checkpoint.path cannot move once the job started: that edit holds the job instead)
    raw["checkpoint"]["interval"] = "15m"


def _spares(raw: dict[str, Any]) -> None:
    raw["spares"]["count"] = 2


def _budget(raw: dict[str, Any]) -> None:
    raw["failurePolicy"]["restartBudget"] = 7


def _fail(cluster: Cluster, rank: int) -> None:
    (name,) = [p.name for p in cluster.running() if p.rank == rank]
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=1)


def _stuck(cluster: Cluster, rank: int) -> None:
    (name,) = [p.name for p in cluster.running() if p.rank == rank]
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.PENDING, node_name=None)


WORKER_EDITS = [
    ("the image", _image),
    ("the launcher's port", _port),
    ("the phase template's env", _phase_env),
    ("the checkpoint interval", _checkpoint_interval),
]


@pytest.mark.parametrize(("case", "change"), WORKER_EDITS, ids=[c[0] for c in WORKER_EDITS])
def test_a_rank_lost_after_an_edit_of_its_worker_restarts_the_gang_from_the_edit(
    case: str, change: Edit
) -> None:
    cluster = _cluster()
    cluster.the_spec = _edit(cluster.the_spec, change)
    assert not [a for p in cluster.settle() for a in p.actions if isinstance(a, CreatePod)]

    _fail(cluster, 1)
    plan = cluster.step()
    assert plan.status.restart_generation == 1, events(plan)
    (said,) = [a.message for a in plan.actions if getattr(a, "reason", "") == "WorkersRestarted"]
    assert "generation 0 -> 1" in said and "edited" in said
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    made = sorted((p.generation, p.rank) for p in cluster.running())
    assert made == [(1, 0), (1, 1), (1, 2)]  # every rank again, all made from the edit
    assert len({p.labels["phased.dev/worker-spec"] for p in cluster.running()}) == 1


def test_a_rank_stuck_pending_after_an_edit_of_its_worker_restarts_the_gang() -> None:
    cluster = _cluster()
    cluster.the_spec = _edit(cluster.the_spec, _image)
    _stuck(cluster, 2)
    cluster.advance(11 * 60)  # past pendingGrace
    plan = cluster.step()
    assert plan.status.restart_generation == 1
    assert "WorkersRestarted" in events(plan)


NOT_WORKER_EDITS = [
    ("spares", _spares),
    ("the restart budget", _budget),
    ("the image, put back", lambda raw: None),
]


@pytest.mark.parametrize(("case", "change"), NOT_WORKER_EDITS, ids=[c[0] for c in NOT_WORKER_EDITS])
def test_a_rank_lost_after_an_edit_its_peers_are_made_as_is_replaced_alone(
    case: str, change: Edit
) -> None:
    cluster = _cluster()
    original = cluster.the_spec
    cluster.the_spec = _edit(original, _image)  # an edit of the worker, then put back
    cluster.settle()
    cluster.the_spec = _edit(original, change)
    cluster.settle()

    _fail(cluster, 1)
    plan = cluster.step()
    assert plan.status.restart_generation == 0
    created = [c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod)]
    assert created == ["llm-train-g0-1-a1"]
    cluster.settle()
    assert sorted((p.generation, p.rank) for p in cluster.running()) == [(0, 0), (0, 1), (0, 2)]
