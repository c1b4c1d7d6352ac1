"""A node of the job's pool (``status.pool``, as the last pass left it) that the job no longer
holds because someone changed its marks — a label removed or edited, another
installation's name, a role Phased never writes, a taint that disagrees — is said once, with
a Warning ``NodeMarksChanged`` naming the node and what its marks say now. Before, the job
said only ``node n00 failed`` and ``lost node(s) n00``: a person looking for a broken node
found a healthy one. A node whose marks are all gone (released by hand, or a claim the node
view has not delivered yet) and a quarantined node let go of (it waits for a person) are not
news."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phased.core import labels
from phased.core.model import EmitEvent, NodeInfo, Plan, Taint
from tests.core.builders import JOB, Cluster, nodes, phase, spec


def _said(plans: list[Plan]) -> list[EmitEvent]:
    return [
        a
        for p in plans
        for a in p.actions
        if isinstance(a, EmitEvent) and a.reason == "NodeMarksChanged"
    ]


def _label(n: NodeInfo, key: str, value: str | None) -> NodeInfo:
    changed = {k: v for k, v in n.labels.items() if k != key}
    if value is not None:
        changed[key] = value
    return replace(n, labels=changed)


TAMPERED = [
    (
        "its uid label removed",
        "n00",
        lambda n: _label(n, labels.LABEL_JOB_UID, None),
        "PartialMarks",
    ),
    (
        "its role label set to borrowed",
        "n00",
        lambda n: _label(n, labels.LABEL_ROLE, "borrowed"),
        "PartialMarks",
    ),
    (
        "another installation's name",
        "n00",
        lambda n: _label(n, labels.LABEL_INSTALLATION, "team-b"),
        "OtherInstallation",
    ),
    (
        "its uid label on the spare edited",
        "n02",
        lambda n: _label(n, labels.LABEL_JOB_UID, "uid-x"),
        "PartialMarks",
    ),
    (
        "its pool taint another job's",
        "n01",
        lambda n: replace(n, taints=(Taint(labels.TAINT_POOL, "uid-x"),)),
        "PartialMarks",
    ),
]


@pytest.mark.parametrize(
    ("case", "name", "tamper", "reason"), TAMPERED, ids=[t[0] for t in TAMPERED]
)
def test_a_pool_node_whose_marks_were_changed_is_said_once(
    case: str, name: str, tamper: object, reason: str
) -> None:
    shared = {n.name: n for n in nodes("n", 4)}
    job = Cluster(spec(phase("train", 2, 2), spares=1), shared)
    quiet = job.settle()
    assert _said(quiet) == []  # claims, then the pool as the view delivers it: no news
    assert job.status.pool.active == ["n00", "n01"] and job.status.pool.spares == ["n02"]
    assert callable(tamper)
    shared[name] = tamper(shared[name])

    plans = [job.step() for _ in range(4)]

    said = _said(plans)
    assert len(said) == 1, case
    assert said[0].type == "Warning"
    assert f"node {name} " in said[0].message and reason in said[0].message


def test_a_node_whose_marks_are_all_gone_or_not_yet_seen_is_not_news() -> None:
    shared = {n.name: n for n in nodes("n", 4)}
    job = Cluster(spec(phase("train", 2, 2), spares=1), shared)
    job.settle()
    bare = shared["n02"]
    shared["n02"] = replace(
        bare,
        labels={k: v for k, v in bare.labels.items() if not k.startswith(labels.PREFIX)},
        taints=(),
    )
    assert JOB.uid not in shared["n02"].labels.values()

    plans = [job.step() for _ in range(3)]

    assert _said(plans) == []
