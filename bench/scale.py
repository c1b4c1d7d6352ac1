"""The operator at scale: 500, 1,000 and 2,000 simulated GPU nodes, 12 concurrent TrainingJobs.

    python bench/scale.py [--sizes 500,1000,2000] [--jobs 12] [--failures 30] [--idle 60]
                          [--no-profile]
                          [--baseline REF] [--settings e2e|chart]
                          [--baseline-settings e2e|chart] [--nice N] [--baseline-nice N]
                          [--rounds N] [--change TEXT]
                          [--node-lease-seconds 40] [--node-relist-interval DURATION]
                          [--cluster NAME --port-base PORT]
                          [--keep-cluster] [--reuse-cluster] [--no-write] [--trace]

Starts its OWN cluster instance (``phased-bench-scale``, ports 32810-32815, its own folder
under ``~/.cache/phased/``), never the default one, grows it from size to size (nodes are
only added), and stops it at the end (``--keep-cluster`` leaves it running, and
``--reuse-cluster`` starts from it instead of afresh: nodes an earlier run quarantined stay
quarantined, and are left alone). For each size a fresh operator process
(``e2e/harness.Operator``) runs ``--jobs`` TrainingJobs (one long-running phase of 8 workers,
2 spares, ``notReadyGrace: 0s`` so that what is measured is the operator, not a grace), then
``--failures`` nodes are made NotReady one after another, spread over the jobs. Reported:

- reaction: the failure visible in the API (the bench sees Ready=False on the Node) -> the
  replacement worker pod exists (median, p99); and the operator's first answer to it: the
  failure visible -> the Node cordoned (``spec.unschedulable``). Each moment is when a
  watch of the bench's own first shows it (``bench/moments.py``: one on the node, one on
  the job's pods, begun before the failure); the bench also polls (every 0.05 s for the
  node, 0.1 s for the pods) to know when to go on, and the polls' times stand in for a
  failure the watches missed (said, and counted under the table);
- reconcile throughput: passes/s from ``phased_reconcile_duration_seconds_count`` while idle
  and during the failures, and the mean pass duration;
- resident memory (VmRSS) and CPU (utime+stime from /proc/<pid>/stat) of the operator;
- the time from start to ready (the node view synced);
- the operator's API requests per idle minute and per failure, by verb and resource, and
  its watch traffic (events and bytes per idle minute by resource, watches open), from the
  API server's own counters: a control window of ``--idle`` seconds without the operator
  and the bench's own calls (counted in the bench) are taken out (``bench/apiload.py``);
- the API server's own time (``apiserver_request_duration_seconds``, median and p99) for
  each kind of request a swap waits for, in the failure windows: every client's requests of
  the kind, so it says how fast the API server answered then, not the operator;
- under the table, the least-squares slopes of RSS and mean pass time per 1,000 nodes.

A size too small for the jobs (each holds 10 nodes, each failure quarantines one) runs on
``jobs * 10 + failures`` nodes instead, and says so.

With ``--baseline REF`` each size is run twice on the same cluster, one operator after the
other: first the operator of commit REF (checked out into a temporary ``git worktree``,
removed at the end), then this checkout's; the table has one row per operator and size, and
the figures go to their own section of RESULTS.md ("before and after"). The baseline never
runs under the profiler. ``--rounds N`` runs both N times at each size, in alternating
order (before, after, after, before, ...), so that load from others on a shared machine
falls on both alike; the comparison pools the rounds.

``--settings`` names the settings the operator runs with: ``e2e`` (the default,
``e2e/settings.yaml``, as the end-to-end tests run it) or ``chart`` (the chart's
``settings`` as shipped in ``helm/phased/values.yaml``, which a ``helm install`` without
overrides gives; the report endpoint, which the chart's Service and Secret complete, stays
off). ``--baseline-settings`` runs the baseline with other settings than this checkout's:
without ``--baseline``, the baseline is this checkout itself, so that the two rows differ
in the settings alone. ``--nice N`` runs this checkout's operator under ``nice -n N``, and
``--baseline-nice N`` the baseline (this checkout again without ``--baseline``): on a
machine where the operator shares the CPUs with the control plane it serves, a lower
niceness gives it a larger share, as a larger CPU request gives a pod on a busy node.
``--node-relist-interval`` runs every operator with that ``nodeRelistInterval`` instead of
its settings' (the full relist of the Nodes, at 5,000 nodes ten pages of megabytes each):
shorter, more of the failures are answered while a relist is in flight.

With ``--trace`` this checkout's operator runs with ``phased run --trace``, and its log is
read against the failures (``bench/swaptrace.py``): when the operator took each node's change,
when the pass answering it began and ended, when the first new worker was asked for and
created, and what that pass spent its time on (its stages, its requests by kind). The trace
costs the operator a log line per request; the baseline runs with it too when its commit
has it, and without it (no trace shown) when not.

With profiling on (the default; ``PHASED_BENCH_PROFILE=0`` or ``--no-profile`` turns it
off) the operator at the largest size runs under ``python -m cProfile`` and the top
functions by cumulative and own time are printed and recorded. The hook lives here only:
the operator's code is not changed.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import os
import pstats
import re
import shutil
import string
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from e2e import lib
from e2e.cluster.nodes import ensure_nodes
from e2e.harness import CRD, TEST_SETTINGS, Operator, metric_values

import moments
from apiload import (
    DURATION,
    DURATION_LABELS,
    LONGRUNNING,
    REQUEST_LABELS,
    REQUESTS,
    WATCH_BYTES,
    WATCH_EVENTS,
    WATCH_LABELS,
    Counts,
    Key,
    buckets,
    delta,
    describe,
    histogram_quantile,
    mean_counts,
    merged,
    minus,
    read,
    request_key,
    scaled,
    slope,
    split_heartbeats,
    top,
    total,
)
from common import (
    KUBELET_LEASE_SECONDS,
    RESULTS,
    BenchCluster,
    is_max_rank,
    lease_note,
    median,
    percentile,
    table,
    write_section,
)
from phased.api.durations import parse_duration
from phased.core.settings import load_settings
from swaptrace import Failure, collections, parse, relists, timeline
from swaptrace import report as trace_report

WORKERS = 8
SPARES = 2
WATCH_SECONDS = 70  # a failure's watches end by then (its replacement is waited for 60 s)


# A failure's moments are read off watches of plain dicts (bench/moments.py).
def _not_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "False" for c in conditions)


def _cordoned(node: dict[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _not_among(known: set[str]) -> moments.Test:
    def new(pod: dict[str, Any]) -> bool:
        return (pod.get("metadata") or {}).get("uid") not in known

    return new


RECONCILE = "phased_reconcile_duration_seconds"
TICKS = os.sysconf("SC_CLK_TCK")


class BenchOperator(Operator):
    """The operator as the bench runs it (bench-only hooks): under ``nice -n NICE`` when
    ``nice`` is not 0 (its CPU weight against the control plane on the same CPUs), and as
    ``python -m cProfile -o FILE -m phased run ...`` with a ``profile_path``."""

    def __init__(
        self, *args: Any, profile_path: Path | None = None, nice: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.profile_path = profile_path
        self.nice = nice

    def interpreter(self) -> list[str]:
        command = [sys.executable]
        if self.profile_path is not None:
            command += ["-m", "cProfile", "-o", str(self.profile_path)]
        return (["nice", "-n", str(self.nice)] if self.nice else []) + command


def training_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "registry.k8s.io/pause:3.10"},
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": WORKERS, "max": WORKERS},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "expectedDuration": "70d",
                }
            ],
            "spares": {"count": SPARES},
            # Failures here come one after another, two or three per 10-node pool within a
            # couple of minutes: that would (rightly) trip the mass-failure breaker, which
            # then holds them for a person. This bench measures reaction, not the breaker.
            "failurePolicy": {
                "notReadyGrace": "0s",
                "restartBudget": 1000,
                "massFailure": {"maxFailedPercent": 100},
            },
        },
    }


def proc_sample(pid: int) -> tuple[float, float]:
    """(VmRSS in MiB, CPU seconds used so far) of ``pid``."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    return rss, cpu


class CallCounter:
    """Counts every call the bench makes through one ``ApiClient``, keyed as the API server
    keys it (``apiload.request_key``), so that the bench's share of a window can be taken
    out of the API server's counters; its watches' threads call too, hence the lock."""

    def __init__(self, api_client: Any) -> None:
        self.calls: Counts = {}
        self._lock = threading.Lock()
        inner = api_client.call_api

        def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            key = request_key(method, url)
            with self._lock:
                self.calls[key] = self.calls.get(key, 0.0) + 1
            return inner(method, url, *args, **kwargs)

        api_client.call_api = counted

    def snapshot(self) -> Counts:
        with self._lock:
            return dict(self.calls)


@dataclass
class ApiSample:
    """The API server's /metrics at one moment, and the bench's own calls until then."""

    at: float
    text: str
    bench: Counts

    @functools.cached_property
    def parsed(self) -> dict[str, Counts]:
        """The counters, parsed once when first asked, after the window: parsing megabytes
        takes a while, and a window's end sample is read for its requests and its times."""
        return read(
            self.text,
            {
                REQUESTS: REQUEST_LABELS,
                WATCH_EVENTS: WATCH_LABELS,
                WATCH_BYTES: WATCH_LABELS,
                LONGRUNNING: ("verb", "resource"),
                DURATION: DURATION_LABELS,
            },
        )

    def watches_open(self) -> Counts:
        """Long-running WATCH requests open at that moment, by resource."""
        open_now = self.parsed[LONGRUNNING]
        return {(r,): n for (v, r), n in open_now.items() if v == "WATCH"}


def api_sample(core: Any, counter: CallCounter) -> ApiSample:
    """Scrape the API server's /metrics (the bench's kubeconfig is the cluster admin's)."""
    client = core.api_client
    method, url, headers, _body, _post = client.param_serialize(
        "GET", "/metrics", auth_settings=["BearerToken"]
    )
    start = time.monotonic()
    response = client.call_api(method, url, header_params=headers, _request_timeout=60)
    text = response.read().decode()
    at = (start + time.monotonic()) / 2
    return ApiSample(at=at, text=text, bench=counter.snapshot())


@dataclass
class Window:
    """What the API server served between two samples, the bench's own calls taken out."""

    seconds: float
    requests: Counts
    watch_events: Counts
    watch_bytes: Counts

    @classmethod
    def between(cls, a: ApiSample, b: ApiSample) -> Window:
        before, after = a.parsed, b.parsed
        return cls(
            seconds=b.at - a.at,
            requests=minus(delta(after[REQUESTS], before[REQUESTS]), delta(b.bench, a.bench)),
            watch_events=delta(after[WATCH_EVENTS], before[WATCH_EVENTS]),
            watch_bytes=delta(after[WATCH_BYTES], before[WATCH_BYTES]),
        )

    def beyond(self, control: Window) -> Window:
        """This window less the control's rate over this window's length: the operator's."""
        f = self.seconds / control.seconds
        return Window(
            seconds=self.seconds,
            requests=minus(self.requests, control.requests, f),
            watch_events=minus(self.watch_events, control.watch_events, f),
            watch_bytes=minus(self.watch_bytes, control.watch_bytes, f),
        )


# Writes that new nodes set off in the controllers (the node lifecycle controller's GET and
# PATCH of every node, at the controller-manager's own client rate) and the Events of their
# registration. A quiet cluster makes none: the control window waits until they are over.
SETTLING: frozenset[tuple[str, ...]] = frozenset(
    {("GET", "nodes", ""), ("PATCH", "nodes", ""), ("PUT", "nodes", ""), ("POST", "events", "")}
)


def settle_cluster(core: Any, counter: CallCounter, limit: float = 900.0) -> float:
    """Wait until a 15 s window has none of the writes new nodes set off (``SETTLING``, the
    bench's own calls taken out); the seconds waited. Without this the control window
    measured the tail of the node start-up (~1,000 requests/min at 600 new nodes for over a
    minute) and the operator's share came out below zero."""
    t0 = time.monotonic()
    a = api_sample(core, counter)
    while True:
        time.sleep(15)
        b = api_sample(core, counter)
        window = Window.between(a, b)
        left = sum(v for k, v in window.requests.items() if k in SETTLING)
        if left < 1:
            return time.monotonic() - t0
        if time.monotonic() - t0 > limit:
            raise TimeoutError(f"the cluster did not settle in {limit:.0f} s ({left:.0f} left)")
        a = b


def settle_api(core: Any, counter: CallCounter, seconds: float) -> Window:
    """A window of ``seconds`` with nothing done by the bench."""
    a = api_sample(core, counter)
    time.sleep(seconds)
    return Window.between(a, api_sample(core, counter))


@dataclass
class SizeResult:
    nodes: int  # the nodes the cluster had (``asked`` plus any headroom)
    operator: str = "this checkout"
    asked: int = 0
    settled_s: float = 0.0  # waited for the node start-up to end before the control
    ready_s: float = 0.0
    reactions: list[float] = field(default_factory=list)
    answers: list[float] = field(default_factory=list)  # failure visible -> node cordoned
    idle_passes_s: float = 0.0
    busy_passes_s: float = 0.0
    mean_pass_ms: float = 0.0
    rss_mib: float = 0.0
    rss_peak_mib: float = 0.0
    idle_cpu_pct: float = 0.0
    busy_cpu_pct: float = 0.0
    missed: int = 0
    polled: int = 0  # failures the watches missed, timed by the polls instead
    load: float = 0.0  # 1-minute load average at the end of the failures
    # The API server's view (apiload): per idle minute, the operator's share (the window
    # with the operator less a control window without it, the bench's calls taken out).
    idle_s: float = 0.0
    control_per_min: float = 0.0  # every other client's requests, per minute
    idle_all_per_min: float = 0.0  # every client but the bench, with the operator
    idle_api: Counts = field(default_factory=dict)  # the operator's, per minute
    idle_noise: float = 0.0  # heartbeat requests left after the control, per minute
    idle_watch: Counts = field(default_factory=dict)  # watch events, by resource, per minute
    idle_watch_kib: float = 0.0  # watch event bytes per minute, in KiB
    watches_open: Counts = field(default_factory=dict)  # the operator's open watches
    fail_api: Counts = field(default_factory=dict)  # per failure
    # The API server's own time for the requests of the failure window, every client's:
    # request key -> cumulative buckets (apiload.buckets).
    fail_latency: dict[Key, dict[float, float]] = field(default_factory=dict)
    made: list[Failure] = field(default_factory=list)  # with --trace: each failure's times
    trace: str = ""  # with --trace: where a swap's time went (bench/swaptrace.py)

    @property
    def failures(self) -> int:
        return len(self.reactions) + self.missed


def reconcile_count(op: Operator) -> tuple[float, float]:
    text = op.scrape()
    return sum(metric_values(text, f"{RECONCILE}_count")), sum(
        metric_values(text, f"{RECONCILE}_sum")
    )


def nodes_for(size: int, jobs: int, failures: int) -> int:
    """The nodes a size runs on: ``size``, or more where the jobs would otherwise hold every
    node. Each job holds WORKERS + SPARES nodes, and each failure quarantines its node for the
    rest of the job, so a spare is refilled only from a free node: ``jobs * 10 + failures``
    nodes let every failure be refilled, as at the larger sizes."""
    return max(size, jobs * (WORKERS + SPARES) + failures)


def run_size(
    cluster: BenchCluster,
    core: Any,
    counter: CallCounter,
    kubectl: lib.Kubectl,
    size: int,
    jobs: int,
    failures: int,
    profile: Path | None,
    variant: Variant | None = None,
    idle: float = 60.0,
    trace: bool = False,
) -> SizeResult:
    variant = variant or Variant("this checkout", {}, "e2e")
    label, env = variant.label, variant.env
    nodes = nodes_for(size, jobs, failures)
    result = SizeResult(nodes=nodes, operator=label, asked=size)
    created, _ = ensure_nodes(core, {"h100": nodes})
    print(f"[{size}] nodes: {len(created)} created, {nodes} in all", flush=True)
    lib.wait_until(
        lambda: (
            sum(
                1
                for n in core.list_node(label_selector="type=kwok").items
                if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            )
            >= nodes
        ),
        max(300.0, 90 + 0.1 * nodes),  # as e2e/cluster/up.sh waits for its own nodes
        interval=2,
        message=f"{nodes} nodes Ready",
    )
    # The control: the same cluster and nodes, no operator, nothing done by the bench. What
    # the API server serves now (node heartbeats and leases, the controllers) it serves
    # with the operator too; taken out of the windows below at this rate.
    result.settled_s = settle_cluster(core, counter)
    print(f"[{size}] the cluster settled in {result.settled_s:.0f} s", flush=True)
    control = settle_api(core, counter, idle)
    result.control_per_min = 60 * total(control.requests) / control.seconds
    control_watches = api_sample(core, counter).watches_open()
    print(
        f"[{size}] control without the operator: {result.control_per_min:.0f} requests/min",
        flush=True,
    )
    tag = "".join(c if c.isalnum() else "-" for c in label)
    log = Path(tempfile.gettempdir()) / f"phased-bench-scale-{size}-{tag}.log"
    log.unlink(missing_ok=True)
    extra = ["--trace"] if trace else []
    op = BenchOperator(
        cluster.kubeconfig,
        log,
        profile_path=profile,
        nice=variant.nice,
        settings=settings_file(variant.settings, variant.relist),
        env=env,
        extra_args=extra,
    )
    t0 = time.monotonic()
    op.start(wait_ready=False)
    op.wait_ready(timeout=300)
    result.ready_s = time.monotonic() - t0
    assert op.proc is not None
    pid = op.proc.pid
    ns = lib.create_namespace(core, f"bench-scale-{size}")
    print(f"[{size}] operator: {label} (log {log})", flush=True)
    try:
        for j in range(jobs):
            kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(training_job(f"job-{j}")))

        def running_jobs() -> int:
            out = kubectl("get", "trainingjobs", "-n", ns, "-o", "yaml")
            items = (yaml.safe_load(out) or {}).get("items") or []
            return sum(
                1
                for i in items
                if (i.get("status") or {}).get("state") == "Running"
                and len((i.get("status") or {}).get("pool", {}).get("spares") or []) == SPARES
            )

        lib.wait_until(lambda: running_jobs() == jobs, 300, interval=2, message="jobs Running")
        time.sleep(5)
        # Idle: only resyncs and node heartbeats.
        a0 = api_sample(core, counter)
        c0, s0 = reconcile_count(op)
        _, cpu0 = proc_sample(pid)
        time.sleep(idle)
        c1, _ = reconcile_count(op)
        rss, cpu1 = proc_sample(pid)
        a1 = api_sample(core, counter)
        result.idle_passes_s = (c1 - c0) / idle
        result.idle_cpu_pct = 100 * (cpu1 - cpu0) / idle
        result.rss_mib = rss
        window = Window.between(a0, a1)
        mine = window.beyond(control)
        per_min = 60 / window.seconds
        result.idle_s = window.seconds
        result.idle_all_per_min = total(window.requests) * per_min
        result.idle_api, result.idle_noise = split_heartbeats(scaled(mine.requests, per_min))
        result.idle_watch = scaled(mine.watch_events, per_min)
        result.idle_watch_kib = total(mine.watch_bytes) * per_min / 1024
        result.watches_open = minus(a1.watches_open(), control_watches)
        # Failures, one after another, spread over the jobs.
        busy_start = time.monotonic()
        b0 = api_sample(core, counter)
        peak = rss
        hits: dict[str, int] = {}
        for _ in range(failures):
            job_uid = None
            pods = [
                p
                for p in core.list_namespaced_pod(ns, label_selector="phased.dev/rank").items
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp
            ]
            by_job: dict[str, list[Any]] = {}
            for p in pods:
                by_job.setdefault(p.metadata.labels["phased.dev/job-uid"], []).append(p)
            uids = sorted(u for u, ps in by_job.items() if len(ps) == WORKERS)
            if not uids:
                time.sleep(1)
                continue
            # Spread evenly: the job hit least so far (a job still restarting is skipped,
            # which with a plain round robin sent a third failure to some pools).
            job_uid = min(uids, key=lambda u: (hits.get(u, 0), u))
            hits[job_uid] = hits.get(job_uid, 0) + 1
            victim = sorted(by_job[job_uid], key=lambda p: p.metadata.name)[0]
            node = victim.spec.node_name
            before = {p.metadata.uid for p in by_job[job_uid]}
            # The same moments as a watch shows them (bench/moments.py): the reaction's ends.
            selector = f"phased.dev/job-uid={job_uid}"
            known = {
                p.metadata.uid for p in core.list_namespaced_pod(ns, label_selector=selector).items
            }
            node_moments = moments.watch(
                core.list_node,
                {"not ready": _not_ready, "cordoned": _cordoned},
                WATCH_SECONDS,
                field_selector=f"metadata.name={node}",
            )
            pod_moments = moments.watch(
                core.list_namespaced_pod,
                {"replaced": _not_among(known)},
                WATCH_SECONDS,
                namespace=ns,
                label_selector=selector,
            )
            injected = time.time()
            lib.make_node_not_ready(core, node, wait=None)

            def not_ready(node: str = node) -> bool:
                return lib.node_ready(core, node) == "False"

            lib.wait_until(not_ready, 30, interval=0.05)
            visible = time.monotonic()
            visible_at = time.time()

            cordoned: list[float] = []

            def replaced(
                job_uid: str = job_uid,
                before: set[str] = before,
                node: str = node,
                cordoned: list[float] = cordoned,
            ) -> bool:
                if not cordoned and core.read_node(node).spec.unschedulable:
                    cordoned.append(time.monotonic())
                items = core.list_namespaced_pod(
                    ns, label_selector=f"phased.dev/job-uid={job_uid}"
                ).items
                return any(p.metadata.uid not in before for p in items)

            job_label = f"{ns}/{victim.metadata.labels['phased.dev/job']}"
            try:
                # The pod watch says when the replacement came; the polls (each a LIST
                # and a GET, and the models of their answers, in this process beside the
                # watches' threads) only if the watch ended or failed before it did.
                if not pod_moments.wait(60):
                    left = 60 - (time.monotonic() - visible)
                    lib.wait_until(replaced, max(1.0, left), interval=0.1)
                seen_at = time.time()
                node_moments.wait(5)
                pod_moments.wait(5)
                down = node_moments.at("not ready")
                new = pod_moments.at("replaced")
                fenced = node_moments.at("cordoned")
                if down is not None and new is not None:
                    result.reactions.append(new[0] - down[0])
                    result.made.append(Failure(node, job_label, injected, down[1], new[1]))
                    if fenced is not None:
                        result.answers.append(fenced[0] - down[0])
                else:  # the watch missed it (its error, if any, said): the polls' times
                    result.polled += 1
                    why = node_moments.error or pod_moments.error
                    print(f"[{size}] {label}: {node} timed by polls ({why})", flush=True)
                    result.reactions.append(time.monotonic() - visible)
                    result.made.append(Failure(node, job_label, injected, visible_at, seen_at))
                    # The cordon comes first in the operator's plan: seen by now, or in one look.
                    if cordoned or core.read_node(node).spec.unschedulable:
                        result.answers.append((cordoned or [time.monotonic()])[0] - visible)
            except lib.WaitTimeout:
                result.missed += 1
                result.made.append(Failure(node, job_label, injected, visible_at, None))
            peak = max(peak, proc_sample(pid)[0])
            lib.make_node_ready(core, node, wait=None)
            time.sleep(1.0)
        busy = time.monotonic() - busy_start
        c2, s2 = reconcile_count(op)
        rss2, cpu2 = proc_sample(pid)
        b1 = api_sample(core, counter)
        failing = Window.between(b0, b1).beyond(control)
        result.fail_latency = buckets(b1.parsed[DURATION], b0.parsed[DURATION])
        result.fail_api, _ = split_heartbeats(scaled(failing.requests, 1 / max(1, result.failures)))
        result.busy_passes_s = (c2 - c1) / busy
        result.busy_cpu_pct = 100 * (cpu2 - cpu1) / busy
        result.mean_pass_ms = 1000 * (s2 - s0) / max(1.0, c2 - c0)
        result.rss_peak_mib = max(peak, rss2)
        result.load = os.getloadavg()[0]
        print(
            f"[{size}] {label}: ready {result.ready_s:.1f}s reaction median "
            f"{median(result.reactions):.2f}s p99 {percentile(result.reactions, 99):.2f}s "
            f"rss {result.rss_mib:.0f}->{result.rss_peak_mib:.0f} MiB; API requests "
            f"{total(result.idle_api):.0f}/idle min, {total(result.fail_api):.0f}/failure",
            flush=True,
        )
        for j in range(jobs):
            kubectl("delete", "trainingjob", f"job-{j}", "-n", ns, "--wait=false")
        lib.wait_until(
            lambda: (
                not (
                    yaml.safe_load(kubectl("get", "trainingjobs", "-n", ns, "-o", "yaml")) or {}
                ).get("items")
            ),
            120,
            interval=2,
            message="jobs deleted",
        )
    finally:
        op.stop()
        lib.delete_namespace(core, ns)
    if trace:
        lines = parse(log.read_text(errors="replace"))
        lists, stops = relists(lines), collections(lines)
        result.trace = trace_report([timeline(f, lines, lists, stops) for f in result.made])
    # The next run's control window must not see this namespace's pods being removed.
    lib.wait_until(
        lambda: not any(n.metadata.name == ns for n in core.list_namespace().items),
        300,
        interval=2,
        message=f"namespace {ns} gone",
    )
    # Quarantined nodes keep their marks after the job: give them back for the next size.
    for n in core.list_node(label_selector="phased.dev/role").items:
        core.patch_node(
            n.metadata.name,
            {
                "metadata": {
                    "labels": {k: None for k in n.metadata.labels if k.startswith("phased.dev/")},
                    "annotations": {
                        k: None for k in n.metadata.annotations or {} if k.startswith("phased.dev/")
                    },
                },
                "spec": {
                    "unschedulable": None,
                    "taints": [
                        t.to_dict()
                        for t in n.spec.taints or []
                        if not t.key.startswith("phased.dev/")
                    ]
                    or None,
                },
            },
        )
    return result


def _find(raw: dict[Any, Any], file_part: str, func: str) -> tuple[int, float, float]:
    """(calls, own s, cumulative s) of the function named ``func`` in a file like ``file_part``."""
    for (file, _line, name), (_cc, nc, tt, ct, _callers) in raw.items():
        if name == func and file_part in file:
            return int(nc), float(tt), float(ct)
    return 0, 0.0, 0.0


def profile_report(path: Path, top: int = 12) -> str:
    """Where the operator's time went: a summary of the big buckets, then its own functions."""
    stats = pstats.Stats(str(path))
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = float(stats.total_tt)  # type: ignore[attr-defined]
    idle = _find(raw, "", "<method 'poll' of 'select.epoll' objects>")[1]
    busy = total - idle
    buckets = [
        (
            "kopf: watch-event processing",
            "kopf/_core/reactor/processing.py",
            "process_resource_event",
        ),
        ("  of which kopf diff/essence (deepcopy)", "kopf/_cogs/configs/diffbase.py", "build"),
        ("phased: reconcile passes", "phased/reconcile.py", "reconcile"),
        ("  of which decide (pure core)", "phased/core/decide.py", "decide"),
        ("    of which sizing.form_pool", "phased/core/sizing.py", "form_pool"),
        ("    of which pools.nearest_first", "phased/core/pools.py", "nearest_first"),
        ("  of which API calls (kube/client.py)", "phased/kube/client.py", "request"),
        ("phased: periodic relist/resync", "phased/handlers/__init__.py", "_periodic"),
        ("JSON decoding (all callers)", "json/decoder.py", "raw_decode"),
    ]
    rows = []
    for label, file_part, func in buckets:
        calls, own, cum = _find(raw, file_part, func)
        value = own if func == "raw_decode" else cum
        rows.append([label, calls, f"{value:.1f}", f"{100 * value / busy:.0f}%" if busy else "-"])
    summary = table(["where", "calls", "seconds", "% of busy time"], rows)
    mine = sorted(
        ((k, v) for k, v in raw.items() if "/phased/" in k[0]),
        key=lambda kv: kv[1][3],
        reverse=True,
    )
    lines = []
    for (file, line, name), (_cc, nc, tt, ct, _callers) in mine:
        short = file.split("/phased/", 1)[1]
        if name in ("<module>", "main", "run", "_run", "_guarded") or short.startswith("cli/"):
            continue
        lines.append([f"{short}:{line} {name}", nc, f"{tt:.1f}", f"{ct:.1f}"])
        if len(lines) >= top:
            break
    funcs = table(["phased function", "calls", "own s", "cumulative s"], lines)
    by_own_time = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)
    hot = [
        [f"{Path(f).name}:{ln} {n}"[:70], nc, f"{tt:.1f}"]
        for (f, ln, n), (_cc, nc, tt, _ct, _c) in by_own_time
        if "epoll" not in n
    ][:8]
    hottest = table(["own time, any code", "calls", "own s"], hot)
    return (
        f"Profiled {total:.0f} s of wall time: {idle:.0f} s idle in epoll, {busy:.0f} s busy "
        f"(cumulative figures overlap; coroutine calls count resumptions).\n\n"
        f"{summary}\n\n{funcs}\n\n{hottest}"
    )


CHART_VALUES = Path(__file__).resolve().parent.parent / "helm" / "phased" / "values.yaml"
# What each ``--settings`` choice is called in the tables.
SETTINGS_NAMES = {"e2e": "e2e settings", "chart": "chart defaults"}


def settings_file(which: str, relist: str = "") -> Path:
    """The settings file the operator runs with: ``e2e`` (``e2e/settings.yaml``) or ``chart``
    (the chart's ``settings`` as shipped, written out as the chart's ConfigMap holds them
    when the report endpoint is off); with ``relist``, its ``nodeRelistInterval`` instead of
    theirs."""
    if which == "e2e" and not relist:
        return TEST_SETTINGS
    if which == "e2e":
        settings = yaml.safe_load(TEST_SETTINGS.read_text())
    else:
        settings = yaml.safe_load(CHART_VALUES.read_text())["settings"]
    if relist:
        settings["nodeRelistInterval"] = relist
    path = (
        Path(tempfile.gettempdir())
        / f"phased-bench-{which}-settings{'-' + relist if relist else ''}.yaml"
    )
    path.write_text(yaml.safe_dump(settings))
    return path


def settings_note(which: str, relist: str = "") -> str:
    """What the runs at ``which`` settings look at while idle, in the report's words."""
    settings = load_settings(settings_file(which, relist).read_text())
    resync = settings.resync_interval
    seconds = parse_duration(resync)
    where = (
        "`e2e/settings.yaml`, as the end-to-end tests run it"
        if which == "e2e"
        else "the chart's `settings` as shipped in `helm/phased/values.yaml`"
    )
    if relist:
        where += f", but `nodeRelistInterval` {relist} (`--node-relist-interval`)"
    return (
        f"{SETTINGS_NAMES[which]} ({where}: `resyncInterval` {resync}, "
        f"`nodeRelistInterval` {settings.node_relist_interval}): while idle, each job "
        f"is looked at once a resync (a GET of the job, a LIST of its pods) and its status "
        f"refreshed (one PATCH), i.e. {60 / seconds:g} of each per job per idle minute"
    )


@dataclass(frozen=True)
class Variant:
    """One operator the run measures: its label in the tables, the environment that picks its
    code (``PYTHONPATH``), the settings it runs with, whether it has ``--trace``, and the
    niceness it runs at."""

    label: str
    env: dict[str, str]
    settings: str
    traces: bool = True
    nice: int = 0
    relist: str = ""  # the settings' nodeRelistInterval instead of their own ("": theirs)


class Baseline:
    """The operator the checkout is compared with: another commit's, checked out into a
    temporary git worktree (``ref``), or this checkout's own (no ``ref``); at ``settings``
    and ``nice``, where this checkout's runs at ``mine`` and ``my_nice``."""

    def __init__(
        self, ref: str | None, settings: str, mine: str, nice: int = 0, my_nice: int = 0
    ) -> None:
        repo = Path(__file__).resolve().parent.parent
        self.repo = repo
        self.settings, self.mine = settings, mine
        self.nice, self.my_nice = nice, my_nice
        self.path: Path | None = None
        self.sha = ""
        env: dict[str, str] = {}
        traces = True
        if ref is not None:
            self.sha = subprocess.run(
                ["git", "-C", str(repo), "rev-parse", "--short", ref],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            self.path = Path(tempfile.mkdtemp(prefix="phased-bench-baseline-"))
            shutil.rmtree(self.path)
            subprocess.run(
                ["git", "-C", str(repo), "worktree", "add", "--detach", str(self.path), self.sha],
                check=True,
            )
            # The harness puts this checkout's operator/ first on PYTHONPATH; this replaces it.
            env = {"PYTHONPATH": str(self.path / "operator")}
            # Whether its operator has ``phased run --trace`` (older commits do not).
            run = self.path / "operator" / "phased" / "cli" / "run.py"
            traces = run.exists() and '"--trace"' in run.read_text()
        self.label = f"before ({', '.join(self._parts(self.sha, settings, nice))})"
        self.variant = Variant(self.label, env, settings, traces, nice)

    def _parts(self, sha: str, settings: str, nice: int) -> list[str]:
        """A row's operator: its commit, and how it runs where the two rows differ."""
        parts = [sha] if sha else []
        if self.settings != self.mine:
            parts.append(SETTINGS_NAMES[settings])
        if self.nice != self.my_nice:
            parts.append(f"nice {nice}")
        return parts

    def after(self) -> Variant:
        """This checkout, the row after."""
        sha, dirty = this_checkout()
        sha += "+changes" if dirty else ""
        label = f"after ({', '.join(self._parts(sha, self.mine, self.my_nice))})"
        return Variant(label, {}, self.mine, nice=self.my_nice)

    def what(self) -> str:
        """What the two rows are, for the note under the tables."""

        def how(settings: str, nice: int) -> str:
            out = f" at the {SETTINGS_NAMES[settings]}" if self.settings != self.mine else ""
            return out + (f" at nice {nice}" if self.nice != self.my_nice else "")

        before = f"the operator of {self.sha}" if self.sha else "this checkout's operator"
        after = "this checkout's" if self.sha else "the same"
        return (
            f"{before}{how(self.settings, self.nice)} (before) and {after}"
            f"{how(self.mine, self.my_nice)} (after)"
        )

    def remove(self) -> None:
        if self.path is None:
            return
        subprocess.run(
            ["git", "-C", str(self.repo), "worktree", "remove", "--force", str(self.path)],
            check=False,
        )


def this_checkout() -> tuple[str, bool]:
    """This checkout's commit, and whether its operator/ differs from it."""
    repo = Path(__file__).resolve().parent.parent
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--", "operator"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return sha, bool(dirty)


def pooled(runs: list[SizeResult]) -> SizeResult:
    """Several runs of one operator at one size as one: reactions together, the other
    figures averaged (peaks: the highest)."""
    if len(runs) == 1:
        return runs[0]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    return SizeResult(
        nodes=runs[0].nodes,
        operator=runs[0].operator,
        ready_s=mean([r.ready_s for r in runs]),
        reactions=[x for r in runs for x in r.reactions],
        answers=[x for r in runs for x in r.answers],
        idle_passes_s=mean([r.idle_passes_s for r in runs]),
        busy_passes_s=mean([r.busy_passes_s for r in runs]),
        mean_pass_ms=mean([r.mean_pass_ms for r in runs]),
        rss_mib=mean([r.rss_mib for r in runs]),
        rss_peak_mib=max(r.rss_peak_mib for r in runs),
        idle_cpu_pct=mean([r.idle_cpu_pct for r in runs]),
        busy_cpu_pct=mean([r.busy_cpu_pct for r in runs]),
        missed=sum(r.missed for r in runs),
        polled=sum(r.polled for r in runs),
        load=mean([r.load for r in runs]),
        asked=runs[0].asked,
        idle_s=mean([r.idle_s for r in runs]),
        control_per_min=mean([r.control_per_min for r in runs]),
        idle_all_per_min=mean([r.idle_all_per_min for r in runs]),
        idle_api=mean_counts([r.idle_api for r in runs]),
        idle_noise=mean([r.idle_noise for r in runs]),
        idle_watch=mean_counts([r.idle_watch for r in runs]),
        idle_watch_kib=mean([r.idle_watch_kib for r in runs]),
        watches_open=mean_counts([r.watches_open for r in runs]),
        fail_api=mean_counts([r.fail_api for r in runs]),
        fail_latency=merged(r.fail_latency for r in runs),
    )


def compare(results: list[SizeResult], before_label: str) -> str:
    """After against before, size by size (several rounds pooled): the figures the change
    is about."""
    rows = []
    for size in sorted({r.nodes for r in results}):
        befores = [r for r in results if r.nodes == size and r.operator == before_label]
        afters = [r for r in results if r.nodes == size and r.operator != before_label]
        if not befores or not afters:
            continue
        before, after = pooled(befores), pooled(afters)

        def pair(b: float, a: float, unit: str = "") -> str:
            return f"{b:.0f}{unit} -> {a:.0f}{unit}"

        rows.append(
            [
                size,
                f"{len(before.reactions)} / {len(after.reactions)}",
                pair(
                    percentile(before.reactions, 99) * 1000, percentile(after.reactions, 99) * 1000
                ),
                pair(median(before.reactions) * 1000, median(after.reactions) * 1000),
                pair(percentile(before.answers, 99) * 1000, percentile(after.answers, 99) * 1000),
                pair(median(before.answers) * 1000, median(after.answers) * 1000),
                pair(before.idle_cpu_pct, after.idle_cpu_pct, " %"),
                pair(before.busy_cpu_pct, after.busy_cpu_pct, " %"),
                pair(before.mean_pass_ms, after.mean_pass_ms),
                pair(before.rss_peak_mib, after.rss_peak_mib),
                pair(total(before.idle_api), total(after.idle_api)),
                pair(total(before.fail_api), total(after.fail_api)),
                f"{before.ready_s:.1f} -> {after.ready_s:.1f}",
                f"{before.load:.1f} / {after.load:.1f}",
            ]
        )
    headers = [
        "nodes",
        "failures",
        "reaction p99 ms",
        "reaction median ms",
        "cordon p99 ms",
        "cordon median ms",
        "CPU idle",
        "CPU failing",
        "mean pass ms",
        "RSS peak MiB",
        "API req/idle min",
        "API req/failure",
        "start->ready s",
        "load avg",
    ]
    return "Before -> after (rounds pooled):\n\n" + table(headers, rows)


def _pairs(counts: Counts, n: int = 3) -> str:
    return ", ".join(f"{describe(k)} {v:.1f}" for k, v in top(counts, n)) or "-"


def api_table(results: list[SizeResult], baseline: bool) -> str:
    """The operator's API requests and watch traffic, by the API server's counters."""
    rows = []
    for r in results:
        watch = {k[0]: v for k, v in r.idle_watch.items()}
        opened = {k[0]: v for k, v in r.watches_open.items()}
        rows.append(
            [
                r.nodes,
                *([r.operator] if baseline else []),
                f"{r.idle_s:.0f}",
                f"{r.idle_all_per_min:.0f} - {r.control_per_min:.0f} - ({r.idle_noise:.0f}) "
                f"= {total(r.idle_api):.0f}",
                _pairs(r.idle_api),
                " / ".join(
                    f"{watch.get(res, 0.0):.0f}" for res in ("nodes", "pods", "trainingjobs")
                ),
                f"{r.idle_watch_kib:.0f}",
                " / ".join(
                    f"{opened.get(res, 0.0):.0f}" for res in ("nodes", "pods", "trainingjobs")
                ),
                f"{total(r.fail_api):.0f}",
                _pairs(r.fail_api, 4),
            ]
        )
    headers = [
        "nodes",
        *(["operator"] if baseline else []),
        "idle window s",
        "API req/idle min: all - control - (heartbeat rest) = operator",
        "operator's most, req/idle min",
        "watch events/idle min: nodes / pods / trainingjobs",
        "watch KiB/idle min",
        "watches open: nodes / pods / trainingjobs",
        "API req/failure",
        "most, req/failure",
    ]
    return table(headers, rows)


# The requests a swap waits for, one after another, in the order it sends them: the answering
# pass reads its job and pods, looks at the node it would claim, changes nodes and deletes
# pods, writes its status and events; the next pass reads again and creates the new pods.
SWAP_REQUESTS: tuple[Key, ...] = (
    ("GET", "trainingjobs", ""),
    ("LIST", "pods", ""),
    ("PATCH", "nodes", ""),
    ("DELETE", "pods", ""),
    ("PATCH", "trainingjobs", "status"),
    ("POST", "events", ""),
    ("POST", "pods", ""),
)


def latency_table(results: list[SizeResult], baseline: bool) -> str:
    """The API server's own time for the kinds of request a swap waits for, in the failure
    windows (rounds pooled: their histograms added)."""
    rows = []
    for key_nodes in dict.fromkeys((r.nodes, r.operator) for r in results):
        runs = [r for r in results if (r.nodes, r.operator) == key_nodes]
        histograms = merged(r.fail_latency for r in runs)
        cells: list[object] = [f"{key_nodes[0]:,}", *([key_nodes[1]] if baseline else [])]
        for key in SWAP_REQUESTS:
            counts = histograms.get(key, {})
            n = max(counts.values(), default=0.0)
            if not n:
                cells.append("-")
                continue
            p50, p99 = (1000 * histogram_quantile(q, counts) for q in (0.5, 0.99))
            cells.append(f"{p50:.0f} / {p99:.0f} ({n:.0f})")
        rows.append(cells)
    headers = [
        "nodes",
        *(["operator"] if baseline else []),
        *(f"{describe(k)} p50 / p99 ms (requests)" for k in SWAP_REQUESTS),
    ]
    return table(headers, rows)


def bucket_bounds(results: list[SizeResult], shown: int = 9) -> str:
    """The first upper bounds of the API server's duration buckets, in ms, as people read
    them."""
    bounds = sorted(
        {b for r in results for h in r.fail_latency.values() for b in h if not math.isinf(b)}
    )
    text = ", ".join(f"{1000 * b:g}" for b in bounds[:shown]) + " ms"
    return text + (", ..." if len(bounds) > shown else "")


def slopes(results: list[SizeResult]) -> str:
    """RSS and mean pass time against the node count, per operator, by least squares."""
    lines = []
    for label in dict.fromkeys(r.operator for r in results):
        runs = [r for r in results if r.operator == label]
        sizes = sorted({r.nodes for r in runs})
        if len(sizes) < 2:
            continue
        points = [pooled([r for r in runs if r.nodes == n]) for n in sizes]
        xs = [float(p.nodes) for p in points]
        rss = 1000 * slope(xs, [p.rss_mib for p in points])
        pass_ms = 1000 * slope(xs, [p.mean_pass_ms for p in points])
        small, large = points[0], points[-1]
        per_small = 1000 * small.mean_pass_ms / small.nodes
        per_large = 1000 * large.mean_pass_ms / large.nodes
        verdict = (
            "no faster than linearly"
            if per_large <= per_small
            else "faster than linearly (the per-node cost rose)"
        )
        lines.append(
            f"{label}: least squares over {len(points)} sizes ({', '.join(map(str, sizes))} "
            f"nodes): RSS {rss:+.1f} MiB and mean pass time {pass_ms:+.1f} ms per 1,000 "
            f"nodes. Pass time per 1,000 nodes: {per_small:.1f} ms at {small.nodes:,} nodes, "
            f"{per_large:.1f} ms at {large.nodes:,}: from the smallest size to the largest the "
            f"pass cost grew {verdict} (a part of each pass that does not depend on the nodes "
            "makes the per-node figure fall under any linear growth; the slope is the cost of "
            "a node)."
        )
    return "\n\n".join(lines)


def report(
    args: argparse.Namespace,
    results: list[SizeResult],
    baseline: Baseline | None,
    profiling: bool,
    prof_path: Path,
    stopped: str,
    going_on: bool = False,
) -> None:
    """Print the table and (unless --no-write) write it into RESULTS.md; ``going_on``: more
    sizes are still to run (the section is rewritten after every size, so a run cut short
    keeps what it measured)."""
    rows = [
        [
            f"{r.nodes:,}" + (f" ({r.asked:,} asked)" if r.asked and r.asked != r.nodes else ""),
            *([r.operator] if baseline else []),
            args.jobs,
            f"{r.ready_s:.1f}",
            f"{len(r.reactions)}" + (f" ({r.missed} missed)" if r.missed else ""),
            f"{median(r.reactions) * 1000:.0f}",
            f"{percentile(r.reactions, 99) * 1000:.0f}"
            + (" (max)" if is_max_rank(len(r.reactions), 99) else ""),
            f"{median(r.answers) * 1000:.0f}",
            f"{percentile(r.answers, 99) * 1000:.0f}"
            + (" (max)" if is_max_rank(len(r.answers), 99) else ""),
            f"{r.idle_passes_s:.2f}",
            f"{r.busy_passes_s:.2f}",
            f"{r.mean_pass_ms:.0f}",
            f"{r.rss_mib:.0f}",
            f"{r.rss_peak_mib:.0f}",
            f"{r.idle_cpu_pct:.0f}",
            f"{r.busy_cpu_pct:.0f}",
            f"{r.load:.1f}",
        ]
        for r in results
    ]
    headers = [
        "nodes",
        *(["operator"] if baseline else []),
        "jobs",
        "start->ready s",
        "failures",
        "reaction median ms",
        "reaction p99 ms (the max below 100 failures)",
        "cordon median ms",
        "cordon p99 ms",
        "passes/s idle",
        "passes/s failing",
        "mean pass ms",
        "RSS MiB",
        "RSS peak MiB",
        "CPU % idle",
        "CPU % failing",
        "load avg",
    ]
    text = table(headers, rows)
    grown = [r for r in results if r.asked and r.nodes != r.asked]
    if grown:
        text += "\n\n" + " ".join(
            dict.fromkeys(
                f"At {r.asked:,} nodes asked the cluster had {r.nodes:,}: {args.jobs} jobs "
                f"hold {args.jobs * (WORKERS + SPARES):,} nodes and each of the "
                f"{args.failures} failures quarantines one, so {r.nodes - r.asked:,} more "
                "let every failed node's spare be refilled, as at the larger sizes (the "
                "slopes use the nodes the cluster had)."
                for r in grown
            )
        )
    sloped = slopes(results)
    if sloped:
        text += "\n\n" + sloped
    text += (
        "\n\nAPI traffic, as the API server counts it (`apiserver_request_total`, "
        "`apiserver_watch_events_total`, `apiserver_watch_events_sizes`, "
        "`apiserver_longrunning_requests`; scraped at the edges of each window):\n\n"
        + api_table(results, baseline is not None)
        + "\n\nThe API server's own time for the kinds of request a swap waits for, in the "
        "failure windows (`apiserver_request_duration_seconds`, from a request's receipt to "
        "its answer; every client's requests of the kind, the simulated kubelets', the "
        "controllers' and the bench's too; the quantiles are interpolated within the "
        "histogram's buckets as Prometheus's `histogram_quantile` does, so they are "
        f"estimates to a bucket's width: {bucket_bounds(results)}):\n\n"
        + latency_table(results, baseline is not None)
    )
    if baseline is not None:
        text += "\n\n" + compare(results, baseline.label)
    prof = ""
    if profiling and prof_path.exists():
        prof = profile_report(prof_path)
    polled = sum(r.polled for r in results)
    polled_note = (
        f" The watches missed {polled} failure(s) of all rows, timed by the polls instead."
        if polled
        else ""
    )
    profiled_note = (
        "The largest size ran under cProfile (slower than without), so its figures are an "
        "upper bound."
        if profiling
        else "No profiler ran."
    )
    if baseline is not None:
        profiled_note += (
            f" Each size ran {baseline.what()}, one after the other on the same cluster and nodes"
            + (
                "."
                if args.rounds == 1
                else f", {args.rounds} rounds in alternating order (before, after, after,"
                " before, ...)."
            )
        )
    if stopped:
        profiled_note += " " + stopped.splitlines()[0][:300]
    if going_on:
        profiled_note += " (Written after each size: the run was still going on.)"
    settled = "waited " + ", ".join(
        f"{r.settled_s:.0f} s at {r.nodes:,} nodes ({r.operator})"
        if baseline
        else f"{r.settled_s:.0f} s at {r.nodes:,} nodes"
        for r in results
    )
    relist = args.node_relist_interval
    ran_with = "The operator runs with the " + settings_note(args.settings, relist)
    if baseline is not None and baseline.settings != args.settings:
        ran_with = (
            "Before, the operator runs with the "
            + settings_note(baseline.settings, relist)
            + "; after, with the "
            + settings_note(args.settings, relist)
        )
    note = f"""
Reaction = the bench sees the Node Ready=False in the API -> the job's replacement worker
pod exists (the whole gang is recreated on the promoted spare, once the survivors it stopped
are gone: kwok ends a deleted pod at once, so that is one more pass after their deletions
come back); `notReadyGrace: 0s`, so this is the operator's own time (with a real grace, add
it). Cordon = the same start -> the Node `spec.unschedulable`, the first action of the
operator's answer (the quarantine). Each moment is when a watch of the bench's own first
showed it (one on the node, one on the job's pods, begun before the failure: the API
server sends a change to every watcher alike, the operator's too), read as the JSON it
sent, and the bench waits on those watches. Sections up to 4r read the moments in polls
every 0.05 s (the node) and 0.1 s (the pods), which saw each end a poll's wait and a round
trip late; up to 4ad the watches turned each event into the client's models before taking
its moment, behind the survivors' deletions, while the bench polled the job's pods and the
node every 0.1 s beside them: their figures are not comparable with these.{polled_note} With
fewer than 100 failures a size, p99 is the slowest one. CPU % is of one
core. {profiled_note} "load avg" is the 1-minute load average at the end of each row's
failures, on {os.cpu_count()} CPUs (the machine is shared).
{lease_note(args.node_lease_seconds)} {ran_with}.

The API server's counters have no client label, so the operator's share is what is left
when the others are taken out. Before each operator starts, a control window of the same
length as the idle one ({args.idle:.0f} s) runs on the same cluster and nodes with no
operator: node heartbeats and leases, the controllers, the scheduler. It starts once the
nodes a size added have settled: a 15 s window with no GET, PATCH or PUT of a node and no
Event (the node lifecycle controller's writes to each new node and the Events of their
registration, which outlast Ready by minutes; {settled}). Its rate is taken
out of the idle and the failure windows, key by key (verb, resource, subresource; watch
events by resource). The bench's own calls (its polls, patches, scrapes) are counted in
the bench, keyed as the API server keys them, and taken out too. "API req/idle min" is
then the operator's requests (all - control = operator; the bench made none while idle),
less what is left of the simulated kubelets' heartbeats (node status and Lease requests,
which this operator never makes without leader election): that rest, in brackets, is the
noise of the subtraction (heartbeats are periodic and a window is not a whole number of
periods; it can be below 0). "API req/failure" is the failure window's requests, less the
control, the bench and the heartbeat keys, per failure: the operator's, and also what the
failures set off in the cluster without the operator (the NotReady node's taint by the
node lifecycle controller) and what the operator's actions set off (the scheduler's
binding of the new pods, their status from kwok, Events); the "most" column names them.
Watch events are counted per watcher (an update to a node is one event to each client
watching nodes): the operator's are the events with it less those of the control, its
watches open the long-running WATCH requests with it less those without. A figure below 0
is noise of the subtraction (the control's heartbeats are not exactly those of the
window), not hidden.
"""
    body = text + "\n" + note
    for r in results:
        if r.trace:
            body += (
                f"\nWhere the time of a swap went at {r.asked:,} nodes ({r.operator}, "
                "`--trace`: its log read against the failures by `bench/swaptrace.py`; log stamps "
                'are to the millisecond; "answer" is the job\'s first pass after the operator '
                "took the node's change):\n\n" + r.trace + "\n"
            )
    if prof:
        body += (
            "\nProfile of the operator at the largest size (cProfile):\n\n```\n" + prof + "\n```\n"
        )
    print(body)
    if not args.no_write and baseline is not None and args.change:
        slug = "-".join("".join(c if c.isalnum() else " " for c in args.change.lower()).split())
        key = f"scale-before-after-{slug}"
        write_section(key, f"{section_number(key)}. Scale, before and after: {args.change}", body)
    elif not args.no_write and baseline is not None:
        write_section(
            "scale-before-after" + ("" if args.rounds == 1 else f"-{args.rounds}-rounds"),
            "4b. Scale, before and after: one operator against another on the same cluster",
            body,
        )
    elif not args.no_write:
        sizes = sorted({r.asked for r in results})
        span = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,} to {sizes[-1]:,}"
        write_section("scale", f"4. Scale: {span} nodes, concurrent jobs", body)


def section_number(key: str) -> str:
    """The number of a before/after section: the one it has if RESULTS.md holds it
    already, else the first of 4c, 4e, 4f, ..., 4z, 4aa, 4ab, ... no section of RESULTS.md
    uses (past 4z the run's report was printed and then lost to a StopIteration)."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    mine = re.search(rf"<!-- bench:{re.escape(key)} -->\n## (4[a-z]+)\. ", text)
    if mine:
        return mine.group(1)
    used = set(re.findall(r"^## (4[a-z]+)\. ", text, re.M))
    letters = string.ascii_lowercase
    single = [f"4{c}" for c in letters if c not in "abd"]
    double = (f"4{a}{b}" for a in letters for b in letters)
    return next(n for n in itertools.chain(single, double) if n not in used)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="500,1000,2000")
    p.add_argument("--jobs", type=int, default=12)
    p.add_argument("--failures", type=int, default=30)
    p.add_argument("--no-profile", action="store_true")
    p.add_argument(
        "--idle",
        type=float,
        default=60.0,
        help="seconds of the idle window and of the control window without the operator",
    )
    p.add_argument(
        "--baseline",
        metavar="REF",
        help="also run the operator of commit REF at each size, before this checkout's",
    )
    p.add_argument(
        "--settings",
        choices=sorted(SETTINGS_NAMES),
        default="e2e",
        help="the settings this checkout's operator runs with: e2e/settings.yaml, or the "
        "chart's as shipped",
    )
    p.add_argument(
        "--baseline-settings",
        choices=sorted(SETTINGS_NAMES),
        help="run the baseline with these settings (without --baseline: this checkout at "
        "these settings against this checkout at --settings)",
    )
    p.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run this checkout's operator under nice -n N (below 0: a larger share of "
        "the CPUs it shares with the control plane, as a larger CPU request gives a pod)",
    )
    p.add_argument(
        "--baseline-nice",
        type=int,
        help="run the baseline under nice -n N (without --baseline: this checkout at this "
        "niceness against this checkout at --nice)",
    )
    p.add_argument(
        "--change",
        metavar="TEXT",
        help="with a baseline: what the compared operators change; the section is headed "
        "with it and kept apart from other before/after sections",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with a baseline: run both operators this many times at each size, in "
        "alternating order (before, after, after, before, ...)",
    )
    p.add_argument(
        "--node-lease-seconds",
        type=int,
        default=KUBELET_LEASE_SECONDS,
        help="the simulated nodes' Lease duration (a kubelet's: 40); more spares the control "
        "plane the renewals at thousands of nodes",
    )
    p.add_argument(
        "--node-relist-interval",
        metavar="DURATION",
        default="",
        help="run every operator with this nodeRelistInterval instead of its settings' (e.g. "
        "30s: more of the failures meet a relist of the Nodes)",
    )
    p.add_argument("--cluster", default="scale", help="bench cluster name (phased-bench-NAME)")
    p.add_argument("--port-base", type=int, default=32810, help="its six ports start here")
    p.add_argument("--keep-cluster", action="store_true")
    p.add_argument(
        "--reuse-cluster",
        action="store_true",
        help="use the bench cluster of that name if it is running (kept by --keep-cluster)",
    )
    p.add_argument("--no-write", action="store_true")
    p.add_argument(
        "--trace",
        action="store_true",
        help="run this checkout's operator with --trace and show where each swap's time went",
    )
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    profiling = not args.no_profile and os.environ.get("PHASED_BENCH_PROFILE", "1") != "0"
    prof_path = Path(tempfile.gettempdir()) / "phased-bench-scale.prof"
    prof_path.unlink(missing_ok=True)

    cluster = BenchCluster(args.cluster, port_base=args.port_base)
    results: list[SizeResult] = []
    before_settings = args.baseline_settings or args.settings
    before_nice = args.nice if args.baseline_nice is None else args.baseline_nice
    baseline = (
        Baseline(args.baseline, before_settings, args.settings, before_nice, args.nice)
        if args.baseline or before_settings != args.settings or before_nice != args.nice
        else None
    )
    variants = (
        [baseline.variant, baseline.after()]
        if baseline is not None
        else [Variant("this checkout", {}, args.settings, nice=args.nice)]
    )
    if args.node_relist_interval:
        variants = [replace(v, relist=args.node_relist_interval) for v in variants]
    stopped = ""
    try:
        cluster.up(
            h100=min(sizes),
            lease_seconds=args.node_lease_seconds,
            recreate=not args.reuse_cluster,
        )
        core = lib.core_v1(cluster.kubeconfig)
        counter = CallCounter(core.api_client)
        kubectl = lib.Kubectl(cluster.kubeconfig)
        kubectl("apply", "-f", str(CRD))

        def established() -> bool:
            # Right after the apply the CRD may have no conditions yet: kubectl wait fails.
            try:
                kubectl("wait", "--for=condition=Established", "crd/trainingjobs.phased.dev")
            except lib.KubectlError:
                return False
            return True

        lib.wait_until(established, 60, interval=1, message="the CRD Established")
        for size in sizes:
            # Rounds alternate the order (before, after, after, before, ...), so that a
            # load that comes and goes on a shared machine falls on both alike.
            order = [
                variant
                for n in range(args.rounds)
                for variant in (variants if n % 2 == 0 else variants[::-1])
            ]
            for variant in order:
                baseline_run = baseline is not None and variant.label == baseline.variant.label
                profiled = profiling and size == max(sizes) and not baseline_run
                try:
                    results.append(
                        run_size(
                            cluster,
                            core,
                            counter,
                            kubectl,
                            size,
                            args.jobs,
                            args.failures,
                            prof_path if profiled else None,
                            variant,
                            idle=args.idle,
                            trace=args.trace and variant.traces,
                        )
                    )
                except Exception as exc:  # keep what the smaller sizes measured
                    if not results:
                        raise
                    traceback.print_exc()
                    stopped = f"The run stopped at {size:,} nodes ({variant.label}): {exc}"
                    break
            if stopped:
                break
            if size != sizes[-1]:
                report(args, results, baseline, profiling, prof_path, stopped, going_on=True)
    finally:
        if not args.keep_cluster:
            cluster.down()
        if baseline is not None:
            baseline.remove()

    report(args, results, baseline, profiling, prof_path, stopped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
