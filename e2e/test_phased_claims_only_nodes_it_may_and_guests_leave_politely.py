"""Whose node is it, on the real cluster: nodes carrying marks Phased did not write, or
running another tenant's pod, are never claimed; nodes of a job that is provably gone are
released, another installation's never; guests of a promoted Preemptible spare leave through
the Eviction API (a PodDisruptionBudget holds one until the deadline), and a pod that was
there before the claim is left alone."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from e2e import lib
from e2e.harness import TEST_SETTINGS, Operator, metric_values
from e2e.operator_fixtures import (
    LOGS,
    apply,
    get_job,
    live_workers,
    nodes_of,
    release_quarantined,
    status,
)

INSTALLATION = "e2e-own"
TIMEOUT = 8  # settings.guestEvictionTimeout, seconds
JOB_UID, JOB, JOB_NS = "phased.dev/job-uid", "phased.dev/job", "phased.dev/job-namespace"
ROLE, INST = "phased.dev/role", "phased.dev/installation"
CLAIMED_AT = "phased.dev/claimed-at"
MARKS = (JOB_UID, JOB, JOB_NS, ROLE, INST)
GUARDS = ("cluster-autoscaler.kubernetes.io/scale-down-disabled", "karpenter.sh/do-not-disrupt")


@pytest.fixture(scope="module")
def operator(
    kubeconfig: str, crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    settings = yaml.safe_load(TEST_SETTINGS.read_text())
    settings.update(installation=INSTALLATION, guestEvictionTimeout=f"{TIMEOUT}s")
    path = Path(tmp_path_factory.mktemp("settings")) / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    log = LOGS / "test_phased_claims_only_nodes_it_may_and_guests_leave_politely.log"
    if log.exists():
        log.unlink()
    op = Operator(kubeconfig, log, settings=path).start()
    yield op
    op.stop()


def _label(core: Any, node: str, values: dict[str, str | None]) -> None:
    core.patch_node(node, {"metadata": {"labels": values}})


def _labels(core: Any, node: str) -> dict[str, str]:
    return dict(core.read_node(node).metadata.labels or {})


def _annotations(core: Any, node: str) -> dict[str, str]:
    return dict(core.read_node(node).metadata.annotations or {})


def _events(core: Any, namespace: str, reason: str) -> list[str]:
    items = core.list_namespaced_event(namespace).items
    return [e.message for e in items if e.reason == reason]


def _job(name: str, gpu: str, lo: int, hi: int, spares: int = 0, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "spares": {"count": spares, **spec.pop("spares", {})},
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": lo, "max": hi},
                    "gpuTypes": [gpu],
                    "gpusPerNode": 8,
                    "template": {"annotations": {"sim.phased.dev/succeed-after": "10m"}},
                }
            ],
            **spec,
        },
    }


def _delete_job(kubectl: lib.Kubectl, core: Any, namespace: str, name: str, uid: str) -> None:
    kubectl("delete", "trainingjob", name, "-n", namespace, "--wait=false")
    lib.wait_until(
        lambda: set(nodes_of(core, uid).values()) <= {"quarantined"},
        60,
        message="nodes released",
    )


def test_marked_and_occupied_nodes_are_never_claimed(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    """Four Ascend nodes: one with job and role labels written by hand (no uid), one with
    another installation's full set of marks, one running a tenant's pod, one free. A job
    that would take all four gets the free one only, and says why not the others."""
    nodes = [f"ascend-{i:03d}" for i in range(4)]
    hand, other, busy, free = nodes
    by_hand = {JOB: "borrowed", ROLE: "active"}
    theirs = {JOB_UID: "uid-of-team-b", JOB: "x", JOB_NS: "y", ROLE: "spare", INST: "team-b"}
    tenant = lib.create_namespace(core, "tenant")
    try:
        _label(core, hand, dict(by_hand))
        _label(core, other, dict(theirs))
        core.create_namespaced_pod(tenant, lib.sim_pod("web", node_name=busy))
        lib.wait_pod_phase(core, tenant, "web", "Running")
        found = _annotations(core, free)
        apply(kubectl, namespace, _job("greedy", "Ascend910B", 1, 4))
        uid = get_job(kubectl, namespace, "greedy")["metadata"]["uid"]

        def started() -> dict[str, Any] | None:
            st = status(kubectl, namespace, "greedy")
            running = [p for p in live_workers(core, namespace, uid) if p.status.phase == "Running"]
            return st if running else None

        lib.wait_until(started, 90, message=f"greedy running\n{operator.tail(40)}")
        time.sleep(3)  # a few more passes: nothing else may be claimed
        assert nodes_of(core, uid) == {free: "active"}
        assert {k: v for k, v in _labels(core, hand).items() if k in MARKS} == by_hand
        assert {k: v for k, v in _labels(core, other).items() if k in MARKS} == theirs
        assert not any(k in MARKS for k in _labels(core, busy))
        assert _labels(core, free)[INST] == INSTALLATION
        held = _annotations(core, free)  # kept from the cluster autoscalers while held
        assert [held.get(k) for k in GUARDS] == ["true", "true"]
        said = lib.wait_until(
            lambda: _events(core, namespace, "NodesLeftAlone"), 30, message="NodesLeftAlone"
        )
        text = " ".join(said)
        assert f"{hand} (PartialMarks)" in text
        assert f"{other} (OtherInstallation)" in text
        assert f"{busy} (RunningPods: {tenant}/web)" in text

        def counted() -> bool:
            scrape = operator.scrape()
            return all(
                sum(metric_values(scrape, "phased_nodes_left_alone", reason=r)) >= 1
                for r in ("PartialMarks", "OtherInstallation", "RunningPods")
            )

        lib.wait_until(counted, 40, message="phased_nodes_left_alone by reason")
        _delete_job(kubectl, core, namespace, "greedy", uid)
        assert _annotations(core, free) == found  # given back as it was found
    finally:
        _label(core, hand, dict.fromkeys(by_hand))
        _label(core, other, dict.fromkeys(theirs))
        lib.delete_namespace(core, tenant)


def test_only_a_provably_gone_jobs_nodes_of_this_installation_are_released(
    operator: Operator, core: Any, namespace: str
) -> None:
    gone, foreign, legacy = "h200-001", "h200-002", "h200-003"
    ours = {JOB_UID: "uid-never-existed", JOB: "ghost", JOB_NS: namespace, ROLE: "spare"}
    try:
        _label(core, gone, {**ours, INST: INSTALLATION})
        _label(core, foreign, {**ours, INST: "team-b"})
        _label(core, legacy, dict(ours))  # no installation: no one can prove whose it is
        lib.wait_until(
            lambda: not any(k in MARKS for k in _labels(core, gone)),
            60,
            message=f"{gone} released\n{operator.tail(30)}",
        )
        assert _labels(core, foreign)[JOB_UID] == "uid-never-existed"
        assert _labels(core, legacy)[JOB_UID] == "uid-never-existed"
    finally:
        for node in (gone, foreign, legacy):
            _label(core, node, dict.fromkeys(MARKS))


def _pdb(namespace: str, app: str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }


def _guest(name: str, node: str, app: str) -> dict[str, Any]:
    pod = lib.sim_pod(name, node_name=node, labels={"app": app})
    pod["spec"]["tolerations"] = [{"key": "phased.dev/spare", "operator": "Exists"}]
    return pod


def _budget_in_force(core: Any, namespace: str, name: str) -> bool:
    """The disruption controller has counted the guarded pod: no disruption allowed."""
    policy = kubernetes.client.PolicyV1Api(core.api_client)
    budget = policy.read_namespaced_pod_disruption_budget(name, namespace).status
    return bool(
        budget is not None
        and budget.observed_generation
        and budget.current_healthy >= 1
        and budget.disruptions_allowed == 0
    )


def _deleting_or_gone(core: Any, namespace: str, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        return core.read_namespaced_pod(name, namespace).metadata.deletion_timestamp is not None
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise


def test_guests_of_a_promoted_spare_leave_by_eviction_and_earlier_pods_stay(
    operator: Operator,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
    kubeconfig: str,
) -> None:
    job = _job(
        "borrowed",
        "H100",
        1,
        1,
        spares=1,
        failurePolicy={"notReadyGrace": "2s"},
    )
    job["spec"]["spares"]["whileIdle"] = "Preemptible"
    apply(kubectl, namespace, job)
    uid = get_job(kubectl, namespace, "borrowed")["metadata"]["uid"]

    def running() -> dict[str, Any] | None:
        st = status(kubectl, namespace, "borrowed")
        pool = st.get("pool") or {}
        ok = [p for p in live_workers(core, namespace, uid) if p.status.phase == "Running"]
        return st if ok and pool.get("spares") and pool.get("active") else None

    st = lib.wait_until(running, 90, message=f"borrowed running\n{operator.tail(40)}")
    (active,) = st["pool"]["active"]
    (spare,) = st["pool"]["spares"]
    tenant = lib.create_namespace(core, "tenant")
    try:
        # A pod that was on the node before Phased claimed it: Phased's claim would not have
        # been made with it there, so it stands for a pod that raced the claim. The node's
        # claim time is moved past its creation, as if the claim had come after it.
        core.create_namespaced_pod(tenant, lib.sim_pod("there-first", node_name=spare))
        lib.wait_pod_phase(core, tenant, "there-first", "Running")
        time.sleep(1.1)
        claimed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        core.patch_node(spare, {"metadata": {"annotations": {CLAIMED_AT: claimed}}})
        time.sleep(1.1)
        # Guests: one a PodDisruptionBudget protects (its only replica), one free to go.
        kubectl("apply", "-n", tenant, "-f", "-", input=json.dumps(_pdb(tenant, "guarded")))
        core.create_namespaced_pod(tenant, _guest("guarded", spare, "guarded"))
        core.create_namespaced_pod(tenant, _guest("polite", spare, "polite"))
        for name in ("guarded", "polite"):
            lib.wait_pod_phase(core, tenant, name, "Running")
        lib.wait_until(
            lambda: _budget_in_force(core, tenant, "guarded"),
            30,
            message="the disruption budget is in force",
        )

        lib.make_node_not_ready(core, sim_node(active))
        promoted = lib.wait_until(
            lambda: nodes_of(core, uid).get(spare) == "active",
            60,
            message=f"{spare} promoted\n{operator.tail(40)}",
        )
        assert promoted
        lib.wait_until(
            lambda: _deleting_or_gone(core, tenant, "polite"), 30, message="polite evicted"
        )

        def blocked() -> bool:
            scrape = operator.scrape()
            return (
                sum(metric_values(scrape, "phased_guest_evictions_total", outcome="blocked")) >= 1
            )

        lib.wait_until(blocked, TIMEOUT, message="an eviction refused by the budget")
        # The budget is honoured until the deadline ...
        assert not _deleting_or_gone(core, tenant, "guarded")
        # ... then the guest is deleted, and the pod from before the claim stays.
        lib.wait_until(
            lambda: _deleting_or_gone(core, tenant, "guarded"),
            TIMEOUT + 30,
            message=f"guarded deleted after the deadline\n{operator.tail(40)}",
        )
        assert lib.pod_phase(core, tenant, "there-first") == "Running"
        assert not _deleting_or_gone(core, tenant, "there-first")
        lib.wait_until(
            lambda: _events(core, namespace, "GuestsDeleted"), 10, message="GuestsDeleted"
        )
        left = " ".join(_events(core, namespace, "GuestsLeftAlone"))
        assert f"{tenant}/there-first" in left
        lib.wait_until(
            lambda: (
                "phased.dev/clearing-since"
                not in (core.read_node(spare).metadata.annotations or {})
            ),
            30,
            message="clearing finished",
        )
        _delete_job(kubectl, core, namespace, "borrowed", uid)
    finally:
        lib.delete_namespace(core, tenant)
        release_quarantined(kubeconfig)
