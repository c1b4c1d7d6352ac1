"""Gang admission on the real cluster: a job that cannot have its nodes.min holds nothing, a
job ahead in line keeps what it needs from jobs behind, a job that can never fit blocks
nobody, a running job's spare refill never waits in line, and workers that cannot start
fail the job after their grace instead of leaving it "Running"."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import (
    apply,
    get_job,
    live_workers,
    nodes_of,
    release_quarantined,
    said_soon,
    status,
)

H100 = "NVIDIA-H100-80GB-HBM3"


def job(name: str, lo: int, hi: int, spares: int = 0, priority: int = 0, **extra: Any) -> Any:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "priority": priority,
            "spares": {"count": spares},
            "failurePolicy": {"notReadyGrace": "3s"},
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": lo, "max": hi},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "template": {"annotations": {"sim.phased.dev/succeed-after": "10m"}},
                    **extra,
                }
            ],
        },
    }


def condition(st: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in st.get("conditions", []) if c["type"] == kind), {})


@pytest.fixture
def jobs(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str, kubeconfig: str
) -> Iterator[Any]:
    """``jobs(manifest) -> uid``: apply a TrainingJob; every one is deleted afterwards."""
    made: list[tuple[str, str]] = []

    def start(manifest: dict[str, Any]) -> str:
        name = manifest["metadata"]["name"]
        apply(kubectl, namespace, manifest)
        uid = str(get_job(kubectl, namespace, name)["metadata"]["uid"])
        made.append((name, uid))
        return uid

    yield start
    for name, _ in made:
        kubectl(
            "delete", "trainingjob", name, "-n", namespace, "--wait=false", "--ignore-not-found"
        )
    for _, uid in made:
        lib.wait_until(
            lambda uid=uid: set(nodes_of(core, uid).values()) <= {"quarantined"},
            60,
            message="nodes released",
        )
    release_quarantined(kubeconfig)


def free_h100(core: Any) -> list[str]:
    out = []
    for n in lib.gpu_nodes(core, H100):
        labels = n.metadata.labels or {}
        ready = lib.node_ready(core, n.metadata.name) == "True"
        ours = "phased.dev/job-uid" in labels or "phased.dev/role" in labels
        if ready and not n.spec.unschedulable and not ours:
            out.append(n.metadata.name)
    return sorted(out)


def test_jobs_wait_whole_in_a_fair_line_and_a_running_jobs_refill_never_waits(
    jobs: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any, operator: Operator
) -> None:
    # Jobs of earlier tests may still be giving their nodes back.
    lib.wait_until(
        lambda: len(free_h100(core)) >= 12,
        90,
        message=lambda: f"12 free H100 nodes for this test (free: {free_h100(core)})",
    )
    total = len(free_h100(core))
    # A runs: 4 workers and 2 spares.
    a = jobs(job("runner", 4, 4, spares=2))
    lib.wait_until(
        lambda: (
            status(kubectl, namespace, "runner").get("state") == "Running"
            and len(status(kubectl, namespace, "runner")["pool"].get("spares", [])) == 2
        ),
        120,
        message="runner running with its spares",
    )
    # B, ahead of everyone (priority), needs 2 more nodes than are free; C, behind it, needs 2;
    # D wants more H100 nodes than the cluster has, at the highest priority.
    free_now = len(free_h100(core))
    b = jobs(job("big", free_now + 2, free_now + 2, priority=10))
    time.sleep(2)  # B publishes its need first
    c = jobs(job("small", 2, 2))
    d = jobs(job("huge", total + 5, total + 5, priority=100))

    def all_waiting() -> dict[str, Any] | None:
        sts = {n: status(kubectl, namespace, n) for n in ("big", "small", "huge")}
        ok = all(s.get("state") == "Waiting" for s in sts.values())
        return sts if ok else None

    sts = lib.wait_until(all_waiting, 60, message="big, small and huge waiting")
    time.sleep(5)
    for uid in (b, c, d):
        assert nodes_of(core, uid) == {}, "a waiting job holds nodes"
    assert sts["big"]["waitingFor"] == {"H100": free_now + 2}
    assert sts["huge"].get("waitingFor", {}) == {}  # it could never start: it blocks nobody
    assert "the cluster has only" in condition(sts["huge"], "CapacityShort")["message"]
    assert "kept for jobs ahead" in condition(sts["small"], "CapacityShort")["message"]

    # A loses a node: the spare is promoted and refilled although B waits ahead of it.
    st = status(kubectl, namespace, "runner")
    victim = sim_node(sorted(st["pool"]["active"])[0])
    lib.make_node_not_ready(core, victim, wait=None)

    def refilled() -> dict[str, Any] | None:
        s = status(kubectl, namespace, "runner")
        entry = [f for f in s.get("failures", []) if f["node"] == victim]
        full = len(s["pool"].get("spares", [])) == 2 and len(s["pool"]["active"]) == 4
        return s if entry and entry[0].get("replacedBy") and full else None

    lib.wait_until(
        refilled, 90, message=lambda: f"runner refilled; {status(kubectl, namespace, 'runner')}"
    )
    assert nodes_of(core, b) == {} and nodes_of(core, c) == {}

    # A ends: B takes its whole min at once, and C starts beside it.
    kubectl("delete", "trainingjob", "runner", "-n", namespace, "--wait=false")
    lib.wait_until(
        lambda: status(kubectl, namespace, "big").get("state") == "Running",
        120,
        message=lambda: f"big running; {status(kubectl, namespace, 'big')}\n{operator.tail(40)}",
    )
    assert len(status(kubectl, namespace, "big")["pool"]["active"]) == free_now + 2
    if total - 1 - (free_now + 2) >= 2:  # room for C beside B (the victim stays quarantined)
        lib.wait_until(
            lambda: status(kubectl, namespace, "small").get("state") == "Running",
            60,
            message="small running beside big",
        )
    assert nodes_of(core, d) == {}
    del a


def test_workers_that_cannot_be_scheduled_fail_the_job_after_their_grace(
    jobs: Any, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    manifest = job("unfit", 1, 1)
    manifest["spec"]["failurePolicy"].update({"pendingGrace": "5s", "pendingRestarts": 1})
    manifest["spec"]["phases"][0]["template"]["resources"] = {"requests": {"cpu": "5000"}}
    uid = jobs(manifest)

    def failed() -> dict[str, Any] | None:
        s = status(kubectl, namespace, "unfit")
        return s if s.get("state") == "Failed" else None

    st = lib.wait_until(failed, 90, message=lambda: f"{status(kubectl, namespace, 'unfit')}")
    cond = condition(st, "Failed")
    assert cond["reason"] == "WorkersStuckPending" and "Unschedulable" in cond["message"], cond
    assert st["phases"][0]["pendingRestarts"] == 1
    assert condition(st, "WorkersPending")["status"] == "True"
    said_soon(kubectl, namespace, "involvedObject.name=unfit", "WorkersStuckPending")
    lib.wait_until(lambda: nodes_of(core, uid) == {}, 60, message="the failed job's nodes freed")
    assert [p for p in live_workers(core, namespace, uid) if p.status.phase == "Pending"] == []
