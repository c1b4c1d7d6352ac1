"""A long run: the operator for hours at 2,000 simulated nodes, a node failing every few
minutes. Does anything grow that should not (memory, tasks, planned looks)?

    python bench/soak.py [--minutes 120] [--nodes 2000] [--jobs 20] [--failure-every 180]
                         [--sample-every 30] [--node-lease-seconds 40] [--keep-cluster]
                         [--no-write]

Starts its OWN cluster instance (``phased-bench-soak``: own folder, ports 32830-32835; see
``bench/common.py``) with ``--nodes`` simulated H100 nodes and no real nodes, and stops it at
the end. One operator process runs ``--jobs`` TrainingJobs (8 workers, 2 spares,
``notReadyGrace: 0s``). Every ``--failure-every`` seconds a node of the next job (round
robin) reports NotReady; the bench waits for the job's replacement worker (the reaction),
then makes the node Ready again and gives it back (``phased release-node``, as a person
would), so the supply stays the same all run long.

Every ``--sample-every`` seconds it records the operator's resident memory (VmRSS), CPU, and
from its own metrics ``phased_operator_tasks`` (asyncio tasks alive),
``phased_operator_timers`` (planned looks) and ``phased_jobs``. Reported: the least-squares
slope of RSS per hour after the first tenth of the run (start-up and first growth), the
task and timer counts (median of the first and of the last quarter of the samples, and the
largest), and the reactions (median, p99 as what it is).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

import yaml
from e2e import lib
from e2e.harness import CRD, Operator, metric_values

from common import (
    KUBELET_LEASE_SECONDS,
    BenchCluster,
    crd_established,
    is_max_rank,
    lease_note,
    load_average,
    median,
    percentile,
    table,
    write_section,
)
from scale import WORKERS, proc_sample, training_job

PORT_BASE = 32830


@dataclass
class Sample:
    minute: float
    rss_mib: float
    cpu_s: float
    tasks: float
    timers: float
    jobs: float


@dataclass
class Soak:
    samples: list[Sample] = field(default_factory=list)
    reactions: list[float] = field(default_factory=list)
    missed: int = 0
    release_refused: int = 0


def gauge(text: str, name: str) -> float:
    values = metric_values(text, name)
    return values[0] if values else float("nan")


def sample(op: Operator, pid: int, began: float) -> Sample:
    rss, cpu = proc_sample(pid)
    text = op.scrape()
    return Sample(
        minute=(time.monotonic() - began) / 60,
        rss_mib=rss,
        cpu_s=cpu,
        tasks=gauge(text, "phased_operator_tasks"),
        timers=gauge(text, "phased_operator_timers"),
        jobs=gauge(text, "phased_jobs"),
    )


def fail_one(core: Any, kubeconfig: str, ns: str, job: str, result: Soak) -> None:
    """One failure on ``job``: NotReady, wait for the replacement, then give the node back."""
    pods = [
        p
        for p in core.list_namespaced_pod(ns, label_selector=f"phased.dev/job={job}").items
        if p.status.phase == "Running" and not p.metadata.deletion_timestamp
    ]
    if len(pods) < WORKERS:
        return  # still restarting from an earlier failure: skip this turn
    victim = sorted(pods, key=lambda p: p.metadata.name)[0]
    node = victim.spec.node_name
    before = {p.metadata.uid for p in pods}
    lib.make_node_not_ready(core, node, wait=None)
    lib.wait_until(lambda: lib.node_ready(core, node) == "False", 30, interval=0.05)
    visible = time.monotonic()

    def replaced() -> bool:
        items = core.list_namespaced_pod(ns, label_selector=f"phased.dev/job={job}").items
        return any(p.metadata.uid not in before for p in items)

    try:
        lib.wait_until(replaced, 60, interval=0.1)
        result.reactions.append(time.monotonic() - visible)
    except lib.WaitTimeout:
        result.missed += 1
        print(f"missed: {job} on {node}", flush=True)
    lib.make_node_ready(core, node, wait=None)
    time.sleep(5)  # let the job settle before the node goes back to the free supply
    refused = give_back(core, kubeconfig, node)
    if refused:
        result.release_refused += 1
        labels = core.read_node(node).metadata.labels or {}
        marks = {k: v for k, v in labels.items() if k.startswith("phased.dev/")}
        print(f"release of {node} refused: {refused}; its marks: {marks}", flush=True)


def give_back(core: Any, kubeconfig: str, node: str) -> str:
    """Ready again and released as a person would (``phased release-node``); what the command
    said if it refused ("" once released). A refusal is counted, not fatal: one odd node
    must not end a two-hour run."""
    lib.reset_node(core, node)
    done = subprocess.run(
        [sys.executable, "-m", "phased", "release-node", "--kubeconfig", kubeconfig, node],
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if done.returncode == 0 else (done.stdout + done.stderr).strip()


def run(cluster: BenchCluster, args: argparse.Namespace) -> Soak:
    kubeconfig = cluster.kubeconfig
    core = lib.core_v1(kubeconfig)
    kubectl = lib.Kubectl(kubeconfig)
    kubectl("apply", "-f", str(CRD))
    lib.wait_until(lambda: crd_established(kubectl), 60, message="the CRD Established")
    log = Path(tempfile.gettempdir()) / "phased-bench-soak.log"
    op = Operator(kubeconfig, log)
    op.start(wait_ready=False)
    op.wait_ready(timeout=300)
    assert op.proc is not None
    pid = op.proc.pid
    ns = lib.create_namespace(core, "bench-soak")
    result = Soak()
    jobs = [f"job-{j}" for j in range(args.jobs)]
    try:
        for name in jobs:
            kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(training_job(name)))

        def running() -> int:
            items = yaml.safe_load(kubectl("get", "trainingjobs", "-n", ns, "-o", "yaml"))
            return sum(
                1
                for i in (items or {}).get("items") or []
                if (i.get("status") or {}).get("state") == "Running"
            )

        lib.wait_until(lambda: running() == len(jobs), 600, interval=2, message="jobs Running")
        began = time.monotonic()
        end = began + 60 * args.minutes
        next_sample = next_failure = began
        turn = 0
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_sample:
                result.samples.append(sample(op, pid, began))
                s = result.samples[-1]
                print(
                    f"[{s.minute:6.1f} min] rss {s.rss_mib:.0f} MiB, tasks {s.tasks:.0f}, "
                    f"timers {s.timers:.0f}, failures {len(result.reactions)}"
                    f" (+{result.missed} missed)",
                    flush=True,
                )
                next_sample += args.sample_every
            if now >= next_failure and now > began + 30:
                fail_one(core, kubeconfig, ns, jobs[turn % len(jobs)], result)
                turn += 1
                next_failure = now + args.failure_every
            time.sleep(1)
        result.samples.append(sample(op, pid, began))
    finally:
        kubectl.run("delete", "trainingjobs", "--all", "-n", ns, "--wait=false", check=False)
        time.sleep(5)
        op.stop()
        lib.delete_namespace(core, ns)
    return result


def report(result: Soak, args: argparse.Namespace) -> str:
    samples = result.samples
    settled = [s for s in samples if s.minute >= args.minutes / 10] or samples
    hours = [s.minute / 60 for s in settled]
    slope = (
        statistics.linear_regression(hours, [s.rss_mib for s in settled]).slope
        if len(set(hours)) > 1
        else float("nan")
    )
    span_s = 60 * (samples[-1].minute - samples[0].minute) if samples else 0.0
    cpu_pct = 100 * (samples[-1].cpu_s - samples[0].cpu_s) / span_s if span_s > 0 else float("nan")
    step = max(1, len(samples) // 12)
    shown = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    rows = [
        [f"{s.minute:.1f}", f"{s.rss_mib:.1f}", *(f"{v:.0f}" for v in (s.tasks, s.timers, s.jobs))]
        for s in shown
    ]
    n = len(result.reactions)
    p99 = percentile(result.reactions, 99)
    p99_label = "max" if is_max_rank(n, 99) else "p99"
    summary = table(
        ["figure", "value"],
        [
            ["run", f"{samples[-1].minute:.0f} min" if samples else "-"],
            ["RSS first / last quarter, max MiB", _three([s.rss_mib for s in samples], "{:.0f}")],
            ["RSS slope after the first tenth", f"{slope:+.2f} MiB/h"],
            ["tasks first / last quarter, max", _three([s.tasks for s in samples], "{:.0f}")],
            ["looks first / last quarter, max", _three([s.timers for s in samples], "{:.0f}")],
            ["CPU % of one core (mean)", f"{cpu_pct:.1f}"],
            ["failures answered / missed (> 60 s)", f"{n} / {result.missed}"],
            ["failed nodes whose release was refused", f"{result.release_refused}"],
            ["reaction median ms", f"{1000 * median(result.reactions):.0f}"],
            [f"reaction {p99_label} ms", f"{1000 * p99:.0f}"],
        ],
    )
    return "\n\n".join(
        [
            f"{args.nodes:,} simulated nodes, {args.jobs} TrainingJobs (8 workers, 2 spares, "
            f"`notReadyGrace: 0s`), one node failure every {args.failure_every} s round robin "
            "over the jobs (NotReady, then Ready again and given back once the replacement "
            "exists). Reaction = the Node Ready=False seen in the API -> the replacement worker "
            "pod exists. Samples every "
            f"{args.sample_every} s; the slope is a least-squares fit of RSS over time after the "
            "first tenth of the run.",
            summary,
            "Samples (minute, RSS MiB, tasks, planned looks, jobs tracked):",
            table(["minute", "RSS MiB", "tasks", "planned looks", "jobs"], rows),
            f"{lease_note(args.node_lease_seconds)} Load average at the end: {load_average()}.",
        ]
    )


def _three(values: list[float], fmt: str) -> str:
    """Median of the first quarter of the samples, of the last quarter, and the largest: a
    single sample would catch a pass in flight (tasks swing with the resync's own work)."""
    if not values:
        return "-"
    quarter = max(1, len(values) // 4)
    first, last = median(values[:quarter]), median(values[-quarter:])
    return " / ".join(fmt.format(v) for v in (first, last, max(values)))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=120)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--failure-every", type=float, default=180)
    parser.add_argument("--sample-every", type=float, default=30)
    parser.add_argument("--node-lease-seconds", type=int, default=KUBELET_LEASE_SECONDS)
    parser.add_argument("--port-base", type=int, default=PORT_BASE)
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch RESULTS.md")
    args = parser.parse_args()
    if args.jobs * (WORKERS + 2) > args.nodes:
        parser.error(f"{args.jobs} jobs need {args.jobs * (WORKERS + 2)} nodes")
    cluster = BenchCluster("soak", port_base=args.port_base)
    cluster.up(h100=args.nodes, lease_seconds=args.node_lease_seconds)
    try:
        result = run(cluster, args)
    finally:
        if not args.keep_cluster:
            cluster.down()
    body = report(result, args)
    print(body)
    if not args.no_write:
        write_section("soak", "Soak: hours at 2,000 nodes with failures", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
