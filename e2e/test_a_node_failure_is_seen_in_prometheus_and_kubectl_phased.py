"""A run with a node failure, watched as its owners watch it: a real Prometheus scrapes the
operator and evaluates the chart's alert rules; the dashboard's queries run against it; and
`kubectl phased` tells the same story from the cluster.

The scenario (about a minute): a one-phase job of 3 H200 nodes and 1 spare takes all four H200
nodes of the local cluster, with a 1-second interruption budget. One active node goes
NotReady: it is quarantined, the spare is swapped in, the gang restarts, and no spare can be
refilled. So the budget alerts and PhasedNoSpareLeft must fire, and no other: one node of
three is not a mass failure, the operator keeps reconciling without errors, nothing waits for
capacity. Rules run with `for` cut to 2 s (promtool tests the real durations in tests/alerts).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from e2e import lib
from e2e.harness import REPO, Operator
from e2e.operator_fixtures import (
    apply,
    get_job,
    live_workers,
    nodes_of,
    release_quarantined,
    status,
)
from e2e.prometheus import Prometheus, QueryError, require_prometheus, with_short_for
from tests.alerts.promtool import rule_groups

from phased.cli.kubectl import main as kubectl_main
from phased.metrics import RECOVERY_BUCKETS

JOB = "obs"
PRICE_H200 = 3.5  # e2e/settings.yaml
RATE_INTERVAL = "30s"  # what Grafana's $__rate_interval would be here: > 4 scrapes
SHOULD_FIRE = {
    "PhasedInterruptionBudgetBurningFast",
    "PhasedInterruptionBudgetNearlySpent",
    "PhasedNoSpareLeft",
}
MUST_STAY_SILENT = {
    "PhasedMassFailure",
    "PhasedCapacityShort",
    "PhasedOperatorNotReconciling",
    "PhasedReconcileErrors",
}
DASHBOARD = REPO / "helm" / "phased" / "dashboards" / "phased.json"


def the_job() -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": JOB},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "spares": {"count": 1},
            "failurePolicy": {"notReadyGrace": "3s", "interruptionBudget": "1s"},
            "checkpoint": {"interval": "10m", "path": "/ckpt/obs"},
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 3, "max": 3},
                    "gpuTypes": ["H200"],
                    "gpusPerNode": 8,
                    "template": {"annotations": {"sim.phased.dev/succeed-after": "30s"}},
                }
            ],
        },
    }


def kubectl_phased(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl phased ARGS`: the function behind the `kubectl-phased` script, run in this
    process (the Kubernetes client is imported once, not per call)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = kubectl_main([*args, "--kubeconfig", kubeconfig])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def kubectl_phased_process(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The same as its own process, `python -m phased.cli.kubectl`, from this checkout."""
    return subprocess.run(
        [sys.executable, "-m", "phased.cli.kubectl", *args, "--kubeconfig", kubeconfig],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "operator")},
        check=False,
    )


@dataclass
class Run:
    namespace: str
    victim: str
    status: dict[str, Any]
    prometheus: Prometheus
    operator: Operator
    firing: dict[str, set[str]] = field(default_factory=dict)  # alert -> trainingjob labels
    nodes_mid_run: dict[str, Any] = field(default_factory=dict)


def _free_h200(core: Any) -> list[str]:
    free = []
    for node in core.list_node(label_selector="nvidia.com/gpu.product=NVIDIA-H200").items:
        labels = node.metadata.labels or {}
        if "phased.dev/role" not in labels and not node.spec.unschedulable:
            free.append(node.metadata.name)
    return sorted(free)


@pytest.fixture(scope="module")
def run(
    operator: Operator, kubectl: lib.Kubectl, core: Any, kubeconfig: str, tmp_path_factory: Any
) -> Iterator[Run]:
    require_prometheus()
    free = _free_h200(core)
    assert len(free) == 4, f"the scenario needs the 4 H200 nodes free, found {free}"
    prometheus = Prometheus(
        tmp_path_factory.mktemp("prometheus"),
        [f"127.0.0.1:{operator.metrics_port}"],
        with_short_for(rule_groups()),
    ).start()
    namespace = lib.create_namespace(core, "obs")
    victim = uid = ""
    try:
        lib.wait_until(
            lambda: core.list_namespaced_service_account(namespace).items, 30, message="an SA"
        )
        apply(kubectl, namespace, the_job())
        uid = get_job(kubectl, namespace, JOB)["metadata"]["uid"]

        def ready() -> dict[str, Any] | None:
            st = status(kubectl, namespace, JOB)
            pool = st.get("pool") or {}
            running = [p for p in live_workers(core, namespace, uid) if p.status.phase == "Running"]
            full = len(pool.get("active", [])) == 3 and len(pool.get("spares", [])) == 1
            return st if full and len(running) == 3 else None

        st = lib.wait_until(ready, 90, message="the job running on 3 nodes with 1 spare")
        # Prometheus has the job's series, spare held and no failure, before the failure.
        lib.wait_until(
            lambda: prometheus.value(
                f'sum(phased_job_nodes{{trainingjob="{JOB}", role="spare"}})'
            ) == 1.0 and prometheus.value(
                f'sum(phased_job_failures_total{{trainingjob="{JOB}"}})'
            ) == 0.0,
            30,
            message="Prometheus scraping the running job",
        )  # fmt: skip
        # A node condition's time has whole seconds: a failure in the phase's first second
        # would read as before the phase began. Let that second pass first.
        started = lib.wait_until(
            lambda: (status(kubectl, namespace, JOB).get("phases") or [{}])[0].get("startTime"),
            30,
            message="the phase's start in the status",
        )
        began = datetime.fromisoformat(started.replace("Z", "+00:00"))
        time.sleep(max(0.0, began.timestamp() + 1.05 - time.time()))
        victim = sorted(st["pool"]["active"])[0]
        lib.make_node_not_ready(core, victim, wait=None)

        result = Run(namespace, victim, {}, prometheus, operator)
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            for alert in prometheus.alerts():
                if alert["state"] == "firing":
                    name = alert["labels"]["alertname"]
                    job = alert["labels"].get("trainingjob", "")
                    result.firing.setdefault(name, set()).add(job)
            st = status(kubectl, namespace, JOB)
            swapped = any(f["node"] == victim and f.get("resumed") for f in st.get("failures", []))
            if swapped and not result.nodes_mid_run and st.get("state") == "Running":
                out = kubectl_phased(kubeconfig, "nodes", "-o", "json")
                assert out.returncode == 0, out.stderr
                result.nodes_mid_run = {"rows": json.loads(out.stdout), "status": st}
            if st.get("state") in ("Succeeded", "Failed"):
                break
            time.sleep(1)
        assert st.get("state") == "Succeeded", f"{st}\n{operator.tail(40)}"
        result.status = st
        # the last figures reach Prometheus: what it holds now is the finished job's
        cost = st["accounting"]["cost"]
        lib.wait_until(
            lambda: (
                abs(
                    (prometheus.value(f'sum(phased_job_cost_total{{trainingjob="{JOB}"}})') or 0)
                    - cost
                )
                < 1e-6
            ),
            30,
            message="the final cost scraped",
        )
        yield result
    finally:
        prometheus.stop()
        kubectl.run("delete", "trainingjob", JOB, "-n", namespace, "--wait=false", check=False)
        if victim:
            lib.reset_node(core, victim)
        if uid:
            lib.wait_until(
                lambda: not [n for n, r in nodes_of(core, uid).items() if r != "quarantined"],
                60,
                message="nodes released",
            )
        release_quarantined(kubeconfig)
        lib.delete_namespace(core, namespace)


def close(a: float | None, b: float, tolerance: float = 1e-6) -> bool:
    return a is not None and abs(a - b) <= tolerance * max(1.0, abs(b))


def test_utilization_recovery_and_cost_in_prometheus_are_the_status_s(run: Run) -> None:
    p, st, ns = run.prometheus, run.status, run.namespace
    sel = f'namespace="{ns}", trainingjob="{JOB}"'
    util = st["utilization"]
    for metric, key in (("allocation", "allocation"), ("active", "active"), ("current", "current")):
        got = p.value(f"phased_job_{metric}_utilization_ratio{{{sel}}}")
        assert close(got, util[key] / 100), (metric, got, util)
    assert 0 < util["allocation"] <= 100

    # One failure, one recovery: the histograms hold exactly the ledger's stages.
    entry = next(f for f in st["failures"] if f["node"] == run.victim)
    t = {k: datetime.fromisoformat(entry[k].replace("Z", "+00:00"))
         for k in ("detected", "cordoned", "replaced", "resumed")}  # fmt: skip
    stages = {
        "detect_to_cordon": (t["cordoned"] - t["detected"]).total_seconds(),
        "cordon_to_replace": (t["replaced"] - t["cordoned"]).total_seconds(),
        "replace_to_resume": (t["resumed"] - t["replaced"]).total_seconds(),
        "recovery": (t["resumed"] - t["detected"]).total_seconds(),
    }
    for stage, seconds in stages.items():
        name = f"phased_job_failure_{stage}_seconds"
        assert p.value(f"{name}_count{{{sel}}}") == 1.0, stage
        assert close(p.value(f"{name}_sum{{{sel}}}"), seconds, 1e-3), (stage, seconds)
        buckets = {
            float(s["metric"]["le"]): float(s["value"][1])
            for s in p.query(f"{name}_bucket{{{sel}}}")
        }
        assert buckets == {
            **{le: float(seconds <= le) for le in RECOVERY_BUCKETS},
            float("inf"): 1.0,
        }, (stage, seconds, buckets)
    assert stages["recovery"] > 0
    assert p.value(f"sum(phased_job_failures_total{{{sel}}})") == 1.0
    assert p.value(f'phased_job_failures_total{{{sel}, reason="NodeNotReady"}}') == 1.0
    assert p.value(f"sum(phased_job_restarts_total{{{sel}}})") == float(st["restarts"]) >= 1

    # Cost: the status's figure, and GPU-hours times the H200 price of the settings.
    cost = st["accounting"]["cost"]
    assert cost > 0
    assert close(p.value(f"sum(phased_job_cost_total{{{sel}}})"), cost)
    gpu_hours = p.value(f"sum(phased_job_gpu_seconds_total{{{sel}}}) / 3600")
    assert close(gpu_hours, st["accounting"]["gpuHours"], 1e-3)
    assert gpu_hours is not None and abs(gpu_hours * PRICE_H200 - cost) <= 0.01 + 1e-3 * cost
    spare = p.value(f'sum(phased_job_gpu_seconds_total{{{sel}, role="spare"}})')
    assert spare is not None and spare > 0  # the spare was paid for until it was swapped in
    assert close(
        p.value(f"phased_job_interruption_seconds_total{{{sel}}}"),
        st["interruption"]["usedSeconds"],
    )


def test_the_alerts_of_the_scenario_fire_and_no_other(run: Run) -> None:
    used = run.status["interruption"]["usedSeconds"]
    assert used > 0.8, f"the interruption ({used}s) must exceed 80% of the 1s budget"
    fired = set(run.firing)
    assert fired >= SHOULD_FIRE, f"fired: {run.firing}\n{run.operator.tail(20)}"
    assert not fired & MUST_STAY_SILENT, f"fired: {run.firing}"
    for name in SHOULD_FIRE:
        assert run.firing[name] == {JOB}, run.firing
    # every alert of the chart is loaded and evaluated without error
    groups = run.prometheus.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert {r["name"] for r in rules} == SHOULD_FIRE | MUST_STAY_SILENT
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]


def _dashboard_queries(namespace: str) -> list[tuple[str, str]]:
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for item in items:
            yield item
            yield from panels(item.get("panels", []))

    board = json.loads(DASHBOARD.read_text())
    found = []
    for panel in panels(board["panels"]):
        for target in panel.get("targets", []):
            expr = (
                target["expr"]
                .replace("$namespace", namespace)
                .replace("$trainingjob", JOB)
                .replace("$__rate_interval", RATE_INTERVAL)
            )
            found.append((panel["title"], expr))
    return found


def test_every_dashboard_query_runs_and_returns_data(run: Run) -> None:
    p = run.prometheus
    queries = _dashboard_queries(run.namespace)
    assert len(queries) >= 20
    # API errors are counted per verb and resource as they happen: no series until one fails.
    api_errors = p.query("phased_api_errors_total")
    empty = []
    for title, expr in queries:
        try:
            result = p.query(expr)
        except QueryError as exc:
            pytest.fail(f"panel {title!r}: {expr}\n{exc}")
        if not result and not ("phased_api_errors_total" in expr and not api_errors):
            empty.append(f"{title}: {expr}")
    assert not empty, "queries without data:\n" + "\n".join(empty)
    # the dashboard's variables (Grafana's label_values) find the job
    namespaces = p.api("label/namespace/values", **{"match[]": "phased_job_state"})
    assert run.namespace in namespaces
    match = f'phased_job_state{{namespace="{run.namespace}"}}'
    jobs = p.api("label/trainingjob/values", **{"match[]": match})
    assert jobs == [JOB]


def test_kubectl_phased_status_reports_the_run(run: Run, kubeconfig: str) -> None:
    st = run.status
    out = kubectl_phased(kubeconfig, "status", JOB, "-n", run.namespace, "-o", "json")
    assert out.returncode == 0, out.stderr
    view = json.loads(out.stdout)
    assert (view["state"], view["phase"], view["failures"], view["openFailures"]) == (
        "Succeeded",
        "train",
        1,
        0,
    )
    [phase] = view["phases"]
    record = st["phases"][0]
    assert (phase["gpuType"], phase["minNodes"], phase["maxNodes"]) == ("H200", 3, 3)
    assert phase["gpuHours"] == record["gpuHours"] and phase["cost"] == record["cost"]
    assert phase["restarts"] == record["restarts"] >= 1
    assert view["cost"] == st["accounting"]["cost"] and view["currency"] == "USD"
    assert view["pool"]["quarantined"] == [run.victim]
    assert view["checkpoint"] == {"interval": "10m", "path": "/ckpt/obs"}

    text = kubectl_phased_process(kubeconfig, "status", JOB, "-n", run.namespace)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"TrainingJob {run.namespace}/{JOB}: Succeeded, phase train")
    assert f"cost so far {st['accounting']['cost']:,.2f} USD" in text.stdout
    assert f"quarantined     1  {run.victim}" in text.stdout

    missing = kubectl_phased(kubeconfig, "status", "no-such-job", "-n", run.namespace)
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_kubectl_phased_timeline_tells_the_failure_in_order(run: Run, kubeconfig: str) -> None:
    out = kubectl_phased(kubeconfig, "timeline", JOB, "-n", run.namespace, "-o", "json")
    assert out.returncode == 0, out.stderr
    entries = json.loads(out.stdout)
    kinds = [e["kind"] for e in entries]
    assert kinds[:2] == ["JobStarted", "PhaseStarted"] and kinds[-1] == "JobSucceeded"
    stages = [e["kind"] for e in entries if e.get("node") == run.victim]
    assert stages == ["NodeFailed", "NodeCordoned", "SpareSwappedIn", "TrainingResumed"]
    # the restart and the refill attempt come from the operator's Events
    restarts = [e for e in entries if e["kind"] == "WorkersRestarted"]
    assert restarts and all(e["source"] == "event" for e in restarts), kinds
    failed = kinds.index("NodeFailed")
    assert kinds.index("WorkersRestarted", failed) < kinds.index("TrainingResumed")
    times = [datetime.fromisoformat(e["time"].replace("Z", "+00:00")) for e in entries]
    assert times == sorted(times)

    text = kubectl_phased(kubeconfig, "timeline", JOB, "-n", run.namespace)
    assert text.returncode == 0, text.stderr
    assert "! NodeFailed" in text.stdout and f"node {run.victim} cordoned" in text.stdout


def test_kubectl_phased_nodes_names_holders_and_the_quarantine(run: Run, kubeconfig: str) -> None:
    # while the job ran: its three active nodes (the spare swapped in) and the quarantined one
    mid = [r for r in run.nodes_mid_run["rows"] if r["job"]["name"] == JOB]
    pool = run.nodes_mid_run["status"]["pool"]
    assert sorted(r["name"] for r in mid if r["role"] == "active") == sorted(pool["active"])
    assert [r["name"] for r in mid if r["role"] == "quarantined"] == [run.victim]

    # now: only the quarantined node is left, with why
    out = kubectl_phased(kubeconfig, "nodes", "-o", "json")
    assert out.returncode == 0, out.stderr
    rows = [r for r in json.loads(out.stdout) if r["job"]["namespace"] == run.namespace]
    assert [(r["name"], r["role"]) for r in rows] == [(run.victim, "quarantined")]
    note = rows[0]["quarantine"]
    assert note["reason"] == "NodeNotReady" and rows[0]["cordoned"] is True
    entry = next(f for f in run.status["failures"] if f["node"] == run.victim)
    assert note["detected"] == entry["detected"]

    text = kubectl_phased(kubeconfig, "nodes")
    assert text.returncode == 0, text.stderr
    assert f"{run.victim} ({run.namespace}/{JOB}): NodeNotReady" in text.stdout
    # the hint names the installation that marked the node (release-node leaves others' alone)
    installation = rows[0]["installation"]
    assert installation
    hints = [line.split() for line in text.stdout.splitlines() if "release-node" in line]
    command = ["phased", "release-node", "--installation", installation]
    assert any(h[3:7] == command and run.victim in h[7:] for h in hints), hints
