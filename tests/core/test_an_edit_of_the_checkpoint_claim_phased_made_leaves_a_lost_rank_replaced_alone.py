"""An edit of what never reaches a worker pod leaves a lost rank replaced alone.

``restartScope: Worker`` replaces a lost rank alone only beside peers made from the same
worker spec (the ``phased.dev/worker-spec`` label, a digest of what the spec made the worker
from). The ``size``, ``storageClassName`` and ``accessMode`` of the checkpoint claim Phased
creates stay editable once the job started (docs/design.md, "Edits of a running job"), but
they make nothing in a worker: it mounts the claim by its name, ``<job>-checkpoints``, which
the edit does not change, and the claim, once made, is never remade. The digest took the
whole ``checkpoint`` section, so such an edit made every worker "made before an edit": the
next lost rank (or stuck start, or rank never created) restarted the whole gang from the last
checkpoint, though the replacement would have been made exactly as its peers were.

The digest now covers what the checkpoint settings put in the pod (the interval, the path,
the claim mounted), and a worker labelled by an operator from before it is judged by the
digest that operator would have written for the spec as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, TrainingJobSpec, parse_spec
from phased.core.model import CreatePod, PodPhase
from phased.core.workers import worker_spec
from tests.core.builders import Cluster, events, node, of_type, phase, spec

Edit = Callable[[dict[str, Any]], None]

LABEL = "phased.dev/worker-spec"


def _cluster() -> Cluster:
    """Three ranks of train (Worker scope, torchrun over c10d), one spare, and a checkpoint
    claim Phased creates."""
    the_spec = spec(
        phase("train", 3, 3),
        spares=1,
        failurePolicy={"restartScope": "Worker"},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
        checkpoint={"volume": {"size": "1Ti", "storageClassName": "fast"}},
    )
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(5)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    return cluster


def _edit(the_spec: TrainingJobSpec, change: Edit) -> TrainingJobSpec:
    raw = the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    change(raw)
    return parse_spec(raw)


def _size(raw: dict[str, Any]) -> None:
    raw["checkpoint"]["volume"]["size"] = "2Ti"


def _storage_class(raw: dict[str, Any]) -> None:
    raw["checkpoint"]["volume"]["storageClassName"] = "faster"


def _access_mode(raw: dict[str, Any]) -> None:
    raw["checkpoint"]["volume"]["accessMode"] = "ReadWriteOnce"


def _fail(cluster: Cluster, rank: int) -> None:
    (name,) = [p.name for p in cluster.running() if p.rank == rank]
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=1)


CLAIM_EDITS = [
    ("the claim's size", _size),
    ("the claim's storage class", _storage_class),
    ("the claim's access mode", _access_mode),
]


@pytest.mark.parametrize(("case", "change"), CLAIM_EDITS, ids=[c[0] for c in CLAIM_EDITS])
def test_a_rank_lost_after_an_edit_of_the_claim_phased_made_is_replaced_alone(
    case: str, change: Edit
) -> None:
    cluster = _cluster()
    cluster.the_spec = _edit(cluster.the_spec, change)
    cluster.settle()

    _fail(cluster, 1)
    plan = cluster.step()
    assert plan.status.restart_generation == 0, events(plan)
    created = [c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod)]
    assert created == ["llm-train-g0-1-a1"]
    cluster.settle()
    assert sorted((p.generation, p.rank) for p in cluster.running()) == [(0, 0), (0, 1), (0, 2)]
    assert len({p.labels[LABEL] for p in cluster.running()}) == 1


def test_an_edit_of_what_the_worker_is_told_still_restarts_the_gang() -> None:
    cluster = _cluster()
    cluster.the_spec = _edit(
        cluster.the_spec, lambda raw: raw["checkpoint"].update({"interval": "15m"})
    )
    cluster.settle()
    _fail(cluster, 1)
    plan = cluster.step()
    assert plan.status.restart_generation == 1
    assert "WorkersRestarted" in events(plan)


def _before(the_spec: TrainingJobSpec) -> str:
    """The label an operator from before this rule wrote: the whole checkpoint section."""
    the_phase = the_spec.phases[0]
    pod = the_spec.worker_pod(the_phase)
    made = {
        "labels": pod.labels,
        "annotations": pod.annotations,
        "spec": pod.spec,
        "launcher": the_spec.launcher_of(the_phase).model_dump(mode="json", by_alias=True),
        "gpusPerNode": the_phase.gpus_per_node,
        "checkpoint": the_spec.checkpoint.model_dump(
            mode="json", by_alias=True, exclude={"report", "final_timeout"}
        ),
    }
    return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()[:16]


def _labelled(cluster: Cluster, value: str) -> None:
    for p in cluster.running():
        cluster.pods[p.name] = replace(p, labels={**p.labels, LABEL: value})


def test_workers_labelled_by_an_older_operator_from_the_spec_as_it_is_are_replaced_alone() -> None:
    cluster = _cluster()
    _labelled(cluster, _before(cluster.the_spec))
    _fail(cluster, 2)
    plan = cluster.step()
    assert plan.status.restart_generation == 0, events(plan)
    assert [c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod)] == [
        "llm-train-g0-2-a1"
    ]


def test_workers_labelled_by_an_older_operator_from_another_spec_restart_the_gang() -> None:
    cluster = _cluster()
    edited = _edit(cluster.the_spec, _size)
    _labelled(cluster, _before(edited))  # made from a spec the job no longer has
    assert worker_spec(edited, edited.phases[0]) == worker_spec(
        cluster.the_spec, cluster.the_spec.phases[0]
    )
    _fail(cluster, 2)
    plan = cluster.step()
    assert plan.status.restart_generation == 1
    assert "WorkersRestarted" in events(plan)
