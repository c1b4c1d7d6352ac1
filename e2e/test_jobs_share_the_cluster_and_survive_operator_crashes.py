"""Lifecycle on the real cluster: deleting a job gives everything back, two jobs competing
for too few nodes never share one and both finish, and an operator killed mid-phase carries
on without duplicate workers or a lost history."""

from __future__ import annotations

import collections
import time
from typing import Any

from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import (
    JOB_UID,
    apply,
    get_job,
    live_workers,
    nodes_of,
    status,
    wait_state,
)


def job(name: str, phases: list[dict[str, Any]], spares: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "spares": {"count": spares},
            "failurePolicy": {"notReadyGrace": "5s"},
            "phases": phases,
        },
    }


def phase(name: str, lo: int, hi: int, seconds: int, gpu: str = "H100") -> dict[str, Any]:
    return {
        "name": name,
        "nodes": {"min": lo, "max": hi},
        "gpuTypes": [gpu],
        "gpusPerNode": 8,
        "template": {"annotations": {"sim.phased.dev/succeed-after": f"{seconds}s"}},
    }


def test_deleting_a_running_job_releases_its_nodes_and_pods(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    apply(kubectl, namespace, job("doomed", [phase("train", 3, 4, 600)], spares=1))
    uid = get_job(kubectl, namespace, "doomed")["metadata"]["uid"]
    wait_state(kubectl, namespace, "doomed", {"Running"}, 120, operator)
    lib.wait_until(lambda: len(live_workers(core, namespace, uid)) == 4, 60, message="4 workers")
    assert len(nodes_of(core, uid)) == 5

    kubectl("delete", "trainingjob", "doomed", "-n", namespace, "--timeout=90s")
    lib.wait_until(lambda: not nodes_of(core, uid), 60, message="every node released")
    lib.wait_until(
        lambda: not core.list_namespaced_pod(namespace, label_selector=f"{JOB_UID}={uid}").items,
        60,
        message="every worker gone",
    )
    for node in core.list_node().items:
        keys = {t.key for t in node.spec.taints or []}
        assert "phased.dev/pool" not in keys or (node.metadata.labels or {}).get(JOB_UID), (
            f"{node.metadata.name} keeps a pool taint without an owner"
        )


def test_two_jobs_competing_for_too_few_nodes_never_share_one_and_both_finish(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    # 16 H100 nodes; each job wants 10-12 in its second phase: they cannot both run it at once.
    for name in ("first", "second"):
        apply(kubectl, namespace, job(name, [phase("warmup", 2, 2, 5), phase("train", 10, 12, 25)]))
        time.sleep(1)  # "first" is the older: it is served first
    uids = {n: get_job(kubectl, namespace, n)["metadata"]["uid"] for n in ("first", "second")}
    deadline = time.monotonic() + 420
    overlaps: list[str] = []
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        pools = {}
        for name in uids:
            st = status(kubectl, namespace, name)
            states[name] = st.get("state", "")
            pool = st.get("pool") or {}
            pools[name] = set(pool.get("active", [])) | set(pool.get("spares", []))
        if pools["first"] & pools["second"]:
            overlaps.append(f"status pools share {pools['first'] & pools['second']}")
        labelled = [set(nodes_of(core, uid)) for uid in uids.values()]
        if labelled[0] & labelled[1]:
            overlaps.append(f"labels share {labelled[0] & labelled[1]}")
        if all(s in ("Succeeded", "Failed") for s in states.values()):
            break
        time.sleep(1)
    assert not overlaps, overlaps[:5]
    assert states == {"first": "Succeeded", "second": "Succeeded"}, f"{states}\n{operator.tail()}"
    first = status(kubectl, namespace, "first")["phases"][1]
    second = status(kubectl, namespace, "second")["phases"][1]
    assert first["startTime"] <= second["startTime"], "the older job should train first"
    assert second["waitingSeconds"] > 0, "the younger job should have waited for capacity"


def test_an_operator_killed_mid_phase_carries_on_without_duplicates(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    apply(kubectl, namespace, job("crashy", [phase("one", 3, 3, 8), phase("two", 5, 5, 20)], 1))
    uid = get_job(kubectl, namespace, "crashy")["metadata"]["uid"]
    kills = 0
    history_seen: dict[str, str] = {}
    deadline = time.monotonic() + 300
    st: dict[str, Any] = {}
    while time.monotonic() < deadline:
        st = status(kubectl, namespace, "crashy")
        for record in st.get("phases", []):
            if record.get("startTime"):
                # A recorded start never changes or disappears across restarts.
                assert (
                    history_seen.setdefault(record["name"], record["startTime"])
                    == record["startTime"]
                ), st["phases"]
        live = [p for p in live_workers(core, namespace, uid)]
        ranks = collections.Counter(
            (p.metadata.labels.get("phased.dev/phase"), p.metadata.labels.get("phased.dev/rank"))
            for p in live
            if p.status.phase in ("Pending", "Running")
        )
        assert all(c == 1 for c in ranks.values()), f"duplicate workers: {ranks}"
        if st.get("state") == "Succeeded":
            break
        if kills < 4 and st.get("state") in ("Running", "Pending", "Waiting"):
            operator.kill()
            kills += 1
            time.sleep(0.5)
            operator.start()
        time.sleep(1.5)
    assert st.get("state") == "Succeeded", f"{st}\n{operator.tail()}"
    assert kills >= 3
    assert [p["state"] for p in st["phases"]] == ["Succeeded", "Succeeded"]
    lib.wait_until(lambda: not nodes_of(core, uid), 60, message="nodes released at the end")
