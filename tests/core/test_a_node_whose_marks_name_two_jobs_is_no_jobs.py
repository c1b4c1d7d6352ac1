"""A node is a job's only when its marks agree on the job: the pool, spare or quarantine taint
Phased writes carries the UID of the job it claimed the node for, so a ``job-uid`` label that
names another UID than the taint (a person edited it, a script copied another node's labels)
makes the node no one's. It is left alone as ``PartialMarks`` — never taken by the job the
label now names (whose workers could not even land there: they tolerate their own pool taint
only), never released as an orphan of a job the label names that does not exist — and the
job that held it moves its worker as after any loss of a node."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import (
    ClaimNode,
    CreatePod,
    EmitEvent,
    JobRef,
    NodeInfo,
    ReleaseNode,
    SetNodeRole,
    Taint,
)
from phased.core.ownership import Kind, LeftAlone, holds, ownership
from tests.core.builders import (
    JOB,
    LONG_AGO,
    SETTINGS,
    Cluster,
    node,
    nodes,
    of_type,
    owned,
    phase,
    spec,
)

OTHER = JobRef(namespace="ml", name="other", uid="uid-other", generation=1, created=LONG_AGO)


def _relabelled(n: NodeInfo, uid: str) -> NodeInfo:
    """``n`` with its ``job-uid`` label changed by hand to ``uid`` (taints untouched)."""
    return replace(n, labels={**n.labels, labels.LABEL_JOB_UID: uid})


@pytest.mark.parametrize(
    ("case", "tampered"),
    [
        ("the uid label of another job", _relabelled(owned(node("m"), NodeRole.ACTIVE), OTHER.uid)),
        ("the uid label of no job", _relabelled(owned(node("m"), NodeRole.SPARE), "uid-nobody")),
        (
            "a spare taint of another job",
            replace(
                owned(node("m"), NodeRole.SPARE, OTHER),
                taints=(Taint(labels.TAINT_SPARE, JOB.uid),),
            ),
        ),
        (
            "a quarantine taint of another job beside the pool taint",
            replace(
                owned(node("m"), NodeRole.ACTIVE, OTHER),
                taints=(
                    Taint(labels.TAINT_POOL, OTHER.uid),
                    Taint(labels.TAINT_QUARANTINE, JOB.uid),
                ),
            ),
        ),
    ],
)
def test_a_node_whose_label_and_taint_name_two_jobs_is_held_by_neither(
    case: str, tampered: NodeInfo
) -> None:
    owner = ownership(tampered, SETTINGS.installation)
    assert (owner.kind, owner.reason) == (Kind.LEFT_ALONE, LeftAlone.PARTIAL_MARKS), case
    for uid in (JOB.uid, OTHER.uid, "uid-nobody"):
        assert not holds(tampered, uid, SETTINGS.installation), (case, uid)


def test_the_job_a_relabelled_node_now_names_does_not_start_its_workers_there() -> None:
    """``llm`` runs on n00 and n01; ``other`` waits for two nodes with one free (n02). A
    person writes other's UID on n00: other must not count it and start a worker there
    (beside llm's, on a node whose pool taint its workers do not tolerate)."""
    shared = {n.name: n for n in nodes("n", 2)}
    mine = Cluster(spec(phase("train", 2, 2)), shared)
    mine.settle()
    assert mine.held(NodeRole.ACTIVE) == ["n00", "n01"]
    shared["n02"] = node("n02")
    theirs = Cluster(spec(phase("train", 2, 2)), shared, job=OTHER)
    shared["n00"] = _relabelled(shared["n00"], OTHER.uid)

    plan = theirs.decide()

    assert of_type(plan, CreatePod) == []
    assert of_type(plan, ClaimNode) == []  # gang admission: one free node is not two
    assert plan.status.state == JobState.WAITING
    touched = {a.node for a in plan.actions if isinstance(a, SetNodeRole | ReleaseNode)}
    assert "n00" not in touched
    said = [a for a in plan.actions if isinstance(a, EmitEvent) and a.reason == "NodesLeftAlone"]
    assert len(said) == 1 and "n00 (PartialMarks)" in said[0].message


def test_the_job_that_held_a_relabelled_node_moves_its_worker_and_leaves_the_node_alone() -> None:
    shared = {n.name: n for n in nodes("n", 4)}
    mine = Cluster(spec(phase("train", 2, 2), spares=1), shared)
    mine.settle()
    assert mine.held(NodeRole.ACTIVE) == ["n00", "n01"]
    assert mine.held(NodeRole.SPARE) == ["n02"]
    shared["n00"] = _relabelled(shared["n00"], OTHER.uid)
    before = len(mine.log)

    mine.settle()

    assert mine.held(NodeRole.ACTIVE) == ["n01", "n02"]
    assert mine.held(NodeRole.SPARE) == ["n03"]
    assert sorted(p.node_name or "" for p in mine.running()) == ["n01", "n02"]
    assert shared["n00"].labels[labels.LABEL_JOB_UID] == OTHER.uid  # never written on
    assert not any(getattr(a, "node", None) == "n00" for a in mine.log[before:])
