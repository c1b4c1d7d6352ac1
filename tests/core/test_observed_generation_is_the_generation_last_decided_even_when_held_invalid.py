"""``status.observedGeneration`` is the ``metadata.generation`` the last pass decided on, as
Kubernetes has it: also when that pass found the spec invalid and held the job (state
``Invalid``, the ``InvalidSpec`` condition carrying the same generation), so a tool waiting
for the generation to be observed sees the verdict rather than waiting for ever. It does not
say the spec was honoured: nothing of a held edit reaches the job (here the spares keep
their taint) until it is valid."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.conditions import ConditionType, find
from phased.core.settings import Settings, WorkerPolicy
from tests.core.builders import SETTINGS
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _training
from tests.core.test_an_edit_of_the_spares_idle_policy_is_said_once_though_the_view_lags import (
    _set_policy,
)


def test_a_held_edit_is_observed_and_not_honoured() -> None:
    cluster = _training(spares=1)
    spares = cluster.held(NodeRole.SPARE)
    before = cluster.job.generation
    assert cluster.status.observed_generation == before
    cluster.settings = Settings(workers=WorkerPolicy(allowed_image_prefixes=["corp.example/"]))
    _set_policy(cluster, "Preemptible")
    cluster.advance(30)
    cluster.settle()
    assert cluster.status.state == JobState.INVALID
    assert cluster.status.observed_generation == before + 1
    cond = find(cluster.status.conditions, ConditionType.INVALID_SPEC)
    assert cond is not None and cond.status == "True" and cond.observed_generation == before + 1
    assert {t.key for n in spares for t in cluster.nodes[n].taints} == {labels.TAINT_POOL}
    assert cluster.status.pool.spares_while_idle == "Reserved"

    cluster.settings = SETTINGS
    cluster.advance(30)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.observed_generation == before + 1
    assert {t.key for n in spares for t in cluster.nodes[n].taints} == {labels.TAINT_SPARE}
