"""A pod being deleted still holds its node until it is gone: another job's worker given a
long grace to write its checkpoint keeps the node's GPUs all that time, and the scheduler
counts it. Claimed meanwhile, the node got a worker that waited Pending beside it — past
``pendingGrace`` when the grace was longer, a failed start that was no one's fault. So the
node is not claimed until those pods are gone (a finished pod, a DaemonSet's, a mirror or
one of a preemptible class still keeps no node out), and the job says which pods it waits
for."""

from __future__ import annotations

import pytest

from phased.api.v1alpha1 import JobState
from phased.core.decide import decide
from phased.core.model import ClaimNode, EmitEvent, NodePod
from phased.core.occupancy import blocking, displaceable, guests
from phased.core.settings import Settings
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    node,
    node_pod,
    of_type,
    phase,
    snapshot,
    spec,
)

TRAIN = spec(phase("train", 2, 2))
CLASSES = Settings(preemptible_priority_classes=["best-effort"])


def _leaving(**flags: object) -> NodePod:
    """Another job's worker on node "busy", deleted with a long grace and still stopping."""
    return node_pod(
        "other-train-g0-0", "busy", namespace="ml", controller="uid-other", deleting=True, **flags
    )


def _claimed(pods: tuple[NodePod, ...], *names: str, settings: Settings = SETTINGS):
    the_nodes = [node("busy"), *(node(n) for n in names)]
    plan = decide(snapshot(TRAIN, the_nodes, node_pods={"busy": pods}), settings, T0)
    return plan, sorted(c.node for c in of_type(plan, ClaimNode))


def test_a_node_whose_pod_is_still_terminating_is_not_claimed():
    plan, claimed = _claimed((_leaving(),), "free")
    assert claimed == []  # the whole gang, or nothing while "busy" is held
    assert plan.status.state == JobState.WAITING
    (said,) = [a for a in plan.actions if isinstance(a, EmitEvent) and a.reason == "NodesLeftAlone"]
    assert "busy (RunningPods: ml/other-train-g0-0 (terminating))" in said.message


def test_a_free_node_is_taken_instead_of_one_still_being_freed():
    _, claimed = _claimed((_leaving(),), "free", "other")
    assert claimed == ["free", "other"]


def test_once_the_terminating_pod_is_gone_the_node_is_claimed():
    _, claimed = _claimed((), "free")
    assert claimed == ["busy", "free"]


@pytest.mark.parametrize(
    ("case", "pod", "settings"),
    [
        ("a finished pod being deleted", _leaving(terminal=True), SETTINGS),
        ("a DaemonSet's pod being deleted", _leaving(daemon=True), SETTINGS),
        ("a preemptible pod being deleted", _leaving(priority_class="best-effort"), CLASSES),
    ],
)
def test_what_keeps_no_node_out_keeps_none_out_while_it_is_deleted(case, pod, settings):
    _, claimed = _claimed((pod,), "free", settings=settings)
    assert claimed == ["busy", "free"]


def test_a_pod_being_deleted_blocks_a_claim_but_is_not_asked_to_leave_again():
    leaving = _leaving()
    assert blocking([leaving], SETTINGS) == [leaving]
    assert guests([leaving], JOB, T0, SETTINGS).evict == ()  # already on its way out
    low = _leaving(priority_class="best-effort")
    assert blocking([low], CLASSES) == [] and displaceable([low], CLASSES) == []
