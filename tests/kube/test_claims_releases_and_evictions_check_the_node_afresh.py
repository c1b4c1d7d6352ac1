"""The kube layer re-checks on the fresh object what decide assumed: a claim only of a node
with no Phased mark and no pod of others (looked at before and after the claim), changes
only of nodes this installation holds, orphan release only of a job a fresh GET cannot
find, evictions through the Eviction API."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import JobRef
from phased.core.settings import Settings
from phased.kube.convert import node_pod_from_raw
from phased.kube.nodes import NodeVerbs
from phased.kube.pods import Eviction, PodVerbs
from phased.reconcile import JobEntry, Reconciler
from tests.kube.fake_cluster import FakeCluster

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")
MINE = "default"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _held(uid: str = JOB.uid, installation: str | None = MINE, role: str = "active") -> dict:
    out = {
        labels.LABEL_JOB_UID: uid,
        labels.LABEL_JOB: "llm",
        labels.LABEL_JOB_NAMESPACE: "ml",
        labels.LABEL_ROLE: role,
    }
    if installation is not None:
        out[labels.LABEL_INSTALLATION] = installation
    return out


# --- claims ----------------------------------------------------------------------------------

FOREIGN = [
    ("job and role without a uid", {labels.LABEL_JOB: "x", labels.LABEL_ROLE: "active"}, {}),
    ("another installation", _held("uid-b", "team-b"), {}),
    ("no installation", _held("uid-b", None), {}),
    ("an installation label alone", {labels.LABEL_INSTALLATION: "team-b"}, {}),
    ("a quarantine note alone", {}, {labels.ANNOTATION_QUARANTINE: "{}"}),
]


@pytest.mark.parametrize(("case", "marks", "notes"), FOREIGN, ids=[c[0] for c in FOREIGN])
def test_a_claim_never_patches_a_node_with_marks(case: str, marks: dict, notes: dict) -> None:
    cluster = FakeCluster()
    raw = cluster.add_node("n", marks, annotations=notes)
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    rv = raw["metadata"]["resourceVersion"]
    assert not run(verbs.claim("n", rv, JOB, NodeRole.ACTIVE, NOW)).won
    assert cluster.patches() == []


def test_a_claim_writes_the_whole_set_of_marks_with_the_installation() -> None:
    cluster = FakeCluster()
    raw = cluster.add_node("n")
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    rv = raw["metadata"]["resourceVersion"]
    assert run(verbs.claim("n", rv, JOB, NodeRole.ACTIVE, NOW, clearing=True)).won
    meta = cluster.nodes["n"]["metadata"]
    assert meta["labels"] == _held()
    assert meta["annotations"] == {
        labels.ANNOTATION_CLAIMED_AT: "2026-03-01T12:00:00Z",
        labels.ANNOTATION_CLEARING: "2026-03-01T12:00:00Z",
        **dict.fromkeys(labels.SCALE_DOWN_GUARDS, "true"),  # kept from the autoscalers
        labels.ANNOTATION_GUARDS: ",".join(labels.SCALE_DOWN_GUARDS),
    }


@pytest.mark.parametrize("verb", ["set_role", "release", "quarantine", "unquarantine"])
def test_the_jobs_uid_under_another_installation_is_not_touched(verb: str) -> None:
    cluster = FakeCluster()
    cluster.add_node("n", _held(installation="team-b"))
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    calls = {
        "set_role": lambda: verbs.set_role("n", JOB, NodeRole.SPARE, now=NOW),
        "release": lambda: verbs.release("n", JOB),
        "quarantine": lambda: verbs.quarantine("n", JOB, "{}"),
        "unquarantine": lambda: verbs.unquarantine("n", JOB),
    }
    assert not run(calls[verb]())
    assert cluster.patches() == []


def test_a_node_from_before_installations_is_adopted_by_its_job() -> None:
    cluster = FakeCluster()
    cluster.add_node(
        "n",
        _held(installation=None, role="spare"),
        annotations={labels.ANNOTATION_CLAIMED_AT: "2026-02-01T00:00:00Z"},
    )
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    assert run(verbs.set_role("n", JOB, NodeRole.ACTIVE, now=NOW))
    meta = cluster.nodes["n"]["metadata"]
    assert meta["labels"][labels.LABEL_INSTALLATION] == MINE
    assert meta["annotations"][labels.ANNOTATION_CLEARING] == "2026-03-01T12:00:00Z"
    assert run(verbs.set_role("n", JOB, NodeRole.SPARE, now=NOW))
    assert labels.ANNOTATION_CLEARING not in cluster.nodes["n"]["metadata"]["annotations"]


def test_a_role_written_again_writes_the_job_name_labels_someone_took_off() -> None:
    """The node stays the job's by its ``job-uid`` label; the names a claim wrote are
    written back with the role (core.sizing.rename_held), and a node named as claimed,
    role and taint as they are, is not patched at all."""
    cluster = FakeCluster()
    held = _held(role="spare")
    del held[labels.LABEL_JOB]
    held[labels.LABEL_JOB_NAMESPACE] = "elsewhere"
    pool = [{"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"}]
    cluster.add_node("n", held, spec={"taints": pool})
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    assert run(verbs.set_role("n", JOB, NodeRole.SPARE, now=NOW))
    found = cluster.nodes["n"]["metadata"]["labels"]
    assert found[labels.LABEL_JOB] == "llm" and found[labels.LABEL_JOB_NAMESPACE] == "ml"
    version = cluster.nodes["n"]["metadata"]["resourceVersion"]
    run(verbs.set_role("n", JOB, NodeRole.SPARE, now=NOW))
    assert cluster.nodes["n"]["metadata"]["resourceVersion"] == version


def _reconciler(cluster: FakeCluster, settings: Settings | None = None) -> Reconciler:
    return Reconciler(cluster, settings or Settings(), operator_pod=("phased", "op-0"))  # type: ignore[arg-type]


def _claim(reconciler: Reconciler, node: str) -> None:
    run(reconciler._claim(JobEntry(ref=JOB, raw={}), node, "", NodeRole.SPARE, NOW))


def test_a_node_running_a_tenants_pod_is_not_claimed_and_is_remembered() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    cluster.add_pod("tenant", "web", "n")
    reconciler = _reconciler(cluster)
    _claim(reconciler, "n")
    assert cluster.patches() == []
    assert [p.key for p in reconciler.occupied["n"][1]] == ["tenant/web"]
    assert reconciler.left_alone() == {}  # the node view is empty: nothing counted from it


def test_daemonset_static_and_finished_pods_do_not_keep_a_node_out() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    ds = [{"kind": "DaemonSet", "name": "agent", "controller": True}]
    cluster.add_pod("kube-system", "agent-x", "n", ownerReferences=ds)
    cluster.add_pod("kube-system", "proxy", "n", annotations={"kubernetes.io/config.mirror": "1"})
    cluster.add_pod("tenant", "done", "n")["status"]["phase"] = "Succeeded"
    reconciler = _reconciler(cluster)
    _claim(reconciler, "n")
    assert cluster.nodes["n"]["metadata"]["labels"][labels.LABEL_JOB_UID] == JOB.uid


def test_a_pod_still_terminating_keeps_its_node_out_until_it_is_gone() -> None:
    """Another job's worker deleted with a long grace still holds the node's GPUs."""
    cluster = FakeCluster()
    cluster.add_node("n")
    cluster.add_pod("ml", "other-train-g0-0", "n", deletionTimestamp="2026-03-01T13:00:00Z")
    reconciler = _reconciler(cluster)
    _claim(reconciler, "n")
    assert cluster.patches() == []
    assert [p.key for p in reconciler.occupied["n"][1]] == ["ml/other-train-g0-0"]
    cluster.pods.clear()  # gone
    reconciler.occupied.clear()  # looked at afresh after a resync interval
    _claim(reconciler, "n")
    assert cluster.nodes["n"]["metadata"]["labels"][labels.LABEL_JOB_UID] == JOB.uid


def test_the_operators_own_pod_keeps_its_node_out() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    cluster.add_pod("phased", "op-0", "n")
    _claim(_reconciler(cluster, Settings(preemptible_priority_classes=[""])), "n")
    assert cluster.patches() == []


def test_a_pod_that_lands_during_the_claim_makes_the_claim_undone() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    landed: list[str] = []

    def bind_once(name: str) -> None:
        if not landed:
            landed.append(name)
            cluster.add_pod("tenant", "racer", name)

    cluster.after_patch = bind_once
    reconciler = _reconciler(cluster)
    _claim(reconciler, "n")
    assert len(cluster.patches()) == 2  # the claim, then the release
    assert labels.LABEL_JOB_UID not in cluster.nodes["n"]["metadata"]["labels"]
    assert labels.LABEL_INSTALLATION not in cluster.nodes["n"]["metadata"]["labels"]
    assert "n" in reconciler.occupied


def test_a_preemptible_pod_lets_the_claim_through_and_marks_the_node_for_clearing() -> None:
    cluster = FakeCluster()
    cluster.add_node("n")
    cluster.add_pod("batch", "low", "n")["spec"]["priorityClassName"] = "best-effort"
    reconciler = _reconciler(cluster, Settings(preemptible_priority_classes=["best-effort"]))
    run(reconciler._claim(JobEntry(ref=JOB, raw={}), "n", "", NodeRole.ACTIVE, NOW))
    notes = cluster.nodes["n"]["metadata"]["annotations"]
    assert notes[labels.ANNOTATION_CLEARING] == "2026-03-01T12:00:00Z"


# --- orphans ---------------------------------------------------------------------------------


def _orphans(cluster: FakeCluster) -> Reconciler:
    reconciler = _reconciler(cluster)
    reconciler.jobs_synced = True  # and the cache knows no job at all
    reconciler.nodes.replace_all(cluster.nodes.values())
    run(reconciler.release_orphans())
    return reconciler


def test_a_node_of_a_job_a_fresh_get_cannot_find_is_released() -> None:
    cluster = FakeCluster()
    cluster.add_node("n", _held())
    _orphans(cluster)
    assert labels.LABEL_JOB_UID not in cluster.nodes["n"]["metadata"]["labels"]


def test_a_job_missing_from_the_cache_but_alive_keeps_its_node() -> None:
    cluster = FakeCluster()
    cluster.add_node("n", _held())
    cluster.jobs[("ml", "llm")] = {"metadata": {"namespace": "ml", "name": "llm", "uid": JOB.uid}}
    _orphans(cluster)
    assert cluster.patches() == []


def test_a_namesake_job_does_not_keep_the_old_jobs_node() -> None:
    cluster = FakeCluster()
    cluster.add_node("n", _held())
    cluster.jobs[("ml", "llm")] = {"metadata": {"namespace": "ml", "name": "llm", "uid": "new"}}
    _orphans(cluster)
    assert labels.LABEL_JOB_UID not in cluster.nodes["n"]["metadata"]["labels"]


@pytest.mark.parametrize(
    ("case", "marks"),
    [
        ("another installation's", _held(installation="team-b")),
        ("written before installations", _held(installation=None)),
        ("quarantined", _held(role="quarantined")),
    ],
)
def test_nodes_no_one_can_prove_orphaned_are_left_alone(case: str, marks: dict) -> None:
    cluster = FakeCluster()
    cluster.add_node("n", marks)
    reconciler = _orphans(cluster)
    assert cluster.patches() == []
    assert [path for _, path in cluster.calls if path.startswith("/apis/")] == []  # no GET
    if case != "quarantined":
        assert sum(reconciler.left_alone().values()) == 1


@pytest.mark.parametrize(
    "marks",
    [
        {**_held(), labels.LABEL_JOB: ""},
        {k: v for k, v in _held().items() if k != labels.LABEL_JOB_NAMESPACE},
    ],
)
def test_a_node_without_its_job_name_labels_is_judged_by_a_fresh_list_of_every_job(
    marks: dict,
) -> None:
    """Its job writes the names again while it lives (core.sizing.rename_held); once the
    job is gone without letting go, the node is proved orphaned by a fresh list of every
    TrainingJob (one, whatever the number of such nodes), not left marked for ever."""
    cluster = FakeCluster()
    cluster.add_node("n", marks)
    cluster.add_node("m", marks)
    alive = {"metadata": {"namespace": "ml", "name": "other", "uid": "uid-other"}}
    cluster.jobs[("ml", "other")] = alive
    _orphans(cluster)
    for name in ("n", "m"):
        assert labels.LABEL_JOB_UID not in cluster.nodes[name]["metadata"]["labels"]
    lists = [p for m, p in cluster.calls if m == "GET" and p.endswith("/trainingjobs")]
    assert len(lists) == 1


def test_a_node_without_its_job_name_labels_stays_while_a_fresh_list_finds_its_job() -> None:
    cluster = FakeCluster()
    cluster.add_node("n", {**_held(), labels.LABEL_JOB: ""})
    cluster.jobs[("ml", "llm")] = {"metadata": {"namespace": "ml", "name": "llm", "uid": JOB.uid}}
    _orphans(cluster)
    assert cluster.patches() == []


# --- evictions -------------------------------------------------------------------------------


def test_an_eviction_a_disruption_budget_refuses_is_reported_as_blocked() -> None:
    cluster = FakeCluster()
    cluster.add_pod("tenant", "guarded", "n")
    cluster.add_pod("tenant", "free", "n")
    cluster.protected.add(("tenant", "guarded"))
    verbs = PodVerbs(cluster)  # type: ignore[arg-type]
    assert run(verbs.evict("tenant", "guarded")) == Eviction.BLOCKED
    assert "deletionTimestamp" not in cluster.pod("tenant", "guarded")["metadata"]  # type: ignore[index]
    assert run(verbs.evict("tenant", "free")) == Eviction.EVICTED
    assert run(verbs.evict("tenant", "gone")) == Eviction.GONE
    assert ("POST", "/api/v1/namespaces/tenant/pods/free/eviction") in cluster.calls


def test_pods_are_read_with_what_deciding_needs() -> None:
    raw = {
        "metadata": {
            "namespace": "phased",
            "name": "op-0",
            "creationTimestamp": "2026-03-01T11:00:00Z",
            "ownerReferences": [
                {"kind": "DaemonSet", "name": "x", "controller": False},
                {"kind": "TrainingJob", "name": "j", "uid": "u", "controller": True},
            ],
            "labels": {labels.LABEL_JOB_UID: "other"},  # a label does not make it a worker
        },
        "spec": {"nodeName": "n", "priorityClassName": "best-effort"},
        "status": {"phase": "Failed"},
    }
    pod = node_pod_from_raw(raw, ("phased", "op-0"))
    assert (pod.operator, pod.daemon, pod.terminal, pod.mirror) == (True, False, True, False)
    assert (pod.priority_class, pod.controller, pod.node) == ("best-effort", "u", "n")
    assert node_pod_from_raw(raw, None).operator is False


def test_a_persons_release_of_a_quarantined_node_leaves_no_mark_and_it_can_be_claimed() -> None:
    """A node that replaced another (``replaces``) and then failed itself: released by a
    person, it carries no Phased mark at all, so the next claim takes it (one mark left
    behind made it "partially marked" and never claimed again)."""
    from phased.core.ownership import Kind, ownership
    from phased.kube.convert import node_from_raw

    cluster = FakeCluster()
    notes = {
        labels.ANNOTATION_QUARANTINE: "{}",
        labels.ANNOTATION_CLAIMED_AT: "2026-03-01T11:00:00Z",
        labels.ANNOTATION_REPLACES: "h0 2026-03-01T11:30:00Z",
        "example.com/kept": "yes",
    }
    taints = [
        {"key": labels.TAINT_QUARANTINE, "value": JOB.uid, "effect": "NoSchedule"},
        {"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"},
        {"key": "example.com/kept", "value": "yes", "effect": "NoSchedule"},
    ]
    cluster.add_node(
        "n",
        _held(role="quarantined"),
        annotations=notes,
        spec={"unschedulable": True, "taints": taints},
    )
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    assert run(verbs.release_quarantined("n"))
    node = node_from_raw(cluster.nodes["n"])
    assert ownership(node, MINE).kind == Kind.UNMARKED
    kept = {k: v for k, v in cluster.nodes["n"]["metadata"]["annotations"].items() if v}
    assert kept == {"example.com/kept": "yes"}
    assert [t.key for t in node.taints] == ["example.com/kept"] and not node.unschedulable
    claim = run(verbs.claim("n", node.resource_version, JOB, NodeRole.SPARE, NOW))
    assert claim.won


def test_a_healed_quarantined_node_the_job_gives_back_leaves_no_mark_and_can_be_claimed() -> None:
    """``ReturnToSpares`` with no spare wanted: the job uncordons the node and then releases
    it (a release alone keeps a quarantined node's cordon and marks for a person)."""
    from phased.core.ownership import Kind, ownership
    from phased.kube.convert import node_from_raw

    cluster = FakeCluster()
    notes = {
        labels.ANNOTATION_QUARANTINE: "{}",
        labels.ANNOTATION_CLAIMED_AT: "2026-03-01T11:00:00Z",
        labels.ANNOTATION_REPLACES: "h0 2026-03-01T11:30:00Z",
    }
    taints = [
        {"key": labels.TAINT_QUARANTINE, "value": JOB.uid, "effect": "NoSchedule"},
        {"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"},
    ]
    cluster.add_node(
        "n",
        _held(role="quarantined"),
        annotations=notes,
        spec={"unschedulable": True, "taints": taints},
    )
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    assert run(verbs.unquarantine("n", JOB))
    assert run(verbs.release("n", JOB))
    node = node_from_raw(cluster.nodes["n"])
    assert ownership(node, MINE).kind == Kind.UNMARKED
    assert node.taints == () and not node.unschedulable
    other = JobRef(namespace="ml", name="next", uid="uid-next")
    assert run(verbs.claim("n", node.resource_version, other, NodeRole.SPARE, NOW)).won


def test_a_release_outlasts_a_busy_node_and_says_so_when_it_never_settles(monkeypatch) -> None:
    from phased.kube import nodes as node_verbs
    from phased.kube.client import Conflict

    monkeypatch.setattr(node_verbs, "_RELEASE_PAUSES", (0.0, 0.0))
    cluster = FakeCluster()
    cluster.add_node("n", _held(role="quarantined"), spec={"unschedulable": True})
    verbs = NodeVerbs(cluster, MINE)  # type: ignore[arg-type]
    # A repaired node is busy for a while (its kubelet reports, a tool labels it): the
    # patches of the first round all lose, the release still happens.
    cluster.busy["n"] = node_verbs._ATTEMPTS + 1
    assert run(verbs.release_quarantined("n"))
    assert labels.LABEL_ROLE not in cluster.nodes["n"]["metadata"]["labels"]
    # One that never settles is an error that says so, not "not quarantined".
    cluster.add_node("m", _held(role="quarantined"))
    cluster.busy["m"] = 10**6
    with pytest.raises(Conflict, match="kept changing"):
        run(verbs.release_quarantined("m"))
    # A node that is not quarantined (or is gone) is left alone, as before.
    cluster.add_node("a", _held(role="active"))
    assert not run(verbs.release_quarantined("a"))
    assert not run(verbs.release_quarantined("gone"))
