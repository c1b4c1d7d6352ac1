"""Recovery from failed nodes: Phased against vanilla Kubernetes and Kueue, on a real
control plane.

    python bench/recovery.py [--systems phased,shipped,tuned,kueue] [--kinds ...] [--trials 30]
                             [--grace 10] [--never-after 480] [--phased-never-after 120]
                             [--no-write] [--cluster recovery --port-base 32800]

Each system runs on a fresh cluster instance of its own (``phased-bench-recovery``: its own
folder under ``~/.cache/phased/``, ports 32800-32805, see ``bench/common.py``; never the
default one; ``--cluster NAME --port-base PORT`` for another), with nothing else in it, one
system after the other; the instance is stopped at the end. Real etcd, kube-apiserver,
kube-controller-manager (node lifecycle, taint eviction, Job controllers) and
kube-scheduler; KWOK plays the kubelets of simulated 8-GPU H100 nodes, in ``ZONES`` zones
(``topology.kubernetes.io/zone``, one zone per block of two racks, round robin).

Systems:

- ``phased``: a TrainingJob of 8 workers and 2 spares, ``notReadyGrace`` 10 s, Gang
  restarts, the operator as a real process (``e2e/harness.Operator``); the controller-manager
  with ``--node-monitor-grace-period=10s``. Its time is broken down from the failure ledger.
- ``shipped``: an Indexed Job of 8 pods (one per node through 8-GPU requests) at the
  defaults Kubernetes ships: the 300 s not-ready/unreachable tolerations the API server
  adds, the controller-manager's 50 s node-monitor grace, ``backoffLimit`` 6.
- ``tuned``: what a platform engineer would write for the same Job: ``tolerationSeconds:
  10``, ``--node-monitor-grace-period=10s``, ``--node-eviction-rate=1``, a
  ``podFailurePolicy`` that ignores disruptions, ``podReplacementPolicy: Failed`` (the only
  value allowed with a pod failure policy) and ``backoffLimitPerIndex`` (so the Job
  controller's 10 s doubling backoff counts per index, not per Job).
- ``kueue``: the tuned Job, sent through Kueue (``bench/kueue.py``: its controller as a
  local process, ports PORT+6..PORT+8) with topology-aware scheduling: a Topology of block,
  rack and ``kubernetes.io/hostname``, the pods packed by ``podset-preferred-topology`` rack,
  and its failed-node replacement on (a node the Job lost gets a replacement in the
  workload's topology assignment; two failed nodes, or none to be found, evict the workload,
  which is admitted afresh). Same controller-manager flags as ``tuned``.

Failure kinds, each measured from injection to the replacement worker of every lost rank
(index) Running on a healthy node: ``not-ready`` (the kubelet reports Ready=False at once),
``silent`` (heartbeats and Lease renewals stop: Ready=Unknown after the node-monitor grace;
``e2e/lib.silence_node``), ``gpu-fault`` (a GPUXidError condition on a node that stays
Ready), ``gpu-drop`` (allocatable GPUs drop from 8 to 6), ``two-nodes``, ``rack`` (4 nodes of
one rack, or of the fewest racks, at once) and ``phase-boundary`` (a two-phase job; a node of
the first phase's pool reports NotReady the moment the first phase's workers have all
ended; measured to the second phase's 8 workers Running, none on that node).

Every grace a system has a knob for is the same on each side: ``--grace`` seconds (10 by
default) of ``notReadyGrace`` and ``gpuDropGrace`` (Phased) and ``tolerationSeconds`` (the
tuned Job and Kueue). A failure answered after a grace costs at least the grace on every
side, so the grace bounds every ratio: at 10 s, no system can be 5 times as fast as one that
answers 40 s after the failure. A run at another grace writes a section of its own
(``recovery-grace-Ns``). The controller-manager's ``--node-monitor-grace-period`` stays at
10 s on the tuned sides whatever ``--grace`` is: it judges heartbeats, which only a silent
node stops.

Trials overlap, each in its own Job or TrainingJob (see the notes the section prints).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import re
import sys
import tempfile
import textwrap
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e2e import lib
from e2e.harness import CRD, Operator

import kueue
from common import (
    BENCH_PORT_BASE,
    BenchCluster,
    command_line,
    crd_established,
    is_max_rank,
    load_average,
    nearest_rank,
    read_section,
    table,
    write_section,
)

WORKERS = 8
SPARES = 2
GRACE_S = 10  # every grace with a knob on each side (--grace): notReadyGrace, tolerationSeconds
# --node-monitor-grace-period on the tuned sides: it judges heartbeats, which only a silent
# node stops (the other kinds report their condition), so --grace leaves it as it is.
NODE_MONITOR_GRACE_S = 10
SHIPPED_KCM_GRACE_S = 50  # Kubernetes 1.36's --node-monitor-grace-period
SHIPPED_TOLERATION_S = 300  # the DefaultTolerationSeconds admission plugin
SHIPPED_EVICTION_RATE = 0.1  # --node-eviction-rate: nodes tainted NoExecute per second, per zone
TUNED_EVICTION_RATE = 1.0
ZONES = 6
GPU_DROP_TO = 6
PHASE1_S = 20  # the first phase's workers end this long after they start
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
INDEX = "batch.kubernetes.io/job-completion-index"
ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "topology.phased.dev/rack"
BLOCK_LABEL = "topology.phased.dev/block"

KINDS: dict[str, str] = {
    "not-ready": "the kubelet reports NotReady at once",
    "silent": "a silent node: heartbeats stop, Ready=Unknown after the node-monitor grace",
    "gpu-fault": "a GPU-fault condition (GPUXidError) on a node that stays Ready",
    "gpu-drop": f"allocatable GPUs drop from 8 to {GPU_DROP_TO}, the node stays Ready",
    "two-nodes": "two nodes of the job report NotReady at once",
    "rack": "a rack: 4 nodes of the job report NotReady at once",
    "phase-boundary": "a node reports NotReady right as the first of two phases ends",
}
VICTIMS = {"two-nodes": 2, "rack": 4}
SYSTEMS: dict[str, str] = {
    "phased": "Phased (TrainingJob, 2 spares)",
    "shipped": "vanilla Indexed Job, as shipped",
    "tuned": "vanilla Indexed Job, tuned",
    "kueue": "Kueue TAS, failed-node replacement",
}
# Kueue: the level its pods are packed in (preferred: a job of 8 does not fit a rack of 4),
# and its Topology's levels, the lowest the node itself (node replacement needs it).
KUEUE_PREFERRED = RACK_LABEL
KUEUE_LEVELS = (BLOCK_LABEL, RACK_LABEL, kueue.HOSTNAME_LABEL)
# Trials run side by side on Phased: lanes (TrainingJobs) per kind, each taking its trials
# one after the other. The slow kinds get more.
PHASED_LANES = {
    "not-ready": 2,
    "silent": 2,
    "gpu-fault": 1,
    "gpu-drop": 2,
    "two-nodes": 2,
    "rack": 2,
    "phase-boundary": 4,
}


T = TypeVar("T")


def now() -> float:
    return time.time()


def parse_ts(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=UTC).timestamp()


def log(system: str, text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} {system}] {text}", flush=True)


@dataclass
class Trial:
    system: str
    kind: str
    name: str
    victims: list[str] = field(default_factory=list)
    t_fail: float | None = None
    t_running: float | None = None
    ledger: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    outcome: str | None = None  # what the system did, where it says (Kueue: evictions)

    @property
    def seconds(self) -> float | None:
        if self.t_fail is None or self.t_running is None:
            return None
        return self.t_running - self.t_fail


# --- a watch of every pod, with the moment each was first seen Running ---------------------


@dataclass
class PodView:
    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    node: str | None
    phase: str
    deleting: bool
    running_at: float | None
    gone: bool = False


class PodWatch:
    """Every pod of the cluster, kept up to date by one watch and grouped by (namespace,
    job): the ``bench`` label of a vanilla Job's pods, ``phased.dev/job`` of a worker.
    ``running_at`` is when the bench first saw the pod Running (wall clock), so trials wait
    on memory, not on the API."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.groups: dict[tuple[str, str], dict[str, PodView]] = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PodWatch:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    @staticmethod
    def group_of(namespace: str, labels: dict[str, str]) -> tuple[str, str]:
        return (namespace, labels.get("bench") or labels.get("phased.dev/job") or "")

    def _update(self, pod: Any, gone: bool = False) -> None:
        m, s = pod.metadata, pod.status
        t = now()
        labels = dict(m.labels or {})
        key = self.group_of(m.namespace, labels)
        with self.lock:
            group = self.groups.setdefault(key, {})
            if gone:
                group.pop(m.uid, None)
                return
            old = group.get(m.uid)
            running_at = old.running_at if old else None
            phase = (s.phase if s is not None else None) or "Pending"
            if running_at is None and phase == "Running":
                running_at = t
            group[m.uid] = PodView(
                uid=m.uid,
                namespace=m.namespace,
                name=m.name,
                labels=labels,
                annotations=dict(m.annotations or {}),
                node=pod.spec.node_name,
                phase=phase,
                deleting=m.deletion_timestamp is not None,
                running_at=running_at,
            )

    def _run(self) -> None:
        from kubernetes import watch

        version = ""
        while not self.stopped.is_set():
            try:
                if not version:
                    listed = self.core.list_pod_for_all_namespaces()
                    keep = {p.metadata.uid for p in listed.items}
                    with self.lock:
                        for group in self.groups.values():
                            for uid in [u for u in group if u not in keep]:
                                del group[uid]
                    for pod in listed.items:
                        self._update(pod)
                    version = listed.metadata.resource_version
                # kubernetes.watch is unannotated (the operator's own watch subclasses it
                # and relaxes the check for its module: pyproject.toml).
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self.core.list_pod_for_all_namespaces,
                    resource_version=version,
                    timeout_seconds=60,
                    allow_watch_bookmarks=True,
                )
                for event in stream:
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        version = ""
                        break
                    version = obj.metadata.resource_version
                    if event["type"] != "BOOKMARK":
                        self._update(obj, gone=event["type"] == "DELETED")
                    if self.stopped.is_set():
                        break
            except Exception as exc:  # an expired version (410), a dropped connection
                if "410" in str(exc) or "Expired" in str(exc):
                    version = ""
                time.sleep(0.5)

    def select(
        self, namespace: str, group: str, pred: Callable[[PodView], bool] | None = None
    ) -> list[PodView]:
        with self.lock:
            pods = list(self.groups.get((namespace, group), {}).values())
        return [p for p in pods if pred is None or pred(p)]


def wait_for(pred: Callable[[], T | None], timeout: float, interval: float = 0.1) -> T | None:
    """``pred()`` until it is truthy (returned) or ``timeout`` passes (None)."""
    deadline = time.monotonic() + timeout
    while True:
        result = pred()
        if result:
            return result
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


# --- failure injection -----------------------------------------------------------------------


def inject(core: Any, kind: str, node: str) -> None:
    if kind == "silent":
        lib.silence_node(core, node, wait=10)
    elif kind == "gpu-fault":
        lib.set_gpu_fault(core, node, "GPUXidError", wait=None)
    elif kind == "gpu-drop":
        lib.drop_allocatable_gpus(core, node, GPU_DROP_TO)
    else:
        lib.make_node_not_ready(core, node, wait=None)


def restore(core: Any, kind: str, node: str) -> None:
    try:
        if kind == "silent":
            lib.unsilence_node(core, node, wait=None)
        elif kind == "gpu-fault":
            lib.clear_gpu_fault(core, node, wait=None)
        elif kind == "gpu-drop":
            lib.restore_allocatable(core, node)
        else:
            lib.make_node_ready(core, node, wait=None)
    except Exception as exc:
        print(f"  (could not restore {node} after {kind}: {exc})", flush=True)


def spread_zones(core: Any) -> dict[str, str]:
    """Relabel the simulated nodes into ``ZONES`` zones (block ``b`` in zone ``b % ZONES``;
    racks and blocks stay whole); return node -> zone."""
    zones: dict[str, str] = {}
    for node in lib.nodes(core, "type=kwok"):
        labels = node.metadata.labels or {}
        match = re.search(r"(\d+)$", labels.get(BLOCK_LABEL, ""))
        block = int(match.group(1)) if match else 0
        zone = f"zone-{block % ZONES}"
        if labels.get(ZONE_LABEL) != zone:
            core.patch_node(node.metadata.name, {"metadata": {"labels": {ZONE_LABEL: zone}}})
        zones[node.metadata.name] = zone
    return zones


def racks_of(core: Any) -> dict[str, str]:
    return {
        n.metadata.name: (n.metadata.labels or {}).get(RACK_LABEL, "")
        for n in lib.nodes(core, "type=kwok")
    }


def pick_in_racks(nodes: Sequence[str], racks: dict[str, str], k: int) -> list[str]:
    """``k`` of ``nodes``, from as few racks as possible (the fullest rack first)."""
    by_rack: dict[str, list[str]] = {}
    for n in sorted(nodes):
        by_rack.setdefault(racks.get(n, ""), []).append(n)
    chosen: list[str] = []
    for rack in sorted(by_rack, key=lambda r: (-len(by_rack[r]), r)):
        chosen += by_rack[rack][: k - len(chosen)]
        if len(chosen) == k:
            break
    return chosen


# --- vanilla ---------------------------------------------------------------------------------


def indexed_job(
    name: str, system: str, zone: str, grace: int, succeed_after: str | None = None
) -> dict[str, Any]:
    pod = lib.sim_pod(
        "w", gpus=8, node_selector={**H100, ZONE_LABEL: zone}, succeed_after=succeed_after
    )
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": WORKERS,
        "parallelism": WORKERS,
        "template": {
            "metadata": {"labels": {"bench": name}, "annotations": pod["metadata"]["annotations"]},
            "spec": pod["spec"],
        },
    }
    if system in ("tuned", "kueue"):
        pod["spec"]["tolerations"] = [
            {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": grace}
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ]
        spec["backoffLimitPerIndex"] = 6
        spec["podReplacementPolicy"] = "Failed"
        spec["podFailurePolicy"] = {
            "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
        }
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}
    if system == "kueue":
        job = kueue.queued(job, preferred=KUEUE_PREFERRED)
    return job


class Vanilla:
    """Trials on Indexed Jobs, side by side: one Job per trial (the Job controller's backoff
    doubles with each failure of a Job, and a real run's failures are days apart), pinned to
    one zone. Trials that taint nodes take turns per zone, spaced by the eviction rate, so
    that no trial waits in another's queue (a trial's own nodes do queue: that is
    Kubernetes). Kinds Kubernetes takes no action on share Jobs, one trial per node."""

    def __init__(
        self, system: str, core: Any, kubeconfig: str, zones: dict[str, str], args: Any
    ) -> None:
        from kubernetes import client

        self.system = system
        self.core = core
        self.batch = client.BatchV1Api(core.api_client)
        self.args = args
        self.never_after = float(args.never_after)
        self.rate = SHIPPED_EVICTION_RATE if system == "shipped" else TUNED_EVICTION_RATE
        self.zone_size: dict[str, int] = {}
        for zone in zones.values():
            self.zone_size[zone] = self.zone_size.get(zone, 0) + 1
        self.reserved = dict.fromkeys(self.zone_size, 0)
        self.slot_next = dict.fromkeys(self.zone_size, 0.0)
        self.lock = threading.Condition()
        self.ns = lib.create_namespace(core, f"bench-{system}")
        self.watch = PodWatch(core).start()
        self.max_jobs = args.vanilla_jobs
        self.racks = racks_of(core)
        # Job name -> what the system did for it (set for Kueue: its Workload's evictions).
        self.outcome_of: Callable[[str], str] | None = None

    def note(self, trial: Trial, job: str) -> None:
        if self.outcome_of is None or trial.t_fail is None:
            return
        try:
            trial.outcome = self.outcome_of(job)
        except Exception as exc:
            log(self.system, f"could not read what became of {job}: {exc}")

    # zones: room for a Job, turns for taints

    def take_zone(self, nodes: int) -> str:
        with self.lock:
            while True:
                free = {z: self.zone_size[z] - self.reserved[z] for z in self.zone_size}
                best = max(sorted(free), key=lambda z: free[z])
                if free[best] >= nodes:
                    self.reserved[best] += nodes
                    return best
                self.lock.wait(1.0)

    def give_zone(self, zone: str, nodes: int) -> None:
        with self.lock:
            self.reserved[zone] -= nodes
            self.lock.notify_all()

    def take_turn(self, zone: str, taints: int, silent: bool) -> None:
        """Wait for the zone's turn; hold it for as long as the eviction rate needs to taint
        ``taints`` nodes (a silent node's taint comes up to 10 s later or earlier: its last
        Lease renewal was up to 10 s before it went silent)."""
        hold = taints / self.rate + (2 * 10.0 if silent else 0.0) + 1.0
        with self.lock:
            while now() < self.slot_next[zone]:
                self.lock.wait(min(1.0, self.slot_next[zone] - now()))
            self.slot_next[zone] = now() + hold

    # one Job

    def start_job(
        self, name: str, zone: str, succeed_after: str | None = None
    ) -> list[PodView] | None:
        self.create_job(indexed_job(name, self.system, zone, self.args.grace, succeed_after))

        def running() -> list[PodView] | None:
            pods = self.job_pods(name, lambda p: p.phase == "Running" and not p.deleting)
            return pods if len(pods) == WORKERS else None

        return wait_for(running, 300, interval=0.25)

    def create_job(self, manifest: dict[str, Any]) -> None:
        """Create the Job of ``manifest``. The client's ``validate_call`` turns a dict body
        into a V1Job anyway; doing it here, where mypy sees it, sends the same request."""
        from kubernetes import client

        self.batch.create_namespaced_job(self.ns, client.V1Job.model_validate(manifest))

    def job_pods(self, job: str, pred: Callable[[PodView], bool]) -> list[PodView]:
        return self.watch.select(self.ns, job, pred)

    def delete_job(self, name: str) -> None:
        try:
            self.batch.delete_namespaced_job(name, self.ns, propagation_policy="Background")
        except Exception as exc:
            log(self.system, f"could not delete Job {name}: {exc}")

    def replaced(
        self, job: str, lost: dict[str, str], failed: set[str], since: float
    ) -> float | None:
        """When every lost index (index -> old uid) has a new pod Running on a node that is
        not failed: the latest of those moments, or None."""
        latest = since
        for index, old_uid in lost.items():

            def new_and_running(p: PodView, i: str = index, u: str = old_uid) -> bool:
                return (
                    p.annotations.get(INDEX) == i
                    and p.uid != u
                    and p.running_at is not None
                    and p.phase == "Running"
                    and not p.deleting
                    and p.node not in failed
                )

            fresh = self.job_pods(job, new_and_running)
            if not fresh:
                return None
            latest = max(latest, min(p.running_at or since for p in fresh))
        return latest

    def wait_replaced(
        self, job: str, lost: dict[str, str], failed: set[str], t_fail: float
    ) -> float | None:
        deadline = t_fail + self.never_after
        while now() < deadline:
            got = self.replaced(job, lost, failed, t_fail)
            if got is not None:
                return got
            time.sleep(0.25)
        return None

    # trials

    def single(self, trial: Trial) -> None:
        k = VICTIMS.get(trial.kind, 1)
        zone = self.take_zone(WORKERS + k)
        try:
            pods = self.start_job(trial.name, zone)
            if pods is None:
                trial.error = "the Job's pods did not all run within 300 s"
                return
            racks = self.racks
            victims = pick_in_racks([p.node or "" for p in pods], racks, k)
            lost = {p.annotations.get(INDEX, "?"): p.uid for p in pods if p.node in victims}
            self.take_turn(zone, k, trial.kind == "silent")
            for node in victims:
                inject(self.core, trial.kind, node)
                if trial.t_fail is None:
                    trial.t_fail = now()
            trial.victims = victims
            assert trial.t_fail is not None
            trial.t_running = self.wait_replaced(trial.name, lost, set(victims), trial.t_fail)
            self.report(trial)
        finally:
            self.note(trial, trial.name)
            for node in trial.victims:
                restore(self.core, trial.kind, node)
            self.delete_job(trial.name)
            self.give_zone(zone, WORKERS + k)

    def shared(self, trials: list[Trial]) -> None:
        """Up to 8 trials of a kind Kubernetes takes no action on, one per node of a Job;
        each is still watched for a replacement of its own index."""
        name = trials[0].name
        zone = self.take_zone(WORKERS)
        try:
            pods = self.start_job(name, zone)
            if pods is None:
                for trial in trials:
                    trial.error = "the Job's pods did not all run within 300 s"
                return
            pods = sorted(pods, key=lambda p: p.node or "")
            lost: dict[str, tuple[Trial, str]] = {}
            for trial, pod in zip(trials, pods, strict=False):
                inject(self.core, trial.kind, pod.node or "")
                trial.t_fail = now()
                trial.victims = [pod.node or ""]
                lost[pod.annotations.get(INDEX, "?")] = (trial, pod.uid)
            failed = {t.victims[0] for t in trials if t.victims}
            deadline = max(t.t_fail or 0 for t in trials) + self.never_after
            open_ = dict(lost)
            while open_ and now() < deadline:
                for index, (trial, uid) in list(open_.items()):
                    assert trial.t_fail is not None
                    got = self.replaced(name, {index: uid}, failed, trial.t_fail)
                    if got is not None and got - trial.t_fail <= self.never_after:
                        trial.t_running = got
                        del open_[index]
                time.sleep(0.5)
            for trial in trials:
                self.report(trial)
        finally:
            for trial in trials:
                self.note(trial, name)
                for node in trial.victims:
                    restore(self.core, trial.kind, node)
            self.delete_job(name)
            self.give_zone(zone, WORKERS)

    def boundary(self, trial: Trial) -> None:
        """Phase 1 is a Job whose pods end after ``PHASE1_S``; the moment they all have, a
        node of it reports NotReady and phase 2, a second Job, is created (as a workflow
        engine would, at once); measured to phase 2's 8 pods Running, none on that node."""
        zone = self.take_zone(WORKERS + 1)
        first, second = f"{trial.name}-p1", f"{trial.name}-p2"
        try:
            pods = self.start_job(first, zone, succeed_after=f"{PHASE1_S}s")
            if pods is None:
                trial.error = "phase 1's pods did not all run within 300 s"
                return
            victim = sorted(p.node or "" for p in pods)[0]
            self.take_turn(zone, 1, False)

            def ended() -> bool:
                done = self.job_pods(first, lambda p: p.phase == "Succeeded")
                return len({p.annotations.get(INDEX) for p in done}) == WORKERS

            if not wait_for(ended, PHASE1_S + 120, interval=0.05):
                trial.error = "phase 1 did not end"
                return
            inject(self.core, trial.kind, victim)
            trial.t_fail = now()
            trial.victims = [victim]
            self.create_job(indexed_job(second, self.system, zone, self.args.grace))

            def all_running() -> float | None:
                pods = self.job_pods(
                    second,
                    lambda p: p.phase == "Running" and not p.deleting and p.node != victim,
                )
                if len({p.annotations.get(INDEX) for p in pods}) < WORKERS:
                    return None
                return max(p.running_at or now() for p in pods)

            got = wait_for(all_running, self.never_after, interval=0.1)
            trial.t_running = got
            self.report(trial)
        finally:
            self.note(trial, second)
            for node in trial.victims:
                restore(self.core, trial.kind, node)
            self.delete_job(first)
            self.delete_job(second)
            self.give_zone(zone, WORKERS + 1)

    def report(self, trial: Trial) -> None:
        shown = f"{trial.seconds:.1f}s" if trial.seconds is not None else "not recovered"
        log(self.system, f"{trial.kind} {trial.name} {','.join(trial.victims)}: {shown}")

    def run(self, kinds: Sequence[str], trials: int) -> list[Trial]:
        work: list[Callable[[], None]] = []
        results: list[Trial] = []
        # The longest first: the shared Jobs (they wait out the cut-off), then the kinds that
        # wait for evictions, their trials interleaved, then the phase boundaries.
        made = {k: [Trial(self.system, k, f"{k}-{i}") for i in range(trials)] for k in kinds}
        for kind in kinds:
            results += made[kind]
        for kind in ("gpu-fault", "gpu-drop"):
            for start in range(0, len(made.get(kind, [])), WORKERS):
                group = made[kind][start : start + WORKERS]
                work.append(functools.partial(self.shared, group))
        evicting = [k for k in kinds if k not in ("gpu-fault", "gpu-drop", "phase-boundary")]
        for i in range(trials):
            work += [functools.partial(self.single, made[k][i]) for k in evicting]
        work += [functools.partial(self.boundary, t) for t in made.get("phase-boundary", [])]
        run_all(self.system, work, self.max_jobs)
        self.watch.stop()
        return results


def run_all(system: str, work: list[Callable[[], None]], width: int) -> None:
    """Run ``work`` on ``width`` threads; a failing item is logged, never fatal."""
    queue = list(reversed(work))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                item = queue.pop()
            try:
                item()
            except Exception:
                log(system, "trial failed:\n" + traceback.format_exc())

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(width)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# --- Phased ----------------------------------------------------------------------------------

GROUP, VERSION, PLURAL = "phased.dev", "v1alpha1", "trainingjobs"


def training_job(name: str, grace: int, two_phases: bool = False) -> dict[str, Any]:
    phase = {"nodes": {"min": WORKERS, "max": WORKERS}, "gpuTypes": ["H100"], "gpusPerNode": 8}
    phases = [{"name": "train", **phase}]
    if two_phases:
        phases = [
            {
                "name": "first",
                **phase,
                "template": {"annotations": {lib.SUCCEED_AFTER: f"{PHASE1_S}s"}},
            },
            {"name": "second", **phase},
        ]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "registry.k8s.io/pause:3.10"},
            "phases": phases,
            "spares": {"count": SPARES},
            "failurePolicy": {
                "notReadyGrace": f"{grace}s",
                "gpuFaultGrace": "0s",
                "gpuDropGrace": f"{grace}s",
                "restartScope": "Gang",
                "restartBudget": 1000,
                "interruptionBudget": "12h",
                # Trials fail nodes of the same job one after the other, every 15-25 s, and
                # a rack is 4 of its 10 nodes: the breaker (20 % within 5 minutes by
                # default) would rightly stop automatic action and wait for a person. With a
                # 1 m window three rack trials in a row still counted 12 failed nodes and
                # tripped it (6 of 24 rack trials "never" recovered in a run of 2026-12-01).
                # Each trial here is an independent failure: the window holds only its own.
                "massFailure": {"maxFailedPercent": 100, "window": "1s"},
            },
        },
    }


class PhasedSide:
    """Trials on TrainingJobs: ``PHASED_LANES`` lanes per kind side by side, each a
    TrainingJob (a namespace of its own) taking its trials one after the other; a
    phase-boundary trial is a fresh two-phase TrainingJob."""

    def __init__(self, core: Any, kubeconfig: str, args: Any) -> None:
        from kubernetes import client

        self.core = core
        self.custom = client.CustomObjectsApi(core.api_client)
        self.kubectl = lib.Kubectl(kubeconfig)
        self.kubeconfig = kubeconfig
        self.never_after = float(args.phased_never_after)
        self.args = args
        self.watch = PodWatch(core).start()
        self.racks = racks_of(core)

    def status(self, ns: str, name: str) -> dict[str, Any]:
        try:
            obj = self.custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
        except Exception:
            return {}
        if not isinstance(obj, dict):  # the client types custom objects as plain `object`
            raise TypeError(f"TrainingJob {ns}/{name}: not a JSON object: {type(obj).__name__}")
        return dict(obj.get("status") or {})

    def create(self, ns: str, body: dict[str, Any]) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)

    def workers(self, ns: str, job: str, phase: str | None = None) -> list[PodView]:
        return self.watch.select(
            ns,
            job,
            lambda p: (
                "phased.dev/rank" in p.labels
                and not p.deleting
                and (phase is None or p.labels.get("phased.dev/phase") == phase)
            ),
        )

    def steady(self, ns: str, name: str) -> bool:
        running = [p for p in self.workers(ns, name) if p.phase == "Running"]
        if len(running) != WORKERS:
            return False
        st = self.status(ns, name)
        return (
            st.get("state") == "Running"
            and len((st.get("pool") or {}).get("spares") or []) == SPARES
            and not st.get("suspects")
        )

    def ledger(self, ns: str, name: str, victims: Iterable[str]) -> list[dict[str, Any]]:
        want = set(victims)

        def entries() -> list[dict[str, Any]] | None:
            found = [
                dict(e)
                for e in self.status(ns, name).get("failures") or []
                if e.get("node") in want
            ]
            done = {e["node"] for e in found if e.get("resumed")}
            return found if done == want else None

        return wait_for(entries, 30, interval=0.5) or []

    def settled(self, ns: str, name: str, where: str) -> list[PodView] | None:
        """The job's 8 running workers, once it has been steady for a second (None: not
        within 180 s). A job that changed in that second (a worker gone, a restart) is
        waited for again, and the log says so."""
        deadline = now() + 180
        while now() < deadline:
            if not wait_for(lambda: self.steady(ns, name), deadline - now(), interval=0.5):
                return None
            time.sleep(1.0)
            running = [p for p in self.workers(ns, name) if p.phase == "Running"]
            if len(running) == WORKERS and self.steady(ns, name):
                return running
            log("phased", f"{where}: {len(running)} workers running a second after steady; again")
        return None

    def lane(self, kind: str, lane: int, trials: list[Trial]) -> None:
        ns = lib.create_namespace(self.core, f"phased-{kind}-{lane}")
        name = "bench"
        self.create(ns, training_job(name, self.args.grace))
        k = VICTIMS.get(kind, 1)
        try:
            for trial in trials:
                running = self.settled(ns, name, f"{kind}/{lane}")
                if running is None:
                    trial.error = "the job was not back to Running with 8 workers and 2 spares"
                    log("phased", f"{kind}/{lane}: {trial.error}; lane stops")
                    for rest in trials[trials.index(trial) :]:
                        rest.error = rest.error or trial.error
                    return
                victims = pick_in_racks([p.node or "" for p in running], self.racks, k)
                lost = {p.labels["phased.dev/rank"]: p.uid for p in running if p.node in victims}
                for node in victims:
                    inject(self.core, kind, node)
                    if trial.t_fail is None:
                        trial.t_fail = now()
                trial.victims = victims
                assert trial.t_fail is not None
                failed = set(victims)

                def replaced(
                    lost: dict[str, str] = lost, failed: set[str] = failed
                ) -> float | None:
                    latest = 0.0
                    for rank, uid in lost.items():
                        fresh = [
                            p
                            for p in self.workers(ns, name)
                            if p.labels.get("phased.dev/rank") == rank
                            and p.uid != uid
                            and p.phase == "Running"
                            and p.running_at is not None
                            and p.node not in failed
                        ]
                        if not fresh:
                            return None
                        latest = max(latest, min(p.running_at or 0.0 for p in fresh))
                    return latest

                trial.t_running = wait_for(
                    replaced, self.never_after - (now() - trial.t_fail), interval=0.05
                )
                if trial.t_running is not None:
                    trial.ledger = self.ledger(ns, name, victims)
                self.report(trial)
                # Healthy again, in the background; it stays quarantined (nodeReturn).
                for node in victims:
                    threading.Thread(
                        target=restore, args=(self.core, kind, node), daemon=True
                    ).start()
        finally:
            self.delete(ns, name)

    def boundary_lane(self, lane: int, trials: list[Trial]) -> None:
        ns = lib.create_namespace(self.core, f"phased-boundary-{lane}")
        for trial in trials:
            name = trial.name
            self.create(ns, training_job(name, self.args.grace, two_phases=True))
            try:

                def first_running(n: str = name) -> list[PodView] | None:
                    pods = [p for p in self.workers(ns, n, "first") if p.phase == "Running"]
                    return pods if len(pods) == WORKERS else None

                first = wait_for(first_running, 180, interval=0.25)
                if not first:
                    trial.error = "the first phase's 8 workers did not run within 180 s"
                    self.report(trial)
                    continue
                victim = sorted(p.node or "" for p in first)[0]

                done_ranks: set[str] = set()  # Phased may delete an ended worker at once

                def ended(n: str = name, done: set[str] = done_ranks) -> bool:
                    for p in self.watch.select(ns, n):
                        if p.labels.get("phased.dev/phase") == "first" and p.phase == "Succeeded":
                            done.add(p.labels.get("phased.dev/rank", ""))
                    return len(done) == WORKERS

                if not wait_for(ended, PHASE1_S + 120, interval=0.05):
                    trial.error = "the first phase did not end"
                    self.report(trial)
                    continue
                inject(self.core, trial.kind, victim)
                trial.t_fail = now()
                trial.victims = [victim]

                def second_running(n: str = name, v: str = victim) -> float | None:
                    pods = [
                        p
                        for p in self.workers(ns, n, "second")
                        if p.phase == "Running" and p.node != v
                    ]
                    if len({p.labels.get("phased.dev/rank") for p in pods}) < WORKERS:
                        return None
                    return max(p.running_at or now() for p in pods)

                trial.t_running = wait_for(second_running, self.never_after, interval=0.05)
                if trial.t_running is not None:
                    trial.ledger = self.ledger(ns, name, [victim])
                self.report(trial)
            finally:
                self.delete(ns, name)
                for node in trial.victims:
                    restore(self.core, trial.kind, node)
                # The next trial's job claims from what this one gives back.

                def gone(n: str = name) -> bool:
                    return not self.status(ns, n)

                wait_for(gone, 60, interval=0.5)

    def delete(self, ns: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
        except Exception as exc:
            log("phased", f"could not delete {ns}/{name}: {exc}")

    def report(self, trial: Trial) -> None:
        shown = f"{trial.seconds:.1f}s" if trial.seconds is not None else "not recovered"
        if trial.error:
            shown += f" ({trial.error})"
        log("phased", f"{trial.kind} {trial.name} {','.join(trial.victims)}: {shown}")

    def run(self, kinds: Sequence[str], trials: int) -> list[Trial]:
        self.kubectl("apply", "-f", str(CRD))

        lib.wait_until(lambda: crd_established(self.kubectl), 60, message="the CRD Established")
        logfile = Path(tempfile.gettempdir()) / "phased-bench-recovery-operator.log"
        operator = Operator(self.kubeconfig, logfile).start()
        results: list[Trial] = []
        work: list[Callable[[], None]] = []
        try:
            for kind in kinds:
                made = [Trial("phased", kind, f"{kind}-{i}") for i in range(trials)]
                results += made
                lanes = max(1, min(PHASED_LANES[kind], trials))
                for lane in range(lanes):
                    mine = made[lane::lanes]
                    if kind == "phase-boundary":
                        work.append(functools.partial(self.boundary_lane, lane, mine))
                    else:
                        work.append(functools.partial(self.lane, kind, lane, mine))
            run_all("phased", work, len(work))
        finally:
            operator.stop()
            self.watch.stop()
        return results


# --- report ----------------------------------------------------------------------------------


def cutoff_of(system: str, args: Any) -> float:
    return float(args.phased_never_after if system == "phased" else args.never_after)


@dataclass
class Measured:
    """What one system measured, enough to write its rows again. The section keeps it as a
    data line, so that a later run of other systems (``--systems kueue``) keeps these rows
    instead of erasing them; ``date`` and ``command`` say which run measured them."""

    system: str
    cutoff: float
    seconds: dict[str, list[float | None]]  # kind -> each trial's seconds (None: not within)
    not_run: dict[str, int]  # kind -> trials that could not run (an error, not a timing)
    run: str  # nodes, minutes, load
    breakdown: list[list[object]] = field(default_factory=list)  # Phased's ledger rows
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> what it did
    date: str = ""
    command: str = ""

    @classmethod
    def of(cls, system: str, trials: Sequence[Trial], cutoff: float, run: str) -> Measured:
        seconds: dict[str, list[float | None]] = {}
        not_run: dict[str, int] = {}
        outcomes: dict[str, dict[str, int]] = {}
        for t in trials:
            if t.outcome is not None:
                counts = outcomes.setdefault(t.kind, {})
                counts[t.outcome] = counts.get(t.outcome, 0) + 1
            seconds.setdefault(t.kind, [])
            not_run.setdefault(t.kind, 0)
            if t.error is not None:
                not_run[t.kind] += 1
            else:
                seconds[t.kind].append(None if t.seconds is None else round(t.seconds, 2))
        return cls(
            system=system,
            cutoff=cutoff,
            seconds=seconds,
            not_run=not_run,
            run=run,
            breakdown=breakdown(trials) if system == "phased" else [],
            outcomes=outcomes,
            date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            command=command_line(),
        )

    def data_line(self) -> str:
        return f"<!-- {DATA_MARK} {json.dumps(asdict(self), separators=(',', ':'))} -->"

    @classmethod
    def from_data(cls, text: str) -> Measured:
        raw = json.loads(text)
        return cls(**raw)


DATA_MARK = "recovery-data"


def measured_in(section: str) -> dict[str, Measured]:
    """The systems a written section measured (its data lines); unreadable lines are
    skipped (the rows they stood for are then not kept)."""
    found: dict[str, Measured] = {}
    for match in re.finditer(rf"<!-- {DATA_MARK} (.*?) -->", section):
        try:
            m = Measured.from_data(match.group(1))
        except (ValueError, TypeError):
            continue
        if m.system in SYSTEMS:
            found[m.system] = m
    return found


def merged(
    now_measured: Mapping[str, Measured], earlier: Mapping[str, Measured], running: Iterable[str]
) -> dict[str, Measured]:
    """This run's systems, and the earlier section's for every system this run does not run
    (a system this run runs never keeps its earlier rows, even if it is not finished)."""
    skip = set(running) | set(now_measured)
    return {**{s: m for s, m in earlier.items() if s not in skip}, **now_measured}


def ranked(values: Iterable[float | None]) -> list[float]:
    """Recovery seconds, a trial not recovered as infinity (it sorts last)."""
    return sorted(v if v is not None else math.inf for v in values)


def cell(values: Sequence[float], p: float, cutoff: float) -> str:
    """The ``p``-th percentile by nearest rank; "max" when that is just the largest value
    (too few trials for that percentile); "> N" when it falls on a trial not recovered."""
    if not values:
        return "-"
    n = len(values)
    v = values[nearest_rank(n, p) - 1]
    if is_max_rank(n, p):
        return "max"
    return f"> {cutoff:.0f}" if math.isinf(v) else f"{v:.1f}"


def row_for(m: Measured, kind: str) -> list[object]:
    values = ranked(m.seconds.get(kind, []))
    cutoff = m.cutoff
    missed = sum(1 for v in values if math.isinf(v))
    errors = m.not_run.get(kind, 0)
    count = f"{len(values)}" + (f" ({errors} not run)" if errors else "")
    if values and missed == len(values):
        shown = f"never within {cutoff:.0f} s"
        return [kind, SYSTEMS[m.system], count, shown, "", "", "", ""]
    worst = values[-1] if values else float("nan")
    worst_s = f"> {cutoff:.0f}" if math.isinf(worst) else f"{worst:.1f}"
    return [
        kind,
        SYSTEMS[m.system],
        count,
        cell(values, 50, cutoff),
        cell(values, 90, cutoff),
        cell(values, 99, cutoff),
        worst_s,
        f"{missed} not within {cutoff:.0f} s" if missed else "",
    ]


def median_of(m: Measured | None, kind: str) -> float:
    values = ranked(m.seconds.get(kind, [])) if m else []
    if not values:
        return float("nan")
    return values[nearest_rank(len(values), 50) - 1]


def ratio_to(base: float, med: float) -> str:
    if math.isnan(base) or math.isnan(med):
        return ""
    if math.isinf(med) and math.isinf(base):
        return "both never"
    if math.isinf(med):
        return "never vs Phased"
    if math.isinf(base):
        return "Phased never"
    return f"{med / base:.1f}x"


def breakdown(trials: Sequence[Trial]) -> list[list[object]]:
    """Phased's time per kind from its ledger: the trial's earliest ``detected``, latest
    ``cordoned``, ``replaced`` and ``resumed`` over the nodes it lost."""
    rows: list[list[object]] = []
    kinds = list(dict.fromkeys(t.kind for t in trials))
    for kind in kinds:
        parts: dict[str, list[float]] = {k: [] for k in ("fd", "dc", "cr", "rs", "sr", "all")}
        for t in trials:
            if t.kind != kind or not t.ledger or t.t_fail is None or t.t_running is None:
                continue
            det = [parse_ts(e.get("detected")) for e in t.ledger]
            cor = [parse_ts(e.get("cordoned")) for e in t.ledger]
            rep = [parse_ts(e.get("replaced")) for e in t.ledger]
            res = [parse_ts(e.get("resumed")) for e in t.ledger]
            if any(x is None for x in det + cor + rep + res):
                continue
            d = min(x for x in det if x is not None)
            c = max(x for x in cor if x is not None)
            r = max(x for x in rep if x is not None)
            s = max(x for x in res if x is not None)
            parts["fd"].append(d - t.t_fail)
            parts["dc"].append(c - d)
            parts["cr"].append(r - c)
            parts["rs"].append(s - r)
            parts["sr"].append(t.t_running - s)
            parts["all"].append(t.t_running - t.t_fail)
        n = len(parts["all"])
        if not n:
            rows.append([kind, 0, "-", "-", "-", "-", "-", "-"])
            continue

        def med(values: list[float]) -> str:
            ordered = sorted(values)
            return f"{ordered[nearest_rank(len(ordered), 50) - 1]:.2f}"

        rows.append(
            [
                kind,
                n,
                med(parts["fd"]),
                med(parts["dc"]),
                med(parts["cr"]),
                med(parts["rs"]),
                med(parts["sr"]),
                med(parts["all"]),
            ]
        )
    return rows


def section_key(grace: int) -> str:
    """The section of bench/RESULTS.md a run at ``grace`` writes: one per grace, so a run at
    another grace never mixes its rows with those of the default."""
    return "recovery" if grace == GRACE_S else f"recovery-grace-{grace}s"


def section_title(grace: int) -> str:
    if grace == GRACE_S:
        return "3. Recovery: Phased against vanilla Kubernetes and Kueue"
    return f"3b. Recovery at a {grace} s grace on every side: Phased against vanilla and Kueue"


def settings_table(systems: Sequence[str], grace: int) -> str:
    """The settings of each system shown, one column each (equal graces wherever a system
    has the knob)."""
    delay = kueue.NODE_FAILURE_DELAY_S
    by_setting: dict[str, dict[str, str]] = {
        "kube-controller-manager --node-monitor-grace-period": {
            "phased": f"{NODE_MONITOR_GRACE_S} s",
            "shipped": f"{SHIPPED_KCM_GRACE_S} s (default)",
            "tuned": f"{NODE_MONITOR_GRACE_S} s",
            "kueue": f"{NODE_MONITOR_GRACE_S} s",
        },
        "kube-controller-manager --node-eviction-rate (nodes/s per zone)": {
            "phased": f"{SHIPPED_EVICTION_RATE} (default; Phased does not wait for evictions)",
            "shipped": f"{SHIPPED_EVICTION_RATE} (default)",
            "tuned": f"{TUNED_EVICTION_RATE}",
            "kueue": f"{TUNED_EVICTION_RATE}",
        },
        "grace for a NotReady/Unknown node": {
            "phased": f"notReadyGrace {grace} s",
            "shipped": f"tolerationSeconds {SHIPPED_TOLERATION_S} s (added by the API server)",
            "tuned": f"tolerationSeconds {grace} s",
            "kueue": (
                f"tolerationSeconds {grace} s; Kueue counts the node failed once the pods "
                "on it have ended (TASReplaceNodeOnPodTermination), else after its fixed "
                f"{delay} s NodeFailureDelay (no knob)"
            ),
        },
        "grace for a GPU-fault condition": {
            "phased": "gpuFaultGrace 0 s (default)",
            "shipped": "no knob",
            "tuned": "no knob",
            "kueue": "no knob (Kueue reads only Ready and taints)",
        },
        "grace for lost allocatable GPUs": {
            "phased": f"gpuDropGrace {grace} s",
            "shipped": "no knob",
            "tuned": "no knob",
            "kueue": "no knob",
        },
        "placement": {
            "phased": f"its own pool: {WORKERS} nodes and {SPARES} spares",
            "shipped": "kube-scheduler, nodeSelector on one zone",
            "tuned": "kube-scheduler, nodeSelector on one zone",
            "kueue": (
                "nodeSelector on one zone; TAS podset-preferred-topology rack (Topology: "
                "block, rack, hostname); a ClusterQueue with every GPU as quota"
            ),
        },
        "replacement": {
            "phased": f"Gang restart onto {SPARES} spares, refilled from free nodes",
            "shipped": "Job controller, podReplacementPolicy TerminatingOrFailed, backoffLimit 6",
            "tuned": (
                "Job controller, podReplacementPolicy Failed, podFailurePolicy Ignore "
                "DisruptionTarget, backoffLimitPerIndex 6"
            ),
            "kueue": (
                "as tuned, and Kueue's failed-node replacement (TASFailedNodeReplacement): "
                "a new node in the topology assignment for the lost pods; a second failed "
                "node, or no replacement at the first try (TASFailedNodeReplacementFailFast), "
                "evicts the workload, which is queued and admitted afresh"
            ),
        },
        "pod failure backoff (10 s, doubling)": {
            "phased": "none",
            "shipped": "per Job (not configurable)",
            "tuned": "per index (backoffLimitPerIndex)",
            "kueue": "per index (backoffLimitPerIndex)",
        },
        "blast-radius breaker": {
            "phased": "massFailure.maxFailedPercent 100 (default 20: see below)",
            "shipped": "no such thing",
            "tuned": "no such thing",
            "kueue": "no such thing (waitForPodsReady off)",
        },
    }
    shown = [s for s in SYSTEMS if s in systems]
    rows = [[name, *(values[s] for s in shown)] for name, values in by_setting.items()]
    return table(["setting", *(SYSTEMS[s] for s in shown)], rows)


def write_report(
    args: Any,
    systems: Sequence[str],
    kinds: Sequence[str],
    results: dict[str, list[Trial]],
    runs: dict[str, str],
    started: float,
    load_before: str,
) -> None:
    """Print the tables and notes; write the section (after each system, so that a run cut
    short still leaves what it measured, marked as unfinished). The rows of systems this run
    does not run are kept from the section as written before (merge), with the date and
    command that measured them."""
    now_measured = {
        s: Measured.of(s, results[s], cutoff_of(s, args), runs.get(s, "not finished"))
        for s in systems
        if s in results
    }
    shown = merged(now_measured, measured_in(read_section(section_key(args.grace)) or ""), systems)
    order = [s for s in SYSTEMS if s in shown]
    all_kinds = [k for k in KINDS if k in kinds or any(k in m.seconds for m in shown.values())]
    rows = []
    for kind in all_kinds:
        base = median_of(shown.get("phased"), kind)
        for system in order:
            m = shown[system]
            if kind not in m.seconds:
                continue
            ratio = "" if system == "phased" else ratio_to(base, median_of(m, kind))
            rows.append([*row_for(m, kind), ratio])
    text = table(
        [
            "failure",
            "system",
            "trials",
            "p50 s",
            "p90 s",
            "p99 s",
            "max s",
            "not recovered",
            "p50 vs Phased",
        ],
        rows,
    )
    parts = ""
    if "phased" in shown and shown["phased"].breakdown:
        parts = table(
            [
                "failure",
                "trials with a ledger",
                "injection -> detected",
                "detected -> cordoned",
                "cordoned -> replaced",
                "replaced -> resumed",
                "resumed -> bench sees Running",
                "total",
            ],
            shown["phased"].breakdown,
        )
    minutes = (now() - started) / 60
    ledger_intro = (
        "Phased's time from its failure ledger (medians, seconds). `detected` is the node "
        "condition's transition time, which the API keeps in whole seconds."
    )
    per_run_lines = []
    for s in [s for s in SYSTEMS if s in systems or s in shown]:
        if s in systems:
            per_run_lines.append(f"- {SYSTEMS[s]}: {runs.get(s, 'not finished')}")
        else:
            m = shown[s]
            per_run_lines.append(
                f"- {SYSTEMS[s]}: {m.run}; kept from an earlier run ({m.date}, `{m.command}`)"
            )
    per_run = "\n".join(per_run_lines)
    not_run = [s for s in SYSTEMS if s not in systems and s not in shown]
    kinds_not_run = [k for k in KINDS if k not in all_kinds]
    unfinished = [SYSTEMS[s] for s in systems if s not in runs]
    warning = (
        f"**Unfinished run: {', '.join(unfinished)} not measured (yet).**\n" if unfinished else ""
    )
    kept = [SYSTEMS[s] for s in order if s not in systems]
    kept_note = (
        f"Rows of {', '.join(kept)} are kept from an earlier run of this section (see below "
        "for when and how); this run measured "
        f"{', '.join(SYSTEMS[s] for s in systems)}.\n"
        if kept
        else ""
    )
    gates = ", ".join(f"{g}={v}" for g, v in kueue.FEATURE_GATES.items())
    kueue_note = ""
    if "kueue" in shown:
        said = (
            f"Kueue: the tuned Jobs, each with the `{kueue.QUEUE_LABEL}` label of a LocalQueue "
            f"and `{kueue.PREFERRED_TOPOLOGY}: {KUEUE_PREFERRED}`, run the same way (zones, "
            "turns, shared Jobs). Kueue runs as a local process (`bench/kueue.py`: webhooks on "
            "127.0.0.1, the Job integration only, leader election off) with the gates "
            f"{gates}. Its node replacement waits for the lost pods to end (or for the node "
            f"to be NotReady for {kueue.NODE_FAILURE_DELAY_S} s) and replaces one failed node "
            "per workload: when it finds no replacement at the first try (FailFast), or a "
            "second node of the workload fails, it evicts the workload (all its pods go; it "
            "is queued and admitted afresh with a new topology assignment). It reads the "
            "node's Ready condition and taints, not other conditions or allocatable. What it "
            "did, per trial (its Workload's `status.schedulingStats.evictions` when the "
            "trial ended):"
        )
        wrapped = textwrap.fill(said, 92, initial_indent="- ", subsequent_indent="  ")
        kueue_note = f"{wrapped}\n\n{outcome_table(shown['kueue'])}\n\n"
    lanes = ", ".join(f"{k} {PHASED_LANES[k]}" for k in all_kinds)
    width = sum(PHASED_LANES[k] for k in all_kinds)
    phased_note = (
        f"""- Phased: lanes of TrainingJobs side by side ({lanes}), each taking its trials one after
  the other once the job is back to 8 workers Running and 2 spares; one operator process
  for all of them, so the operator and the 2 CPUs are shared by up to {width} jobs at
  once. Failed nodes stay quarantined (nodeReturn Quarantine); the bench gives them back
  their health right after the trial. With the breaker at its default (20 % of the pool
  within 5 minutes), a rack (4 of 10 nodes) or the third failure within 5 minutes stops
  automatic action until a person says `phased proceed`: by design, not measured here.
"""
        if "phased" in shown
        else ""
    )
    vanilla_note = (
        f"""- Vanilla: one Indexed Job per trial (up to {args.vanilla_jobs} at once), pinned to
  one of {ZONES} zones by a nodeSelector, as a training job is for its network; two-nodes
  and rack fail nodes of that zone. The node lifecycle controller taints nodes NoExecute at
  `--node-eviction-rate` per zone, so trials that taint nodes take turns per zone (no trial
  waits behind another's nodes; a rack's own 4 nodes do queue, as they would). gpu-fault
  and gpu-drop trials share Jobs, one trial per node (Kubernetes takes no action on
  either). phase-boundary: phase 1 is a Job whose pods end after {PHASE1_S} s; the moment
  all have, a node it used reports NotReady and phase 2 is created at once, as a workflow
  engine would (the engine's own delay is not counted).
"""
        if any(s in shown for s in ("shipped", "tuned", "kueue"))
        else ""
    )
    body = f"""
{warning}{kept_note}Injection -> the replacement worker of every lost rank Running on a healthy
node (wall clock, the bench's own watch of the pods). {args.trials} trials per cell in this run (the
trials column says how many each row had); percentiles by nearest rank; "max" where the
percentile needs more trials than there are (p99 needs 100, p90 needs 10); a trial not
recovered within the cut-off ({args.never_after:.0f} s vanilla and Kueue,
{args.phased_never_after:.0f} s Phased) counts as slower than any other.
{"Not run: " + ", ".join(SYSTEMS[s] for s in not_run) + "." if not_run else ""}
{"Kinds not run: " + ", ".join(kinds_not_run) + "." if kinds_not_run else ""}

{text}

Failure kinds: {"; ".join(f"**{k}**: {KINDS[k]}" for k in all_kinds)}.

Each system on a fresh cluster instance of its own, nothing else in it:
{per_run}

Settings (equal graces wherever both sides have the knob):

{settings_table(order or systems, args.grace)}

{ledger_intro if parts else ""}

{parts}

How the trials ran:
{phased_note}{vanilla_note}{kueue_note}- A silent node: kwok stops renewing its Lease and stops
  playing its pods, so a pod being deleted there stays Terminating (a dead kubelet never
  confirms); `podReplacementPolicy: Failed` then waits for ever, and Phased force-deletes.
  A node that reports NotReady: kwok plays a kubelet that still stops the pods it is told
  to delete (phase Failed at once).
- All: {WORKERS} workers on {WORKERS} 8-GPU nodes per job; whole run {minutes:.0f} min,
  load average before {load_before}, after {load_average()}.

{chr(10).join(shown[s].data_line() for s in order)}
"""
    print(body)
    if not args.no_write:
        write_section(
            section_key(args.grace),
            section_title(args.grace),
            body,
            details={"Trials per cell": f"{args.trials} (this run)"},
        )


def outcome_table(m: Measured) -> str:
    rows = [
        [kind, outcome, count]
        for kind in KINDS
        for outcome, count in sorted(m.outcomes.get(kind, {}).items())
    ]
    return table(["failure", "what it did", "trials"], rows) if rows else "(not recorded)"


def kueue_version() -> str:
    return kueue.bin_dir().name.removeprefix("kueue-")


def run_kueue(
    core: Any,
    cluster: BenchCluster,
    zones: dict[str, str],
    nodes: int,
    args: Any,
    kinds: Sequence[str],
) -> list[Trial]:
    """The tuned Jobs through Kueue: its process started on this cluster (stopped at the
    end, whatever happens), its queue objects, a LocalQueue in the trials' namespace."""
    folder = Path(cluster.env["PHASED_CLUSTER_DIR"]) / "kueue"
    ports = (args.port_base + 6, args.port_base + 7, args.port_base + 8)
    process = kueue.KueueProcess(cluster.kubeconfig, folder, ports)
    process.start()
    try:
        log("kueue", f"Kueue {kueue_version()} running (pid {process.pid}); log {process.log_path}")
        process.install(
            kueue.queue_objects(node_labels=H100, levels=KUEUE_LEVELS, gpu_quota=nodes * 8)
        )
        side = Vanilla("kueue", core, cluster.kubeconfig, zones, args)
        process.install([kueue.local_queue(side.ns)])
        side.outcome_of = lambda job: process.outcome(side.ns, job)
        return side.run(kinds, args.trials)
    finally:
        process.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--systems", default=",".join(SYSTEMS), help="comma-separated: " + ", ".join(SYSTEMS)
    )
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: " + ", ".join(KINDS))
    p.add_argument("--trials", type=int, default=30, help="trials per cell (system x kind)")
    p.add_argument(
        "--never-after", type=float, default=480, help="seconds before a vanilla trial is 'never'"
    )
    p.add_argument("--phased-never-after", type=float, default=120, help="the same for Phased")
    p.add_argument("--vanilla-nodes", type=int, default=560, help="simulated nodes, vanilla")
    p.add_argument("--vanilla-jobs", type=int, default=56, help="vanilla Jobs at once")
    p.add_argument("--phased-nodes", type=int, default=520, help="simulated nodes, Phased")
    p.add_argument("--cluster", default="recovery", help="bench cluster name (phased-bench-NAME)")
    p.add_argument(
        "--port-base",
        type=int,
        default=BENCH_PORT_BASE,
        help="the cluster's six ports start here; Kueue's webhook, metrics, health are +6..+8",
    )
    p.add_argument(
        "--grace",
        type=int,
        default=GRACE_S,
        help="seconds of every grace with a knob on each side (notReadyGrace, gpuDropGrace, "
        "tolerationSeconds); a grace other than the default writes a section of its own",
    )
    p.add_argument("--keep-cluster", action="store_true")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    kinds = [k for k in args.kinds.split(",") if k]
    for s in systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}")
    for k in kinds:
        if k not in KINDS:
            p.error(f"unknown kind {k!r}")

    # Dozens of trial threads share one client: urllib3 warns each time its pool is full.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    started = now()
    load_before = load_average()
    results: dict[str, list[Trial]] = {}
    runs: dict[str, str] = {}
    cluster = BenchCluster(args.cluster, port_base=args.port_base)
    try:
        for system in systems:
            flags = {
                "phased": f"--node-monitor-grace-period={NODE_MONITOR_GRACE_S}s",
                "shipped": "",
                "tuned": (
                    f"--node-monitor-grace-period={NODE_MONITOR_GRACE_S}s "
                    f"--node-eviction-rate={TUNED_EVICTION_RATE:g}"
                ),
            }.get(system, "")
            if system == "kueue":
                flags = (
                    f"--node-monitor-grace-period={NODE_MONITOR_GRACE_S}s "
                    f"--node-eviction-rate={TUNED_EVICTION_RATE:g}"
                )
            nodes = args.phased_nodes if system == "phased" else args.vanilla_nodes
            cluster.up(h100=nodes, kcm_flags=flags)
            core = lib.core_v1(cluster.kubeconfig)
            zones = spread_zones(core)
            t0, before = now(), load_average()
            log(system, f"{nodes} nodes in {ZONES} zones; load {before}")
            if system == "phased":
                results[system] = PhasedSide(core, cluster.kubeconfig, args).run(kinds, args.trials)
            elif system == "kueue":
                results[system] = run_kueue(core, cluster, zones, nodes, args, kinds)
            else:
                side = Vanilla(system, core, cluster.kubeconfig, zones, args)
                results[system] = side.run(kinds, args.trials)
            runs[system] = (
                (f"Kueue {kueue_version()}, " if system == "kueue" else "")
                + f"{nodes} nodes, {(now() - t0) / 60:.1f} min; load before {before}, "
                f"after {load_average()}"
            )
            log(system, runs[system])
            if system != systems[-1]:
                write_report(args, systems, kinds, results, runs, started, load_before)
    finally:
        if not args.keep_cluster:
            cluster.down()

        write_report(args, systems, kinds, results, runs, started, load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
