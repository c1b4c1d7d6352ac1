"""Phased claims a node only when no one has marked it and no one else's pod runs there; it
calls a node its own only when the marks are the set it writes, with its installation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import ClaimNode, EmitEvent, NodeInfo, ReleaseNode, Taint
from phased.core.ownership import Kind, LeftAlone, holds, ownership
from phased.core.settings import Settings
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    events,
    node,
    node_pod,
    nodes,
    of_type,
    owned,
    phase,
    snapshot,
    spec,
)

TRAIN = spec(phase("train", 2, 2))
OTHER_UID = "uid-someone-else"


def _marked(name: str, **marks: str) -> NodeInfo:
    n = node(name)
    return replace(n, labels={**n.labels, **marks})


def _full_marks(uid: str, installation: str | None) -> dict[str, str]:
    out = {
        labels.LABEL_JOB_UID: uid,
        labels.LABEL_JOB: "their-job",
        labels.LABEL_JOB_NAMESPACE: "their-ns",
        labels.LABEL_ROLE: "active",
    }
    if installation is not None:
        out[labels.LABEL_INSTALLATION] = installation
    return out


# name, the marked node, why it is left alone
LEFT_ALONE = [
    (
        "job and role labels without a uid (written by hand or by a script)",
        _marked("m", **{labels.LABEL_JOB: "llm", labels.LABEL_ROLE: "active"}),
        LeftAlone.PARTIAL_MARKS,
    ),
    (
        "a role label alone",
        _marked("m", **{labels.LABEL_ROLE: "spare"}),
        LeftAlone.PARTIAL_MARKS,
    ),
    (
        "another installation's full set of marks",
        _marked("m", **_full_marks(OTHER_UID, "team-b")),
        LeftAlone.OTHER_INSTALLATION,
    ),
    (
        "another installation's label alone",
        _marked("m", **{labels.LABEL_INSTALLATION: "team-b"}),
        LeftAlone.OTHER_INSTALLATION,
    ),
    (
        "a full set of marks without an installation (another job's, from before installations)",
        _marked("m", **_full_marks(OTHER_UID, None)),
        LeftAlone.NO_INSTALLATION,
    ),
    (
        "a uid label with an unknown role",
        _marked("m", **{**_full_marks(OTHER_UID, "default"), labels.LABEL_ROLE: "borrowed"}),
        LeftAlone.PARTIAL_MARKS,
    ),
    (
        "a pool taint alone (no label at all)",
        replace(node("m"), taints=(Taint(labels.TAINT_POOL, OTHER_UID),)),
        LeftAlone.PARTIAL_MARKS,
    ),
    (
        "a spare taint alone",
        replace(node("m"), taints=(Taint(labels.TAINT_SPARE, OTHER_UID),)),
        LeftAlone.PARTIAL_MARKS,
    ),
    (
        "a claimed-at annotation alone",
        replace(node("m"), annotations={labels.ANNOTATION_CLAIMED_AT: "2026-03-01T00:00:00Z"}),
        LeftAlone.PARTIAL_MARKS,
    ),
    (
        "a quarantined node whose job let go of it",
        _marked("m", **{labels.LABEL_ROLE: "quarantined", labels.LABEL_INSTALLATION: "default"}),
        LeftAlone.QUARANTINED,
    ),
]


@pytest.mark.parametrize(("case", "marked", "reason"), LEFT_ALONE, ids=[c[0] for c in LEFT_ALONE])
def test_a_node_with_marks_phased_did_not_write_is_never_claimed_and_is_named(
    case: str, marked: NodeInfo, reason: LeftAlone
) -> None:
    owner = ownership(marked, SETTINGS.installation)
    assert (owner.kind, owner.reason) == (Kind.LEFT_ALONE, reason)
    assert not holds(marked, JOB.uid, SETTINGS.installation)
    plan = decide(snapshot(TRAIN, [marked, node("free")]), SETTINGS, T0)
    # one short of min: gang admission holds nothing until the whole min can be claimed
    assert of_type(plan, ClaimNode) == []
    assert plan.status.state == JobState.WAITING
    said = [a for a in plan.actions if isinstance(a, EmitEvent) and a.reason == "NodesLeftAlone"]
    if reason == LeftAlone.QUARANTINED:
        assert said == []  # known state, waiting for a person: not news on every job
    else:
        assert len(said) == 1 and f"m ({reason.value})" in said[0].message
        assert said[0].type == "Warning"


def test_labels_outside_the_ownership_set_do_not_keep_a_node_out() -> None:
    """An admin's own selector label under phased.dev/ (e.g. for settings.nodeSelector) and
    the topology labels are not ownership."""
    selected = [_marked(n.name, **{"phased.dev/pool": "gpu"}) for n in nodes("h", 2)]
    plan = decide(snapshot(TRAIN, selected), SETTINGS, T0)
    assert sorted(c.node for c in of_type(plan, ClaimNode)) == ["h00", "h01"]


def test_our_installations_full_marks_name_the_job_that_holds_the_node() -> None:
    mine = owned(node("a"), NodeRole.ACTIVE)
    assert ownership(mine, SETTINGS.installation).kind == Kind.OURS
    assert holds(mine, JOB.uid, SETTINGS.installation)
    assert not holds(mine, OTHER_UID, SETTINGS.installation)
    assert not holds(mine, JOB.uid, "team-b")  # another installation never takes it


def test_a_node_of_the_job_claimed_before_installations_is_still_held() -> None:
    """Upgrading Phased must not orphan a running pool: the job's UID (which no one can
    guess) names it; it is never released as an orphan, though (NoInstallation)."""
    old = owned(node("a"), NodeRole.ACTIVE)
    kept = {k: v for k, v in old.labels.items() if k != labels.LABEL_INSTALLATION}
    claimed = {labels.ANNOTATION_CLAIMED_AT: "2026-02-01T00:00:00Z"}
    old = replace(old, labels=kept, annotations=claimed)
    assert holds(old, JOB.uid, SETTINGS.installation)
    assert ownership(old, SETTINGS.installation).reason == LeftAlone.NO_INSTALLATION
    plan = decide(snapshot(TRAIN, [old, node("b")]), SETTINGS, T0)
    assert [c.node for c in of_type(plan, ClaimNode)] == ["b"]


def test_a_node_of_the_job_under_another_installation_is_not_the_jobs() -> None:
    theirs = owned(node("a"), NodeRole.ACTIVE)
    theirs = replace(theirs, labels={**theirs.labels, labels.LABEL_INSTALLATION: "team-b"})
    plan = decide(snapshot(TRAIN, [theirs, *nodes("h", 2)]), SETTINGS, T0)
    assert sorted(c.node for c in of_type(plan, ClaimNode)) == ["h00", "h01"]
    assert of_type(plan, ReleaseNode) == []


# --- pods on the node ------------------------------------------------------------------------

CLASSES = Settings(preemptible_priority_classes=["best-effort", "batch-low"])

# name, the pods on node "busy", settings, whether "busy" may be claimed
OCCUPANCY = [
    ("another tenant's pod", [node_pod("web-1", "busy")], SETTINGS, False),
    ("a DaemonSet's pod", [node_pod("agent", "busy", daemon=True)], SETTINGS, True),
    ("a static pod's mirror", [node_pod("kube-proxy", "busy", mirror=True)], SETTINGS, True),
    ("a finished pod", [node_pod("job-1", "busy", terminal=True)], SETTINGS, True),
    (
        "a pod being deleted, until it is gone",
        [node_pod("old", "busy", deleting=True)],
        SETTINGS,
        False,
    ),
    (
        "a pod of a preemptible class, none configured",
        [node_pod("b", "busy", priority_class="best-effort")],
        SETTINGS,
        False,
    ),
    (
        "a pod of a preemptible class",
        [node_pod("b", "busy", priority_class="best-effort")],
        CLASSES,
        True,
    ),
    (
        "a preemptible pod beside another tenant's pod",
        [node_pod("b", "busy", priority_class="best-effort"), node_pod("web", "busy")],
        CLASSES,
        False,
    ),
    (
        "the operator's own pod, even of a preemptible class",
        [node_pod("phased-0", "busy", operator=True, priority_class="best-effort")],
        CLASSES,
        False,
    ),
    ("a pod of an unlisted class", [node_pod("x", "busy", priority_class="high")], CLASSES, False),
]


@pytest.mark.parametrize(
    ("case", "pods", "settings", "claimable"), OCCUPANCY, ids=[c[0] for c in OCCUPANCY]
)
def test_a_node_running_others_pods_is_not_claimed(
    case: str, pods: list, settings: Settings, claimable: bool
) -> None:
    the_nodes = [node("busy"), node("free")]
    snap = snapshot(TRAIN, the_nodes, node_pods={"busy": tuple(pods)})
    plan = decide(snap, settings, T0)
    claimed = sorted(c.node for c in of_type(plan, ClaimNode))
    # the phase needs both (min 2): the whole gang, or nothing while "busy" is occupied
    assert claimed == (["busy", "free"] if claimable else [])
    said = [a for a in plan.actions if isinstance(a, EmitEvent) and a.reason == "NodesLeftAlone"]
    if not claimable:
        assert len(said) == 1 and "busy (RunningPods: tenant/" in said[0].message


def test_an_occupied_node_is_passed_over_for_a_free_one_when_there_is_one() -> None:
    """The reconciler looks at each node a plan would claim and decides again with what it
    found: the second plan takes the next nearest node instead, and says nothing."""
    the_nodes = [node("a", rack="r1"), node("b", rack="r1"), node("c", rack="r2")]
    first = decide(snapshot(TRAIN, the_nodes), SETTINGS, T0)
    assert sorted(c.node for c in of_type(first, ClaimNode)) == ["a", "b"]
    busy = {"a": (node_pod("web", "a"),)}
    again = decide(snapshot(TRAIN, the_nodes, node_pods=busy), SETTINGS, T0)
    assert sorted(c.node for c in of_type(again, ClaimNode)) == ["b", "c"]
    assert "NodesLeftAlone" not in events(again)  # the job got all it wanted


def test_pods_seen_on_a_node_the_job_holds_do_not_make_it_let_go() -> None:
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("h", 2)]
    snap = snapshot(TRAIN, held, node_pods={"h00": (node_pod("web", "h00"),)})
    plan = decide(snap, SETTINGS, T0)
    assert of_type(plan, ReleaseNode) == []


def test_a_copy_of_the_jobs_labels_without_a_claim_is_not_the_jobs() -> None:
    """The job's labels written by hand (no installation, no claimed-at): not held, not
    claimed, named."""
    copied = replace(node("a"), labels={**node("a").labels, **_full_marks(JOB.uid, None)})
    assert not holds(copied, JOB.uid, SETTINGS.installation)
    plan = decide(snapshot(TRAIN, [copied, *nodes("h", 2)]), SETTINGS, T0)
    assert sorted(c.node for c in of_type(plan, ClaimNode)) == ["h00", "h01"]
    assert of_type(plan, ReleaseNode) == []
