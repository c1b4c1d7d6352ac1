"""``phased release-node`` hands a node back to the cluster: a quarantined node, and also a
node left *partially marked* — a quarantined node from which a person removed only the
``role`` label (``kubectl label node n phased.dev/role-``), or any Phased marks no job
holds by — as long as its marks name this installation (or none). It says, node by node,
which marks it removed. It never touches another installation's node, nor a node a job
holds (the operator gives that back when the job lets go).

Before, it refused anything without the quarantined role: the node, its role gone, was
``PartialMarks`` — never claimed again by any job — and the command meant to give it back
said "not quarantined by Phased" and left it so. It also released a quarantined node of
another installation, whose operator still counted it as waiting for a person."""

from __future__ import annotations

import asyncio
import io

from phased.core import labels
from phased.core.ownership import Kind, ownership
from phased.kube.convert import node_from_raw
from phased.kube.nodes import NodeVerbs
from tests.kube.fake_cluster import FakeCluster

MINE = "default"
UID = "uid-llm"
NOTE = '{"reason": "NodeNotReady", "job": "uid-llm", "detected": "2026-03-01T10:00:00Z"}'


def _quarantined(cluster: FakeCluster, name: str, installation: str = MINE) -> None:
    """A quarantined node its job let go of: role, installation, note, cordon, taint."""
    cluster.add_node(
        name,
        {labels.LABEL_ROLE: "quarantined", labels.LABEL_INSTALLATION: installation},
        annotations={labels.ANNOTATION_QUARANTINE: NOTE, "example.com/kept": "yes"},
        spec={
            "unschedulable": True,
            "taints": [
                {"key": labels.TAINT_QUARANTINE, "value": UID, "effect": "NoSchedule"},
                {"key": "example.com/kept", "value": "yes", "effect": "NoSchedule"},
            ],
        },
    )


def _release(cluster: FakeCluster, *names: str) -> tuple[int, str, str]:
    from phased.cli.release import release_nodes

    out, err = io.StringIO(), io.StringIO()
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    code = asyncio.run(release_nodes(verbs, list(names), out=out, err=err))
    return code, out.getvalue(), err.getvalue()


def _unmarked(cluster: FakeCluster, name: str) -> bool:
    return ownership(node_from_raw(cluster.nodes[name]), MINE).kind == Kind.UNMARKED


def test_a_quarantined_node_whose_role_a_person_removed_is_cleared_and_uncordoned() -> None:
    cluster = FakeCluster()
    _quarantined(cluster, "n")
    del cluster.nodes["n"]["metadata"]["labels"][labels.LABEL_ROLE]
    assert ownership(node_from_raw(cluster.nodes["n"]), MINE).kind == Kind.LEFT_ALONE

    code, out, _ = _release(cluster, "n")

    assert code == 0
    assert _unmarked(cluster, "n")
    raw = cluster.nodes["n"]
    assert not raw["spec"].get("unschedulable")
    assert [t["key"] for t in raw["spec"]["taints"]] == ["example.com/kept"]
    assert {k: v for k, v in raw["metadata"]["annotations"].items() if v} == {
        "example.com/kept": "yes"
    }
    assert "partially marked" in out
    for removed in (labels.LABEL_INSTALLATION, labels.ANNOTATION_QUARANTINE):
        assert removed in out
    assert f"{labels.TAINT_QUARANTINE}:NoSchedule" in out and "uncordoned" in out


def test_a_quarantined_node_is_released_as_before_and_says_what_went() -> None:
    cluster = FakeCluster()
    _quarantined(cluster, "n")
    code, out, _ = _release(cluster, "n")
    assert code == 0 and _unmarked(cluster, "n")
    assert "released" in out and labels.LABEL_ROLE in out


def test_another_installations_node_is_left_alone_quarantined_or_partially_marked() -> None:
    cluster = FakeCluster()
    _quarantined(cluster, "q", installation="team-b")
    _quarantined(cluster, "p", installation="team-b")
    del cluster.nodes["p"]["metadata"]["labels"][labels.LABEL_ROLE]
    before = {name: repr(raw) for name, raw in cluster.nodes.items()}

    code, _, err = _release(cluster, "q", "p")

    assert code == 1
    assert {name: repr(raw) for name, raw in cluster.nodes.items()} == before
    assert err.count("team-b") == 2


def test_a_node_a_job_holds_and_an_unmarked_node_are_left_alone() -> None:
    cluster = FakeCluster()
    held = {
        labels.LABEL_JOB_UID: UID,
        labels.LABEL_JOB: "llm",
        labels.LABEL_JOB_NAMESPACE: "ml",
        labels.LABEL_ROLE: "active",
        labels.LABEL_INSTALLATION: MINE,
    }
    pool = [{"key": labels.TAINT_POOL, "value": UID, "effect": "NoSchedule"}]
    cluster.add_node("a", held, spec={"taints": pool})
    # Its job label removed by hand: partially marked, but its job still holds it.
    without_job = {k: v for k, v in held.items() if k != labels.LABEL_JOB}
    cluster.add_node("b", without_job, spec={"taints": pool})
    cluster.add_node("free")
    before = {name: repr(raw) for name, raw in cluster.nodes.items()}

    code, _, err = _release(cluster, "a", "b", "free", "gone")

    assert code == 1
    assert {name: repr(raw) for name, raw in cluster.nodes.items()} == before
    assert err.count(UID) == 2 and "no Phased mark" in err and "not found" in err


def test_a_cordon_someone_put_on_the_node_before_its_quarantine_stays_and_is_said() -> None:
    """Phased's quarantine found the node cordoned already (the note's ``cordonedBefore``):
    that cordon is a person's, as it is when Phased returns a healed node, so releasing the
    quarantine by hand takes Phased's marks and leaves the cordon. Before, the release
    uncordoned it, undoing the cordon of whoever had found the node suspicious."""
    cluster = FakeCluster()
    _quarantined(cluster, "q")
    _quarantined(cluster, "p")  # the same, its role removed by hand: partially marked
    before = NOTE.replace("}", ', "cordonedBefore": true}')
    for name in ("q", "p"):
        cluster.nodes[name]["metadata"]["annotations"][labels.ANNOTATION_QUARANTINE] = before
    del cluster.nodes["p"]["metadata"]["labels"][labels.LABEL_ROLE]

    code, out, _ = _release(cluster, "q", "p")

    assert code == 0
    for name in ("q", "p"):
        assert _unmarked(cluster, name)
        assert cluster.nodes[name]["spec"].get("unschedulable") is True
    assert "uncordoned" not in out
    assert out.count("left cordoned: it was cordoned before its quarantine") == 2
