"""Reliability on the real cluster: the operator SIGKILLed at random moments — during claims,
phase transitions, a swap, refills and a deletion — at least 30 times, with the invariants
checked after every kill; the control plane stopped and started mid-run; a flapping node that
never stays down for the grace period is left alone.

``PHASED_CRASH_TRIALS`` sets the number of kills (default 30)."""

from __future__ import annotations

import collections
import os
import random
import subprocess
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
    release_quarantined,
    status,
    wait_state,
)

TRIALS = int(os.environ.get("PHASED_CRASH_TRIALS", "30"))


def four_phases(name: str, seconds: int = 8) -> dict[str, Any]:
    def phase(n: str, lo: int, hi: int) -> dict[str, Any]:
        return {
            "name": n,
            "nodes": {"min": lo, "max": hi},
            "gpuTypes": ["H100"],
            "gpusPerNode": 8,
            "template": {"annotations": {"sim.phased.dev/succeed-after": f"{seconds}s"}},
        }

    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "spares": {"count": 1},
            "failurePolicy": {"notReadyGrace": "3s"},
            "phases": [
                phase("prep", 2, 2),
                phase("init", 3, 3),
                phase("train", 4, 4),
                phase("check", 2, 2),
            ],
        },
    }


class Invariants:
    """What must hold after every kill; remembers the ledger to catch losses."""

    def __init__(self, core: Any, kubectl: lib.Kubectl, namespace: str) -> None:
        self.core, self.kubectl, self.namespace = core, kubectl, namespace
        self.ledgers: dict[str, set[tuple[str, str]]] = {}
        self.starts: dict[tuple[str, str], str] = {}
        self.broken: list[str] = []
        self.checks = 0

    def check(self, jobs: dict[str, str]) -> None:
        self.checks += 1
        owners: dict[str, str] = {}
        for node in self.core.list_node(label_selector=JOB_UID).items:
            uid = node.metadata.labels[JOB_UID]
            if uid not in jobs.values():
                owners[node.metadata.name] = uid  # a job that is gone: checked at the end
        for name, uid in jobs.items():
            pods = live_workers(self.core, self.namespace, uid)
            per_rank = collections.Counter(
                (
                    p.metadata.labels.get("phased.dev/phase"),
                    p.metadata.labels.get("phased.dev/rank"),
                )
                for p in pods
                if p.status.phase in ("Pending", "Running")
            )
            dupes = {k: c for k, c in per_rank.items() if c > 1}
            if dupes:
                self.broken.append(f"{name}: duplicate workers {dupes}")
            try:
                st = status(self.kubectl, self.namespace, name)
            except lib.KubectlError:
                continue  # deleted
            ledger = st.get("failures", [])
            ids = [f["id"] for f in ledger]
            if len(ids) != len(set(ids)):
                self.broken.append(f"{name}: duplicate ledger ids {ids}")
            keys = {(f["node"], f["detected"]) for f in ledger}
            if len(keys) != len(ledger):
                self.broken.append(f"{name}: duplicate ledger entries {ledger}")
            lost = self.ledgers.get(name, set()) - keys
            if lost:
                self.broken.append(f"{name}: ledger entries lost {lost}")
            self.ledgers[name] = keys | self.ledgers.get(name, set())
            for record in st.get("phases", []):
                if record.get("startTime"):
                    first = self.starts.setdefault((name, record["name"]), record["startTime"])
                    if first != record["startTime"]:
                        self.broken.append(f"{name}: phase {record['name']} start changed")
            pool = st.get("pool") or {}
            for other, other_uid in jobs.items():
                if other == name:
                    continue
                theirs = set(nodes_of(self.core, other_uid))
                mine = set(pool.get("active", [])) | set(pool.get("spares", []))
                if mine & theirs:
                    self.broken.append(f"{name} and {other} share {mine & theirs}")


def test_thirty_random_kills_break_no_invariant_and_the_jobs_finish(
    operator: Operator,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
    kubeconfig: str,
) -> None:
    rng = random.Random(20261129)
    inv = Invariants(core, kubectl, namespace)
    apply(kubectl, namespace, four_phases("steady"))
    jobs = {"steady": get_job(kubectl, namespace, "steady")["metadata"]["uid"]}
    kills = 0
    failed_node = ""
    doomed_deleted = False
    moments: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            st = status(kubectl, namespace, "steady")
            if not failed_node and st.get("phase") == "train" and st.get("state") == "Running":
                failed_node = sim_node(sorted(st["pool"]["active"])[0])
                lib.make_node_not_ready(core, failed_node, wait=None)
            if st.get("state") == "Succeeded" and "doomed" not in jobs:
                apply(kubectl, namespace, four_phases("doomed", seconds=60))
                jobs["doomed"] = get_job(kubectl, namespace, "doomed")["metadata"]["uid"]
            if "doomed" in jobs and not doomed_deleted:
                d = status(kubectl, namespace, "doomed")
                if d.get("state") == "Running" and d.get("phase") == "init":
                    kubectl("delete", "trainingjob", "doomed", "-n", namespace, "--wait=false")
                    doomed_deleted = True
            if kills < TRIALS:
                time.sleep(rng.uniform(0.3, 3.0))
                moments[f"{st.get('phase')}/{st.get('state')}"] += 1
                operator.kill()
                kills += 1
                inv.check(jobs)
                operator.start()
            else:
                time.sleep(1)
            done = st.get("state") == "Succeeded" and doomed_deleted and kills >= TRIALS
            if done and not nodes_of(core, jobs["doomed"]):
                break
        inv.check(jobs)
        print(f"\ncrash trials: {kills} kills, {inv.checks} invariant checks, at {dict(moments)}")
        assert kills >= TRIALS
        assert not inv.broken, inv.broken
        st = status(kubectl, namespace, "steady")
        assert st["state"] == "Succeeded", f"{st}\n{operator.tail()}"
        assert [p["state"] for p in st["phases"]] == ["Succeeded"] * 4
        assert [f["node"] for f in st["failures"]] == [failed_node]
        assert st["failures"][0].get("resumed")
        lib.wait_until(
            lambda: set(nodes_of(core, jobs["steady"])) <= {failed_node},
            60,
            message="steady's nodes released",
        )
        lib.wait_until(
            lambda: not nodes_of(core, jobs["doomed"]),
            60,
            message="the deleted job's nodes released",
        )
    finally:
        release_quarantined(kubeconfig)


def test_the_control_plane_stopped_mid_run_costs_nothing_but_time(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    apply(kubectl, namespace, four_phases("outage", seconds=10))
    uid = get_job(kubectl, namespace, "outage")["metadata"]["uid"]
    lib.wait_until(
        lambda: status(kubectl, namespace, "outage").get("phase") == "init",
        120,
        message="the second phase",
    )
    settings = lib.cluster_settings()
    kwokctl = [f"{settings['PHASED_BIN_KWOK']}/kwokctl", "--name", settings["PHASED_CLUSTER_NAME"]]
    env = {**os.environ, "KWOK_WORKDIR": settings["PHASED_KWOK_WORKDIR"]}
    subprocess.run([*kwokctl, "stop", "cluster"], check=True, env=env, capture_output=True)
    time.sleep(8)
    subprocess.run([*kwokctl, "start", "cluster"], check=True, env=env, capture_output=True)
    lib.wait_until(lambda: _api_up(core), 60, message="the API server back")
    st = wait_state(kubectl, namespace, "outage", {"Succeeded", "Failed"}, 240, operator)
    assert st["state"] == "Succeeded", st
    assert operator.alive, "the operator must ride out the outage, not exit"
    assert not st.get("failures"), "a control-plane outage is not a node failure"
    lib.wait_until(lambda: not nodes_of(core, uid), 60, message="nodes released")


def _api_up(core: Any) -> bool:
    try:
        core.list_namespace(limit=1)
    except Exception:
        return False
    return True


def test_a_flapping_node_that_never_stays_down_for_the_grace_is_left_alone(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    job = four_phases("flappy", seconds=600)
    job["spec"]["failurePolicy"] = {"notReadyGrace": "20s"}
    job["spec"]["phases"] = job["spec"]["phases"][2:3]
    apply(kubectl, namespace, job)
    wait_state(kubectl, namespace, "flappy", {"Running"}, 120, operator)
    st = status(kubectl, namespace, "flappy")
    node = sim_node(sorted(st["pool"]["active"])[0])
    generation = st["restartGeneration"]
    for _ in range(5):  # down ~4 s, up ~4 s: never down for the 20 s grace
        lib.make_node_not_ready(core, node, wait=10)
        time.sleep(2)
        lib.make_node_ready(core, node, wait=10)
        time.sleep(2)
    time.sleep(3)
    st = status(kubectl, namespace, "flappy")
    assert not st.get("failures"), st["failures"]
    assert node in st["pool"]["active"]
    assert st["restartGeneration"] == generation, "a flap must not restart the gang"
    assert not core.read_node(node).spec.unschedulable
    kubectl("delete", "trainingjob", "flappy", "-n", namespace, "--wait=false")
