"""A phase started under an older operator has a record that names only the chosen
``gpuType``, not the GPU shape (``gpusPerNode``, ``gpuTypes``) the re-check of edits and the
CRD's rules judge against: for the rest of the phase (weeks, on a long run) a shape edit
that slipped through would be honoured — every node then short of GPUs for the phase — and
the CRD's rule could only compare with the previous spec. The first pass of this operator
records the shape the phase runs with, from the spec it finds valid, so both judge against
the record from then on."""

from __future__ import annotations

from typing import Any

from phased.api.v1alpha1 import JobState
from phased.core.model import QuarantineNode
from tests.core.builders import events
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit, _training


def test_the_shape_is_recorded_and_a_later_shape_edit_holds_the_job() -> None:
    cluster = _training(spares=1)
    records = list(cluster.status.phases)
    records[1] = records[1].model_copy(update={"gpus_per_node": None, "gpu_types": None})
    cluster.status = cluster.status.model_copy(update={"phases": records})
    assert cluster.status.phases[1].gpu_type == "H100"

    cluster.advance(30)
    cluster.settle()
    train = cluster.status.phases[1]
    assert (train.gpus_per_node, train.gpu_types) == (8, ["H100"])

    def more_gpus(raw: dict[str, Any]) -> None:
        raw["phases"][1]["gpusPerNode"] = 16

    cluster.the_spec = _edit(cluster.the_spec, more_gpus)
    cluster.advance(30)
    plan = cluster.step()
    assert events(plan) == ["InvalidSpec"] and plan.status.state == JobState.INVALID
    assert not [a for a in plan.actions if isinstance(a, QuarantineNode)]
