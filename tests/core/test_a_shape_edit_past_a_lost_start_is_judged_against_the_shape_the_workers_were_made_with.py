"""The status write that recorded a phase's start (and the GPU shape it started with) was
lost at a phase boundary, so the CRD's rules, which read the status, take the phase for not
started and let an edit of its ``gpusPerNode`` or ``gpuTypes`` through. The workers are the
witness of the shape they were made with (each carries it in its labels): the edit is
judged against that, and holds the job (``InvalidSpec``, nothing touched) until it is put
back; the start the next pass recovers records the workers' shape, not the spec's. Before,
the edit check saw no shape in the record and let the edit pass, and the recovered start
recorded the edited shape although the workers ran with the old one."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState
from phased.core import labels
from phased.core.model import CreatePod, DeletePod, PodInfo
from phased.core.podlabels import Shape, made_shape
from tests.core.builders import events, pod
from tests.core.test_a_phase_whose_workers_exist_has_started_even_when_its_record_lost_the_start import (  # noqa: E501
    _train_started_but_not_recorded,
)
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit


def _fewer_gpus(raw: dict[str, Any]) -> None:
    raw["phases"][1]["gpusPerNode"] = 4


def _another_type(raw: dict[str, Any]) -> None:
    raw["phases"][1]["gpuTypes"] = ["H200", "H100"]


@pytest.mark.parametrize("change", [_fewer_gpus, _another_type], ids=["gpusPerNode", "gpuTypes"])
def test_the_edit_holds_the_job_until_the_shape_is_put_back(change: Any) -> None:
    cluster = _train_started_but_not_recorded()
    workers = sorted(p.name for p in cluster.running())
    original = cluster.the_spec
    cluster.the_spec = _edit(original, change)

    plan = cluster.step()
    assert events(plan) == ["InvalidSpec"] and plan.status.state == JobState.INVALID
    (cond,) = [c for c in plan.status.conditions if c.type == "InvalidSpec"]
    assert "'train' is running and its GPU shape cannot change" in cond.message

    cluster.the_spec = original
    cluster.advance(30)
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, CreatePod | DeletePod)]
    assert cluster.status.state == JobState.RUNNING
    train = cluster.status.phases[1]
    assert (train.gpus_per_node, train.gpu_types) == (8, ["H100"])
    assert sorted(p.name for p in cluster.running()) == workers


def test_an_unedited_phase_recovers_its_start_with_its_shape() -> None:
    cluster = _train_started_but_not_recorded()
    cluster.settle()
    train = cluster.status.phases[1]
    assert train.start_time is not None and cluster.status.state == JobState.RUNNING
    assert (train.gpus_per_node, train.gpu_types) == (8, ["H100"])


def _labelled(gpus: str, types: str) -> PodInfo:
    made = pod("w", "train", 0)
    shape = {labels.LABEL_GPUS_PER_NODE: gpus, labels.LABEL_GPU_TYPES: types}
    return replace(made, labels={**made.labels, **shape})


@pytest.mark.parametrize(
    ("gpus", "types"),
    [("99", "H100"), ("-1", "H100"), ("x", "H100"), ("8", "B200"), ("8", "H100.H100")],
    ids=["beyond the bound", "negative", "not a number", "unknown type", "a type twice"],
)
def test_a_shape_label_phased_could_not_have_written_is_not_believed(gpus: str, types: str) -> None:
    assert made_shape([_labelled(gpus, types)]) is None


def test_the_shape_labels_read_back_as_written() -> None:
    assert made_shape([_labelled("8", "H200.H100")]) == Shape(8, ("H200", "H100"))
    assert made_shape([_labelled("0", "")]) == Shape(0, ())  # a CPU phase
    assert made_shape([pod("w", "train", 0)]) is None  # made before the labels
