"""Node failure on the real cluster, beyond the single NotReady node: lost GPUs on a Ready
node, two nodes failing at once, no spare left, a rack failing en masse (the breaker holds
it until it recovers or a person says proceed), a
deleted node, an operator killed in the middle of a swap, a worker its node's kubelet
evicted under memory pressure, and a node the node lifecycle controller tainted for memory
pressure."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e import lib
from e2e.harness import REPO, Operator
from e2e.operator_fixtures import (
    apply,
    events,
    get_job,
    live_workers,
    nodes_of,
    release_quarantined,
    said_soon,
    status,
)


def long_job(name: str, active: int, spares: int, **policy: Any) -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "spares": {"count": spares},
            "failurePolicy": {"notReadyGrace": "3s", "gpuDropGrace": "2s", **policy},
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": max(1, active - 2), "max": active},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "template": {"annotations": {"sim.phased.dev/succeed-after": "10m"}},
                }
            ],
        },
    }


@pytest.fixture
def running(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str, kubeconfig: str
) -> Iterator[Any]:
    """``running(job) -> (name, uid, status)`` once its workers run; deleted afterwards."""
    started: list[tuple[str, str]] = []

    def start(job: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        name = job["metadata"]["name"]
        apply(kubectl, namespace, job)
        uid = get_job(kubectl, namespace, name)["metadata"]["uid"]
        started.append((name, uid))
        wanted = job["spec"]["phases"][0]["nodes"]["max"]
        spares = job["spec"]["spares"]["count"]

        def ready() -> dict[str, Any] | None:
            st = status(kubectl, namespace, name)
            pool = st.get("pool") or {}
            workers = [p for p in live_workers(core, namespace, uid) if p.status.phase == "Running"]
            full = len(pool.get("active", [])) == wanted and len(pool.get("spares", [])) == spares
            return st if full and len(workers) == wanted else None

        return name, uid, lib.wait_until(ready, 120, message=f"{name} running with its pool")

    yield start
    for name, uid in started:
        kubectl("delete", "trainingjob", name, "-n", namespace, "--wait=false")
        lib.wait_until(
            lambda uid=uid: set(nodes_of(core, uid).values()) <= {"quarantined"},
            60,
            message="nodes released",
        )
    release_quarantined(kubeconfig)


def ledger_for(st: dict[str, Any], node: str) -> list[dict[str, Any]]:
    return [f for f in st.get("failures", []) if f["node"] == node]


def test_lost_gpus_on_a_ready_node_are_a_failure(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    name, _, st = running(long_job("gpudrop", 3, 1))
    victim = sim_node(sorted(st["pool"]["active"])[0])
    lib.drop_allocatable_gpus(core, victim, 6)

    def swapped() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        entries = ledger_for(s, victim)
        return s if entries and entries[0].get("resumed") else None

    st = lib.wait_until(swapped, 60, message="the GPU drop answered")
    entry = ledger_for(st, victim)[0]
    assert entry["reason"] == "GPUCapacityDropped"
    assert entry["replacedBy"] in st["pool"]["active"]
    assert victim not in st["pool"]["active"]


def test_a_worker_that_cannot_be_placed_on_an_ailing_node_goes_to_the_spare_at_once(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    """A node loses GPUs (a failure only after its 5-minute grace) while its worker, rank 1,
    runs on: the worker is waited for. Its worker then goes (deleted by hand, as an eviction
    would): the replacement of that rank cannot be placed there, so the node trades places
    with the spare at once and the worker runs on the spare, with no ledger entry and no
    grace."""
    job = long_job("unplaced", 2, 1, gpuDropGrace="5m", restartScope="Worker")
    job["spec"]["launcher"] = {"type": "Torchrun", "rendezvous": "C10d"}
    name, uid, st = running(job)
    spare = st["pool"]["spares"][0]
    # Rank 1's node: while rank 0's node is in trouble, or rank 0 is lost, its agent (which
    # hosts the c10d rendezvous store) takes the gang down with it, and the gang restarts.
    (rank1,) = [
        p for p in live_workers(core, namespace, uid) if p.metadata.labels["phased.dev/rank"] == "1"
    ]
    victim = sim_node(rank1.spec.node_name)
    lib.drop_allocatable_gpus(core, victim, 6)
    time.sleep(3)  # seen by the operator: a suspect within its grace, its worker left alone
    (worker,) = [p for p in live_workers(core, namespace, uid) if p.spec.node_name == victim]
    assert worker.status.phase == "Running"
    core.delete_namespaced_pod(worker.metadata.name, namespace)

    def moved() -> dict[str, Any] | None:
        on = {
            p.spec.node_name
            for p in live_workers(core, namespace, uid)
            if p.status.phase == "Running"
            and p.metadata.labels["phased.dev/rank"] == worker.metadata.labels["phased.dev/rank"]
        }
        return status(kubectl, namespace, name) if spare in on else None

    st = lib.wait_until(moved, 60, message="the rank running on the spare")
    assert victim in st["pool"]["spares"] and spare in st["pool"]["active"]
    assert ledger_for(st, victim) == []  # within its grace: nothing has failed
    assert "TroubledNodeSwapped" in job_events(kubectl, namespace, name)


def test_two_nodes_failing_at_once_are_both_replaced(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    name, uid, st = running(long_job("double", 4, 2, massFailure={"maxFailedPercent": 50}))
    victims = [sim_node(n) for n in sorted(st["pool"]["active"])[:2]]
    for victim in victims:
        lib.make_node_not_ready(core, victim, wait=None)

    def both() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        done = all(ledger_for(s, v) and ledger_for(s, v)[0].get("resumed") for v in victims)
        return s if done else None

    st = lib.wait_until(both, 90, message="both failures answered")
    replacements = {ledger_for(st, v)[0]["replacedBy"] for v in victims}
    assert len(replacements) == 2 and replacements <= set(st["pool"]["active"])
    assert len(st["pool"]["active"]) == 4
    running_on = {
        p.spec.node_name for p in live_workers(core, namespace, uid) if p.status.phase == "Running"
    }
    assert running_on == set(st["pool"]["active"])


def test_with_no_spare_left_the_gang_restarts_smaller_while_at_least_min(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    """No spare: the gang restarts at once, on a pool formed again from the 3 healthy nodes
    (min is 2) and the free nodes it can claim (this cluster has some), rather than wait."""
    name, uid, st = running(long_job("nospare", 4, 0))  # min 2, max 4, no spares
    victim = sim_node(sorted(st["pool"]["active"])[0])
    lib.make_node_not_ready(core, victim, wait=None)

    def restarted() -> dict[str, Any] | None:
        # The condition holds only until a free node is claimed back, so read the event too.
        s = status(kubectl, namespace, name)
        said = [
            e["message"]
            for e in events(kubectl, namespace, f"involvedObject.name={name}")
            if e.get("reason") == "SparesExhausted"
        ]
        entry = ledger_for(s, victim)
        return {"status": s, "said": said} if entry and entry[0].get("resumed") and said else None

    found = lib.wait_until(
        restarted,
        60,
        message=lambda: f"SparesExhausted; status: {status(kubectl, namespace, name)}",
    )
    st = found["status"]
    assert any(f"the spares do not cover the lost node(s) {victim}" in e for e in found["said"]), (
        found["said"]
    )
    assert st["restartGeneration"] >= 1

    def healthy_gang() -> bool:
        s = status(kubectl, namespace, name)
        workers = {
            p.spec.node_name
            for p in live_workers(core, namespace, uid)
            if p.status.phase == "Running"
        }
        return len(s["pool"]["active"]) >= 3 and workers == set(s["pool"]["active"])

    lib.wait_until(healthy_gang, 60, message="one running worker on every active node")
    assert victim not in status(kubectl, namespace, name)["pool"]["active"]


def job_events(kubectl: lib.Kubectl, namespace: str, name: str) -> list[str]:
    """The reasons of every event posted about the job, one per event object."""
    return [e.get("reason", "") for e in events(kubectl, namespace, f"involvedObject.name={name}")]


def mass_failure(st: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in st.get("conditions", []) if c["type"] == "MassFailure"), {})


def fail_a_rack(core: Any, st: dict[str, Any], sim_node: Any) -> list[str]:
    """Make NotReady the pool nodes of the rack where the pool has the most (4 with 8)."""
    pool = [*st["pool"]["active"], *st["pool"]["spares"]]
    racks: dict[str, list[str]] = {}
    for name in pool:
        rack = (core.read_node(name).metadata.labels or {}).get("topology.phased.dev/rack", "")
        racks.setdefault(rack, []).append(name)
    victims = sorted(max(racks.values(), key=len))[:4]
    assert len(victims) >= 3, racks
    for victim in victims:
        lib.make_node_not_ready(core, sim_node(victim), wait=None)
    return victims


def ready_of(core: Any, nodes: list[str]) -> dict[str, tuple[str, str]]:
    """Each node's Ready status and its transition time, to explain a failed assertion."""
    out = {}
    for name in nodes:
        cond = lib.node_condition(core, name, "Ready")
        out[name] = (cond.status, str(cond.last_transition_time)) if cond else ("missing", "")
    return out


RACK_POLICY = {"massFailure": {"window": "10s"}}  # 20% of 8 is one node


def test_a_failed_rack_is_held_past_the_window_and_cleared_when_it_recovers(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    name, _, st = running(long_job("rack", 6, 2, **RACK_POLICY))
    victims = fail_a_rack(core, st, sim_node)

    def tripped() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        held = {h["node"] for h in (s.get("breaker") or {}).get("held", [])}
        return s if mass_failure(s).get("status") == "True" and held == set(victims) else None

    st = lib.wait_until(tripped, 60, message="the breaker holding the rack")
    first_seen = {h["node"]: h["since"] for h in st["breaker"]["held"]}
    time.sleep(25)  # well past the 10s window and the 3s grace
    st = status(kubectl, namespace, name)
    assert mass_failure(st)["status"] == "True", st["conditions"]
    held = {h["node"]: h["since"] for h in st["breaker"]["held"]}
    assert held == first_seen, (st.get("suspects"), ready_of(core, victims))
    assert [v for v in victims if core.read_node(v).spec.unschedulable] == []
    assert st.get("failures", []) == [] and st["pool"].get("quarantined", []) == []
    assert job_events(kubectl, namespace, name).count("MassFailure") == 1

    for victim in victims:  # the rack's power comes back
        lib.make_node_ready(core, victim, wait=None)

    def cleared() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        return s if mass_failure(s).get("status") == "False" else None

    st = lib.wait_until(cleared, 60, message="the breaker to clear")
    assert mass_failure(st)["reason"] == "Recovered"
    assert st.get("failures", []) == [] and st["pool"].get("quarantined", []) == []
    time.sleep(3)
    said = job_events(kubectl, namespace, name)
    assert said.count("MassFailure") == 1 and said.count("MassFailureCleared") == 1, said


def test_a_persons_proceed_swaps_what_the_breaker_holds(
    running: Any,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
    kubeconfig: str,
) -> None:
    name, uid, st = running(long_job("proceed", 6, 2, **RACK_POLICY))
    victims = fail_a_rack(core, st, sim_node)
    lib.wait_until(
        lambda: mass_failure(status(kubectl, namespace, name)).get("status") == "True",
        60,
        message="the breaker tripping",
    )
    time.sleep(12)  # past the window: still held
    assert [v for v in victims if core.read_node(v).spec.unschedulable] == []
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    proceed = [sys.executable, "-m", "phased", "proceed", f"{namespace}/{name}"]
    proceed += ["--kubeconfig", kubeconfig]
    # The operator's resync writes the status meanwhile: the command reads again on its own.
    done = subprocess.run(proceed, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr + done.stdout

    def answered() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        entries = [f for f in s.get("failures", []) if f["node"] in victims]
        return s if len(entries) == len(victims) else None

    st = lib.wait_until(answered, 60, message="the held failures answered")
    cond = mass_failure(st)
    assert cond["status"] == "False" and cond["reason"] == "ReleasedByPerson", cond
    assert all(core.read_node(v).spec.unschedulable for v in victims)
    assert set(victims) <= set(nodes_of(core, uid)) and all(
        nodes_of(core, uid)[v] == "quarantined" for v in victims
    )
    assert {f["reason"] for f in st["failures"]} == {"NodeNotReady"}
    said = said_soon(
        kubectl, namespace, f"involvedObject.name={name}", "MassFailure", "MassFailureReleased"
    )
    assert said.count("MassFailure") == 1 and said.count("MassFailureReleased") == 1, said
    # A second run finds nothing to release.
    again = subprocess.run(proceed, capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 1, again.stdout


def test_an_operator_killed_in_the_middle_of_a_swap_finishes_it_exactly_once(
    running: Any,
    operator: Operator,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
) -> None:
    name, uid, st = running(long_job("midswap", 3, 1))
    victim = sim_node(sorted(st["pool"]["active"])[0])
    lib.make_node_not_ready(core, victim, wait=None)
    # Kill as soon as the node is cordoned: the status write of that pass may not have happened.
    lib.wait_until(
        lambda: core.read_node(victim).spec.unschedulable, 30, interval=0.05, message="the cordon"
    )
    operator.kill()
    time.sleep(1)
    operator.start()

    def resumed() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        entries = ledger_for(s, victim)
        return s if entries and entries[0].get("resumed") else None

    st = lib.wait_until(resumed, 90, message="the swap finished after the restart")
    assert len(ledger_for(st, victim)) == 1, st["failures"]
    assert len(st["pool"]["active"]) == 3
    assert len({f["id"] for f in st["failures"]}) == len(st["failures"])
    workers = [p for p in live_workers(core, namespace, uid) if p.status.phase == "Running"]
    assert len(workers) == 3


def test_a_deleted_node_is_replaced(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    name, _, st = running(long_job("vanish", 3, 1))
    victim = sorted(st["pool"]["active"])[0]
    saved = core.read_node(victim)
    core.delete_node(victim)
    try:

        def swapped() -> dict[str, Any] | None:
            s = status(kubectl, namespace, name)
            entries = ledger_for(s, victim)
            return s if entries and entries[0].get("resumed") else None

        st = lib.wait_until(swapped, 60, message="the deleted node replaced")
        assert ledger_for(st, victim)[0]["reason"] == "NodeDeleted"
    finally:
        # Put the simulated node back as it was before the test (without Phased's marks).
        labels = {
            k: v
            for k, v in (saved.metadata.labels or {}).items()
            if not k.startswith("phased.dev/")
        }
        taints = [t for t in saved.spec.taints or [] if not t.key.startswith("phased.dev/")]
        body = {
            "metadata": {
                "name": victim,
                "labels": labels,
                "annotations": saved.metadata.annotations or {},
            },
            "spec": {"taints": taints or None},
            "status": {"capacity": saved.status.capacity, "allocatable": saved.status.allocatable},
        }
        core.create_node(body)
        lib.wait_until(lambda: lib.node_ready(core, victim) == "True", 60, message="node back")


def test_a_preemptible_spare_lends_itself_and_is_cleared_on_promotion(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    job = long_job("lender", 3, 1)
    job["spec"]["spares"]["whileIdle"] = "Preemptible"
    name, _, st = running(job)
    spare = st["pool"]["spares"][0]
    taints = {t.key for t in core.read_node(spare).spec.taints or []}
    assert "phased.dev/spare" in taints and "phased.dev/pool" not in taints, taints

    guest = lib.sim_pod("guest", node_selector={"kubernetes.io/hostname": spare})
    guest["spec"]["tolerations"] = [
        {"key": "phased.dev/spare", "operator": "Exists", "effect": "NoSchedule"}
    ]
    core.create_namespaced_pod(namespace, guest)
    lib.wait_pod_phase(core, namespace, "guest", "Running", timeout=60)

    victim = sim_node(sorted(st["pool"]["active"])[0])
    lib.make_node_not_ready(core, victim, wait=None)

    def promoted() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        entries = ledger_for(s, victim)
        return s if entries and entries[0].get("resumed") else None

    st = lib.wait_until(promoted, 90, message="the spare promoted")
    assert ledger_for(st, victim)[0]["replacedBy"] == spare
    lib.wait_pod_gone(core, namespace, "guest", timeout=60)
    taints = {t.key for t in core.read_node(spare).spec.taints or []}
    assert "phased.dev/pool" in taints and "phased.dev/spare" not in taints, taints


def end_as_the_kubelet_does(
    core: Any, namespace: str, pod: Any, exit_code: int, **status: Any
) -> None:
    """Write the status a kubelet writes for a worker whose container ended with
    ``exit_code``: the pod Failed, not Ready, and ``status`` (a reason, more conditions)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    terminated = {"exitCode": exit_code, "reason": "Error", "startedAt": now, "finishedAt": now}
    conditions = [*status.pop("conditions", []), {"type": "Ready", "status": "False"}]
    body = {
        "status": {
            "phase": "Failed",
            **status,
            "conditions": [{**c, "lastTransitionTime": now} for c in conditions],
            "containerStatuses": [
                {"name": "worker", "state": {"running": None, "terminated": terminated}}
            ],
        }
    }
    core.patch_namespaced_pod_status(pod.metadata.name, namespace, body)


def evict_as_the_kubelet_does(core: Any, namespace: str, pod: Any) -> None:
    """The status a kubelet writes for a worker it evicted under memory pressure: the
    ``DisruptionTarget`` condition, the pod Failed with reason ``Evicted``, the container
    killed (137)."""
    said = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 20Mi."
    target = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "TerminationByKubelet",
        "message": said,
    }
    end_as_the_kubelet_does(
        core, namespace, pod, 137, reason="Evicted", message=said, conditions=[target]
    )


def restarted_once_on_its_pool(
    kubectl: lib.Kubectl, core: Any, namespace: str, name: str, uid: str, size: int, why: str
) -> dict[str, Any]:
    """The job's status once it has restarted once and its ``size`` workers run again, on
    exactly the active nodes its status names."""

    def again() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        workers = [p for p in live_workers(core, namespace, uid) if p.status.phase == "Running"]
        on = {p.spec.node_name for p in workers}
        active = set((s.get("pool") or {}).get("active", []))
        return s if s.get("restarts") == 1 and len(on) == size and on == active else None

    return dict(lib.wait_until(again, 90, message=f"the gang running again {why}"))


def test_a_worker_its_node_evicted_moves_to_the_spare_uncharged(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    """restartBudget 0: were the eviction judged the code's failure, the job would fail."""
    name, uid, st = running(long_job("evicted", 3, 1, restartBudget=0))
    victim = sorted(st["pool"]["active"])[1]
    pod = next(p for p in live_workers(core, namespace, uid) if p.spec.node_name == victim)
    evict_as_the_kubelet_does(core, namespace, pod)

    st = restarted_once_on_its_pool(kubectl, core, namespace, name, uid, 3, "off the evicting node")
    assert st["state"] == "Running"
    assert st.get("workerRestarts", 0) == 0
    assert victim in st["pool"]["spares"] and victim not in st["pool"]["active"]
    assert st["phases"][0].get("nodeDisruptions") == 1
    assert "TroubledNodeSwapped" in job_events(kubectl, namespace, name)


def test_a_node_under_memory_pressure_takes_no_new_worker_while_a_spare_is_healthy(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    """The node lifecycle controller taints a node whose MemoryPressure condition is True;
    a worker failing elsewhere restarts the gang, and the node under pressure trades places
    with the healthy spare before the new generation is made."""
    name, uid, st = running(long_job("pressure", 3, 1, restartBudget=5))
    first, _, pressed = sorted(st["pool"]["active"])
    lib.set_gpu_fault(core, sim_node(pressed), condition="MemoryPressure")
    lib.wait_for_taint(core, pressed, ["node.kubernetes.io/memory-pressure"])
    pod = next(p for p in live_workers(core, namespace, uid) if p.spec.node_name == first)
    end_as_the_kubelet_does(core, namespace, pod, 1)

    st = restarted_once_on_its_pool(kubectl, core, namespace, name, uid, 3, "off the pressed node")
    assert pressed in st["pool"]["spares"] and pressed not in st["pool"]["active"]
    assert not ledger_for(st, pressed)  # nothing failed: no quarantine, no ledger entry
    assert "TroubledNodeSwapped" in job_events(kubectl, namespace, name)


def test_a_worker_waiting_for_a_node_under_pressure_no_spare_covers_is_no_stuck_start(
    running: Any, kubectl: lib.Kubectl, core: Any, namespace: str, sim_node: Any
) -> None:
    """No spare, ``pendingGrace`` 5 s and no start retry: were the wait for the node under
    pressure judged a stuck start, the job would fail 5 s after its new generation."""
    job = long_job("pressed", 3, 0, restartBudget=5, pendingGrace="5s", pendingRestarts=0)
    name, uid, st = running(job)
    first, _, pressed = sorted(st["pool"]["active"])
    lib.set_gpu_fault(core, sim_node(pressed), condition="MemoryPressure")
    lib.wait_for_taint(core, pressed, ["node.kubernetes.io/memory-pressure"])
    pod = next(p for p in live_workers(core, namespace, uid) if p.spec.node_name == first)
    end_as_the_kubelet_does(core, namespace, pod, 1)

    def waiting() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        said = {c["type"]: c for c in s.get("conditions", [])}.get("WorkersPending", {})
        on_condition = said.get("status") == "True" and said.get("reason") == "NodeCondition"
        return s if on_condition or s.get("state") == "Failed" else None

    st = lib.wait_until(waiting, 90, message="the worker waiting for the node under pressure")
    assert st["state"] != "Failed", st.get("message")
    assert st["phases"][0].get("pendingRestarts", 0) == 0
    said_soon(kubectl, namespace, f"involvedObject.name={name}", "WorkersWaitingOnNodeCondition")

    lib.clear_gpu_fault(core, pressed)  # MemoryPressure False, as a kubelet reports it over
    assert lib.node_condition(core, pressed, "MemoryPressure").status == "False"
    st = restarted_once_on_its_pool(kubectl, core, namespace, name, uid, 3, "once it passed")
    assert pressed in st["pool"]["active"]
    assert st["state"] == "Running" and st.get("workerRestarts") == 1
