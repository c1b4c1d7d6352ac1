"""A node is quarantined as it fails, just when the node lifecycle controller taints it. The
quarantine is a JSON patch with no resourceVersion: its ``test`` ops hold every field the
quarantine reads to what the view read, and it appends its taint to the list. A write
meanwhile to another field (the controller's taint) does not fail it: one request, the
other taint kept. A write to a field it read (a cordon, another job's label) fails a test,
and the node is read and the quarantine made from the read, as before. What the JSON patch
writes is what the merge patch would have written."""

from __future__ import annotations

import asyncio
import copy
import itertools
from datetime import UTC, datetime
from typing import Any

import pytest

from phased.core import labels
from phased.core.model import JobRef
from phased.core.quarantine import QuarantineNote, decode_quarantine, encode_quarantine
from phased.kube.nodes import NodeVerbs
from phased.kube.nodeview import NodeView
from tests.kube.fake_cluster import FakeCluster, verbs_on_a_view

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")
MINE = "default"
NOTE = encode_quarantine(QuarantineNote(JOB.uid, "NodeNotReady", "node n Ready=False", NOW, NOW))
POOL = {"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"}
SPARE = {"key": labels.TAINT_SPARE, "value": JOB.uid, "effect": "NoSchedule"}
UNREACHABLE = {
    "key": "node.kubernetes.io/unreachable",
    "effect": "NoExecute",
    "timeAdded": "2026-03-01T11:59:30Z",
}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
PATCH = ("PATCH", "/api/v1/nodes/n")
GET = ("GET", "/api/v1/nodes/n")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _held(role: str = "active") -> dict[str, str]:
    return {
        labels.LABEL_JOB_UID: JOB.uid,
        labels.LABEL_JOB: JOB.name,
        labels.LABEL_JOB_NAMESPACE: JOB.namespace,
        labels.LABEL_ROLE: role,
        labels.LABEL_INSTALLATION: MINE,
    }


def _guards() -> dict[str, str]:
    guards = dict.fromkeys(labels.SCALE_DOWN_GUARDS, "true")
    guards[labels.ANNOTATION_GUARDS] = ",".join(labels.SCALE_DOWN_GUARDS)
    return guards


def _setup(
    role: str = "active",
    annotations: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    **spec: Any,
) -> tuple[FakeCluster, NodeView, NodeVerbs]:
    cluster = FakeCluster()
    notes = {labels.ANNOTATION_CLAIMED_AT: "2026-03-01T10:00:00Z", **_guards()}
    taints = [POOL] if taints is None else taints
    if taints:  # as the API sends it: a node with no taints has no list
        spec["taints"] = copy.deepcopy(taints)
    cluster.add_node(
        "n", _held(role), annotations=notes if annotations is None else annotations, spec=spec
    )
    view, verbs = verbs_on_a_view(cluster, MINE)
    return cluster, view, verbs


def _behind(cluster: FakeCluster, change: Any) -> None:
    """Another writer changes the node; the view has not seen it yet."""
    change(cluster.nodes["n"])
    cluster.nodes["n"]["metadata"]["resourceVersion"] = "999"


def test_the_lifecycle_controllers_taint_written_meanwhile_lands_beside_the_quarantine() -> None:
    cluster, view, verbs = _setup()
    _behind(cluster, lambda raw: raw["spec"]["taints"].append(UNREACHABLE))
    assert run(verbs.quarantine("n", JOB, NOTE))
    assert cluster.calls == [PATCH]  # no 409, no read
    node = cluster.nodes["n"]
    assert node["spec"]["taints"] == [
        POOL,
        UNREACHABLE,  # kept, with the time it was added
        {"key": labels.TAINT_QUARANTINE, "value": JOB.uid, "effect": "NoSchedule"},
    ]
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["labels"][labels.LABEL_ROLE] == "quarantined"
    assert node["metadata"]["annotations"][labels.ANNOTATION_QUARANTINE] == NOTE
    # The patch's answer is the view's node now.
    held = view.get("n")
    assert held is not None and held.resource_version == node["metadata"]["resourceVersion"]


def test_a_cordon_written_meanwhile_fails_the_patch_and_the_read_notes_it() -> None:
    cluster, _, verbs = _setup()
    _behind(cluster, lambda raw: raw["spec"].update(unschedulable=True))
    assert run(verbs.quarantine("n", JOB, NOTE))
    assert cluster.calls == [PATCH, GET, PATCH]
    node = cluster.nodes["n"]
    note = decode_quarantine(node["metadata"]["annotations"][labels.ANNOTATION_QUARANTINE])
    # Someone else's cordon: returning the node later leaves it on.
    assert note is not None and note.cordoned_before


@pytest.mark.parametrize(
    ("label", "taint"),
    [(True, True), (True, False), (False, True)],
    ids=["another-job", "label-edited", "taint-edited"],
)
def test_a_node_another_job_took_meanwhile_is_left_as_it_is(label: bool, taint: bool) -> None:
    """Another job's node, or one a person's edit made no one's (its label and its pool
    taint no longer name the same job)."""
    cluster, _, verbs = _setup()

    def taken(raw: dict[str, Any]) -> None:
        if label:
            raw["metadata"]["labels"][labels.LABEL_JOB_UID] = "uid-other"
        if taint:
            raw["spec"]["taints"] = [{**POOL, "value": "uid-other"}]

    _behind(cluster, taken)
    before = copy.deepcopy(cluster.nodes["n"])
    assert not run(verbs.quarantine("n", JOB, NOTE))
    assert cluster.calls == [PATCH, GET]
    assert cluster.nodes["n"] == before


def test_a_guard_a_person_set_meanwhile_is_not_overwritten() -> None:
    cluster, _, verbs = _setup(annotations={labels.ANNOTATION_CLAIMED_AT: "2026-03-01T10:00:00Z"})
    guard = labels.SCALE_DOWN_GUARDS[0]
    _behind(cluster, lambda raw: raw["metadata"]["annotations"].update({guard: "false"}))
    assert run(verbs.quarantine("n", JOB, NOTE))
    assert cluster.calls == [PATCH, GET, PATCH]
    assert cluster.nodes["n"]["metadata"]["annotations"][guard] == "false"


def test_a_quarantine_written_again_replaces_its_taint_and_never_adds_a_second() -> None:
    quarantined = {"key": labels.TAINT_QUARANTINE, "value": JOB.uid, "effect": "NoSchedule"}
    cluster, _, verbs = _setup(role="quarantined", taints=[POOL, quarantined], unschedulable=True)
    assert run(verbs.quarantine("n", JOB, NOTE))
    assert cluster.calls == [PATCH]  # the merge patch, from the view
    taints = cluster.nodes["n"]["spec"]["taints"]
    assert [t["key"] for t in taints].count(labels.TAINT_QUARANTINE) == 1


def test_a_quarantine_taint_appended_meanwhile_fails_validation_and_is_written_once() -> None:
    cluster, _, verbs = _setup()
    quarantined = {"key": labels.TAINT_QUARANTINE, "value": JOB.uid, "effect": "NoSchedule"}

    def quarantined_meanwhile(raw: dict[str, Any]) -> None:  # another replica's write
        raw["metadata"]["labels"][labels.LABEL_ROLE] = "quarantined"
        raw["spec"]["taints"].append(quarantined)

    _behind(cluster, quarantined_meanwhile)
    assert run(verbs.quarantine("n", JOB, NOTE))
    taints = cluster.nodes["n"]["spec"]["taints"]
    assert [t["key"] for t in taints].count(labels.TAINT_QUARANTINE) == 1


# What the JSON patch writes is what the merge patch writes, on every node shape a held node
# takes: its role, its taints (none, the pool's or the spare's, with others before and after
# them), its guards (all, some, none, no annotations at all), a clearing mark, a cordon.
TAINTS = ([], [POOL], [SPARE], [UNREACHABLE, POOL], [POOL, NOT_READY, UNREACHABLE])
NOTES = (
    None,
    {labels.ANNOTATION_CLAIMED_AT: "2026-03-01T10:00:00Z"},
    {labels.ANNOTATION_CLAIMED_AT: "2026-03-01T10:00:00Z", **_guards()},
    {
        labels.ANNOTATION_CLAIMED_AT: "2026-03-01T10:00:00Z",
        labels.SCALE_DOWN_GUARDS[0]: "false",
        labels.ANNOTATION_CLEARING: "2026-03-01T11:00:00Z",
    },
)


@pytest.mark.parametrize(
    ("role", "taints", "notes", "cordoned"),
    list(itertools.product(("active", "spare"), TAINTS, NOTES, (False, True))),
)
def test_the_json_patch_writes_what_the_merge_patch_writes(
    role: str, taints: list[dict[str, str]], notes: dict[str, str] | None, cordoned: bool
) -> None:
    spec: dict[str, Any] = {"unschedulable": True} if cordoned else {}
    cluster, _, verbs = _setup(role=role, annotations=notes or {}, taints=taints, **spec)
    if notes is None:
        del cluster.nodes["n"]["metadata"]["annotations"]
    reference = FakeCluster()
    reference.nodes["n"] = copy.deepcopy(cluster.nodes["n"])
    assert run(verbs.quarantine("n", JOB, NOTE))
    assert run(NodeVerbs(reference, MINE).quarantine("n", JOB, NOTE))  # type: ignore[arg-type]
    assert cluster.calls == [PATCH]
    assert reference.calls == [GET, PATCH]
    ours, theirs = cluster.nodes["n"], reference.nodes["n"]
    assert ours["metadata"]["labels"] == theirs["metadata"]["labels"]
    assert ours["metadata"]["annotations"] == theirs["metadata"]["annotations"]
    assert ours["spec"] == theirs["spec"]
