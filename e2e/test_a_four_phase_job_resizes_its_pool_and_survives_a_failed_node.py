"""The small four-phase example on the real cluster: the pool follows the phases, every worker
is placed by the scheduler on the job's nodes, a node made NotReady in the training phase is
cordoned and swapped for a spare, the spares are refilled, the ledger records all four times,
the metrics agree with the cluster, and at the end every node is given back."""

from __future__ import annotations

import collections
import time
from typing import Any

from e2e import lib
from e2e.harness import Operator, metric_values
from e2e.operator_fixtures import (
    apply,
    get_job,
    live_workers,
    load_example,
    nodes_of,
    release_quarantined,
    status,
    wait_state,
)


def test_small_example_runs_to_succeeded_through_a_node_failure(
    operator: Operator,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
    kubeconfig: str,
) -> None:
    job = load_example("small.yaml")
    apply(kubectl, namespace, job)
    name = job["metadata"]["name"]
    uid = get_job(kubectl, namespace, name)["metadata"]["uid"]

    pool_sizes: dict[str, int] = {}
    misplaced: list[str] = []
    failed_node = ""
    deadline = time.monotonic() + 600
    st: dict[str, Any] = {}
    try:
        while time.monotonic() < deadline:
            st = status(kubectl, namespace, name)
            held = nodes_of(core, uid)
            active = {n for n, role in held.items() if role == "active"}
            phase = st.get("phase") or ""
            if st.get("state") == "Running":
                pool_sizes[phase] = max(pool_sizes.get(phase, 0), len(active))
            for pod in live_workers(core, namespace, uid):
                node = pod.spec.node_name
                if node and pod.status.phase == "Running" and node not in held:
                    misplaced.append(f"{pod.metadata.name} on {node}")
            if not failed_node and phase == "train" and st.get("state") == "Running" and active:
                failed_node = sim_node(sorted(active)[0])
                lib.make_node_not_ready(core, failed_node, wait=None)
            if st.get("state") in ("Succeeded", "Failed"):
                break
            time.sleep(1)
        assert st.get("state") == "Succeeded", f"{st}\n{operator.tail(60)}"
        assert not misplaced, misplaced

        # The pool followed the phases: each ran at its max (the cluster has room), as the
        # history says and as the node labels showed (sampled around the boundaries, so a
        # sample may catch the next phase's pool a moment early: never more than it).
        records = {p["name"]: p for p in st["phases"]}
        expected = {"preprocess": 3, "initialize": 8, "train": 10, "validate": 6}
        assert {n: r["maxNodesSeen"] for n, r in records.items()} == expected
        assert all(pool_sizes[n] >= expected[n] for n in expected), pool_sizes
        assert [p["state"] for p in st["phases"]] == ["Succeeded"] * 4
        assert all(p["gpuHours"] > 0 and p["cost"] > 0 for p in st["phases"])

        # The failure: cordoned, quarantined, replaced by a spare, all four times recorded.
        assert failed_node
        ledger = [f for f in st["failures"] if f["node"] == failed_node]
        assert len(ledger) == 1, st["failures"]
        entry = ledger[0]
        assert entry["reason"] == "NodeNotReady"
        for key in ("detected", "cordoned", "replaced", "resumed"):
            assert entry.get(key), f"ledger entry lacks {key}: {entry}"
        assert entry["detected"] <= entry["cordoned"] <= entry["replaced"] <= entry["resumed"]
        assert entry.get("replacedBy") and entry["replacedBy"] != failed_node
        assert records["train"]["restarts"] >= 1
        node = core.read_node(failed_node)
        assert node.spec.unschedulable is True
        assert node.metadata.labels.get("phased.dev/role") == "quarantined"
        assert st["interruption"]["usedSeconds"] > 0

        # The metrics agree with the ledger.
        scrape = operator.scrape()
        failures = metric_values(
            scrape,
            "phased_job_failures_total",
            namespace=namespace,
            trainingjob=name,
            reason="NodeNotReady",
        )
        assert sum(failures) == 1.0, failures  # one series per phase; one failure in all
        recoveries = metric_values(
            scrape,
            "phased_job_failure_recovery_seconds_count",
            namespace=namespace,
            trainingjob=name,
        )
        assert sum(recoveries) == 1.0, recoveries

        # Everything but the quarantined node is given back once the job is done.
        lib.wait_until(
            lambda: set(nodes_of(core, uid)) <= {failed_node}, 60, message="nodes released"
        )
    finally:
        release_quarantined(kubeconfig)


def test_spares_are_refilled_after_a_swap(
    operator: Operator,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
    kubeconfig: str,
) -> None:
    """A GPU-fault condition on a Ready node is a failure too; the spare pool is back to
    its count right after the swap."""
    job = load_example("small.yaml")
    job["metadata"]["name"] = "refill"
    job["spec"]["phases"] = [
        {
            "name": "train",
            "nodes": {"min": 4, "max": 4},
            "gpuTypes": ["H100"],
            "gpusPerNode": 8,
            "template": {"annotations": {"sim.phased.dev/succeed-after": "90s"}},
        }
    ]
    apply(kubectl, namespace, job)
    uid = get_job(kubectl, namespace, "refill")["metadata"]["uid"]
    try:
        st = wait_state(kubectl, namespace, "refill", {"Running"}, 120, operator)
        lib.wait_until(
            lambda: len(status(kubectl, namespace, "refill")["pool"].get("spares", [])) == 2,
            60,
            message="two spares",
        )
        st = status(kubectl, namespace, "refill")
        victim = sim_node(sorted(st["pool"]["active"])[0])
        spares_before = set(st["pool"]["spares"])
        lib.set_gpu_fault(core, victim, "GPUXidError", wait=None)

        def swapped() -> dict[str, Any] | None:
            s = status(kubectl, namespace, "refill")
            entries = [f for f in s.get("failures", []) if f["node"] == victim]
            done = entries and entries[0].get("resumed") and len(s["pool"]["spares"]) == 2
            return s if done else None

        st = lib.wait_until(swapped, 90, message="swap, resume and refill")
        entry = next(f for f in st["failures"] if f["node"] == victim)
        assert entry["reason"] == "GPUFault"
        assert entry["replacedBy"] in spares_before
        assert entry["replacedBy"] in st["pool"]["active"]
        assert victim in st["pool"]["quarantined"]
        assert len(st["pool"]["active"]) == 4
        held = nodes_of(core, uid)
        assert sorted(n for n, r in held.items() if r == "spare") == sorted(st["pool"]["spares"])
        workers = [p for p in live_workers(core, namespace, uid) if p.status.phase == "Running"]
        assert {p.spec.node_name for p in workers} == set(st["pool"]["active"])

        # The scrape agrees with the cluster: nodes by role as labelled, one failure counted.
        def scrape_agrees() -> bool:
            scrape = operator.scrape()
            by_role = {
                role: sum(
                    metric_values(
                        scrape,
                        "phased_job_nodes",
                        namespace=namespace,
                        trainingjob="refill",
                        role=role,
                    )
                )
                for role in ("active", "spare", "quarantined")
            }
            labelled = collections.Counter(nodes_of(core, uid).values())
            failures = sum(
                metric_values(
                    scrape, "phased_job_failures_total", namespace=namespace, trainingjob="refill"
                )
            )
            return by_role == {r: float(labelled.get(r, 0)) for r in by_role} and failures == 1

        lib.wait_until(scrape_agrees, 30, message="metrics matching the labelled nodes")
    finally:
        kubectl("delete", "trainingjob", "refill", "-n", namespace, "--wait=false")
        lib.wait_until(
            lambda: (
                not set(nodes_of(core, uid))
                - {n for n, r in nodes_of(core, uid).items() if r == "quarantined"}
            ),
            60,
            message="nodes released after delete",
        )
        release_quarantined(kubeconfig)
