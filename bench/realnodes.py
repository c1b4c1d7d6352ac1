"""Failure -> training resumed, on real nodes: a JAX program across two real nodes (kubelet,
containerd, runc; the CPU stands in for the GPUs), one spare.

    python bench/realnodes.py [--kinds kubelet-stop,gpu-fault] [--trials 8] [--cold-starts 3]
                              [--cluster real --port-base 32850] [--keep-cluster] [--no-write]

Starts its OWN cluster instance (``phased-bench-real``: own folder, ports 32850-32855, the
real nodes' own bridge and ports, see ``bench/common.py`` and ``e2e/cluster/nodes-env.sh``)
with three real nodes (and two simulated ones the operator does not watch), and stops it
at the end (``make cluster-down``'s script, which puts back what the kubelets changed on
the host). The controller-manager runs
with ``--node-monitor-grace-period=20s --node-monitor-period=2s`` (a kubelet renews its Lease
every 10 s: two renewals missed), the operator as a real process watching the real nodes.

The job is examples/jax-data-parallel as the e2e test runs it (``e2e/real_nodes.py``): two
workers, one spare, a checkpoint every ``EVERY`` steps of ``PACE`` s reported to the
operator's endpoint, ``notReadyGrace`` 3 s, ``gpuFaultGrace`` 0 s, ``survivorGracePeriod``
5 s, Gang restarts. The workers alternate as victims. Failure kinds:

- ``kubelet-stop``: the victim's kubelet is SIGKILLed (its containers run on, nothing tells
  the API server): a silent node, Ready=Unknown after the node-monitor grace; its worker is
  force-deleted.
- ``gpu-fault``: a ``GPUXidError`` condition set True on the victim, whose kubelet stays
  healthy: its worker is deleted with its termination grace, as the survivor is.

Each trial is measured from the injection, on this host's clock (the nodes run here), to:
the ledger's ``detected`` (for a silent node, when the node-monitor grace ran out),
``cordoned``, ``replaced``; the new generation's containers all started; both ranks'
first training step (the program's own log lines, which carry the time); and the ledger's
``resumed``: the operator's receipt of the new generation's first checkpoint report. The
baseline, in the same run: cold starts of the same job (created -> containers started ->
first step -> first report), so what a recovery adds to a start is visible. After each
trial the node is put back (kubelet started, fault cleared, ``phased release-node``) and
the job refills its spare from it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import (
    BenchCluster,
    bench_cluster_env,
    crd_established,
    load_average,
    median,
    percentile,
    table,
    write_section,
)

NAME = "jax"
EVERY = 5  # steps between checkpoints (and reports)
PACE = 0.2  # seconds a step
KCM_FLAGS = "--node-monitor-grace-period=20s --node-monitor-period=2s"
KINDS = {
    "kubelet-stop": "the kubelet SIGKILLed (a silent node; its worker force-deleted)",
    "gpu-fault": "a GPUXidError condition on a node whose kubelet stays healthy",
}
FAULT = "GPUXidError"
FAULT_REASON = "BenchXid"  # not e2e/lib's simulated reason: release-node must not wait on it
MILESTONES = ("detected", "cordoned", "replaced", "started", "first step", "resumed")
COLD = ("started", "first step", "first report")


@dataclass
class Trial:
    kind: str
    node: str
    seconds: dict[str, float] = field(default_factory=dict)
    lost_work: float | None = None
    missed: str = ""


def _at(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class Bench:
    """One cluster, one operator, one job at a time; the e2e helpers do the talking."""

    def __init__(self, kubeconfig: str, work: Path) -> None:
        # Imported here: e2e.real_nodes reads the cluster's settings (its bridge, images) from
        # the environment at import, and main() has set them for this instance first.
        from e2e import lib, operator_fixtures, real_nodes

        self.lib, self.fx, self.rn = lib, operator_fixtures, real_nodes
        self.kubeconfig = kubeconfig
        self.core = lib.core_v1(kubeconfig)
        self.kubectl = lib.Kubectl(kubeconfig)
        self.work = work
        self.ns = ""
        self.storage_class = ""

    # -- the job ------------------------------------------------------------------------------

    def manifest(self) -> dict[str, Any]:
        job = self.rn.jax_training_job(
            NAME, self.storage_class, steps=1_000_000, every=EVERY, pace=PACE
        )
        # The example's own pruning (3 kept): a worker on a silent node runs on until its
        # kubelet is back, and as rank 0 it once pruned the checkpoint the new generation
        # was told to resume from (this bench's first run). Reports are fenced by
        # generation now: its next report is refused and it stops (docs/api.md).
        job["spec"]["failurePolicy"].update(
            {
                "gpuFaultGrace": "0s",
                "restartBudget": 1000,
                "interruptionBudget": "24h",
                # One failure a trial on a pool of three: the breaker (rightly tripped by
                # two of three nodes within minutes) is set out of this benchmark.
                "massFailure": {"maxFailedPercent": 100, "window": "1s"},
            }
        )
        return job

    def status(self) -> dict[str, Any]:
        return self.fx.status(self.kubectl, self.ns, NAME)

    def uid(self) -> str:
        return str(self.fx.get_job(self.kubectl, self.ns, NAME)["metadata"]["uid"])

    def training(self, generation: int, nodes: set[str]) -> list[Any] | None:
        return self.rn.generation_running(
            self.core, self.ns, self.uid(), "train", generation, nodes, printed="step"
        )

    def first_steps(self, pods: list[Any]) -> float:
        """When training went on: the later of the ranks' first step (both must step)."""
        firsts: list[float] = []
        for pod in pods:
            steps = [
                e["time"]
                for e in self.rn.events(self.core, self.ns, pod.metadata.name)
                if e.get("event") == "step"
            ]
            firsts.append(float(min(steps)))  # the worker prints time.time()
        return max(firsts)

    @staticmethod
    def started(pods: list[Any]) -> float:
        began = [p.status.container_statuses[0].state.running.started_at for p in pods]
        return float(max(began).timestamp())

    def steady(self) -> tuple[dict[str, Any], list[Any]] | None:
        """Running with its pool whole, and its generation training with a checkpoint
        reported since it began (so a failure now has something to resume from)."""
        st = self.status()
        pool = st.get("pool") or {}
        active, spares = pool.get("active") or [], pool.get("spares") or []
        if st.get("state") != "Running" or len(active) != 2 or len(spares) != 1:
            return None
        generation = int(st.get("restartGeneration") or 0)
        last = (st.get("phases") or [{}])[0].get("lastCheckpoint") or {}
        if last.get("generation") != generation:
            return None
        pods = self.training(generation, set(active))
        return (st, pods) if pods else None

    # -- cold starts (the baseline) ------------------------------------------------------------

    def cold_start(self) -> dict[str, float]:
        if not self._program():
            self.rn.create_jax_program(self.core, self.ns)
        created = time.time()
        self.fx.apply(self.kubectl, self.ns, self.manifest())
        st, pods = self.lib.wait_until(self.steady, 300, message="the job training")
        first = _at(((st.get("phases") or [{}])[0].get("lastCheckpoint") or {}).get("time"))
        out = {
            "started": self.started(pods) - created,
            "first step": self.first_steps(pods) - created,
            "first report": (first or float("nan")) - created,
        }
        return out

    def _program(self) -> bool:
        names = {c.metadata.name for c in self.core.list_namespaced_config_map(self.ns).items}
        return self.rn.JAX_PROGRAM in names

    def delete_job(self) -> None:
        """Delete the job and wait until it, its workers and its checkpoint claim are gone;
        then make the volume the claim had bound Available again (its reclaim policy is
        Retain: an administrator clears the claim reference), for the next job."""
        self.kubectl.run("delete", "trainingjob", NAME, "-n", self.ns, "--wait=false", check=False)

        def gone() -> bool:
            jobs = self.kubectl.run("get", "trainingjobs", "-n", self.ns, check=False).stdout
            return (
                NAME not in jobs
                and not self.core.list_namespaced_pod(self.ns).items
                and not self.core.list_namespaced_persistent_volume_claim(self.ns).items
            )

        self.lib.wait_until(
            gone,
            180,
            message="the job, its workers and its claim gone",
        )
        self.core.patch_persistent_volume(self.storage_class, {"spec": {"claimRef": None}})

    # -- failures -----------------------------------------------------------------------------

    def inject(self, kind: str, node: str) -> None:
        if kind == "kubelet-stop":
            self.lib.stop_kubelet(node)
        else:
            self._fault(node, "True")

    def restore(self, kind: str, node: str) -> None:
        if kind == "kubelet-stop":
            self.lib.start_kubelet(self.core, node)
        else:
            self._fault(node, "False")
        self.fx.release_quarantined(self.kubeconfig)

    def _fault(self, node: str, status: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {
            "type": FAULT,
            "status": status,
            "reason": FAULT_REASON,
            "message": "XID 79: GPU has fallen off the bus" if status == "True" else "cleared",
            "lastTransitionTime": now,
            "lastHeartbeatTime": now,
        }
        self.core.patch_node_status(node, {"status": {"conditions": [condition]}})

    def explain(self) -> str:
        """What the job looks like now (for a wait that timed out)."""
        st = self.status()
        last = (st.get("phases") or [{}])[0].get("lastCheckpoint")
        true = [(c["type"], c.get("message", "")) for c in st.get("conditions", [])]
        roles = self.fx.nodes_of(self.core, self.uid())
        return (
            f"state {st.get('state')}, generation {st.get('restartGeneration')}, pool "
            f"{st.get('pool')}, last checkpoint {last}, node roles {roles}, conditions "
            f"{[c for c in true if c[1]]}"
        )

    def trial(self, kind: str, index: int) -> Trial:
        st, pods = self.lib.wait_until(
            self.steady, 300, message=lambda: f"the job training, pool whole: {self.explain()}"
        )
        generation = int(st.get("restartGeneration") or 0)
        victim = pods[index % 2].spec.node_name
        active, spares = set(st["pool"]["active"]), set(st["pool"]["spares"])
        out = Trial(kind, victim)
        t0 = time.time()
        self.inject(kind, victim)

        def answered() -> dict[str, Any] | None:
            s = self.status()
            found = [f for f in s.get("failures", []) if f["node"] == victim]
            latest = found[-1] if found else None
            if latest is None or not latest.get("resumed") or _at(latest["detected"]) is None:
                return None
            return s if (_at(latest["cordoned"]) or 0) >= t0 else None

        try:
            st = self.lib.wait_until(answered, 300, interval=0.2, message=f"{victim} answered")
        except self.lib.WaitTimeout as exc:
            out.missed = str(exc)
            self.restore(kind, victim)
            return out
        entry = [f for f in st["failures"] if f["node"] == victim][-1]
        healthy = (active - {victim}) | spares
        now_generation = int(st.get("restartGeneration") or 0)
        assert now_generation > generation, (generation, now_generation)
        new = self.lib.wait_until(
            lambda: self.training(now_generation, healthy), 120, message="the new generation"
        )
        for key, stamp in (
            ("detected", entry["detected"]),
            ("cordoned", entry.get("cordoned")),
            ("replaced", entry.get("replaced")),
            ("resumed", entry.get("resumed")),
        ):
            at = _at(stamp)
            out.seconds[key] = (at - t0) if at is not None else float("nan")
        out.seconds["started"] = self.started(new) - t0
        out.seconds["first step"] = self.first_steps(new) - t0
        out.lost_work = entry.get("lostWorkSeconds")
        self.restore(kind, victim)
        return out


@contextlib.contextmanager
def prepared(bench: Bench) -> Iterator[None]:
    """The CRD, a namespace, the checkpoint volume and the operator; all undone after."""
    lib, rn = bench.lib, bench.rn
    from e2e.harness import CRD

    bench.kubectl("apply", "-f", str(CRD))
    lib.wait_until(lambda: crd_established(bench.kubectl), 60, message="the CRD Established")
    real = lib.real_nodes(bench.core)
    if len(real) < 3:
        raise SystemExit(f"needs 3 real nodes, the cluster has {len(real)} (run as root)")
    bench.ns = lib.create_namespace(bench.core, "bench-real")
    log = Path(tempfile.gettempdir()) / "phased-bench-real-operator.log"
    try:
        with rn.host_checkpoint_volume(bench.core, bench.ns) as (storage_class, _dir):
            bench.storage_class = storage_class
            with rn.operator_on(bench.kubeconfig, bench.core, real, bench.work, log):
                try:
                    yield
                finally:
                    with contextlib.suppress(Exception):
                        bench.delete_job()
    finally:
        lib.delete_namespace(bench.core, bench.ns)
        print(f"(operator log: {log})", flush=True)


def run(
    bench: Bench, kinds: list[str], trials: int, colds: int
) -> tuple[list[dict[str, float]], list[Trial]]:
    cold: list[dict[str, float]] = []
    results: list[Trial] = []
    with prepared(bench):
        for i in range(colds):
            cold.append(bench.cold_start())
            print(f"[cold start {i + 1}] " + _shown(cold[-1]), flush=True)
            if i + 1 < colds:
                bench.delete_job()
        for i in range(trials * len(kinds)):
            kind = kinds[i % len(kinds)]
            try:
                result = bench.trial(kind, i // len(kinds))
            except bench.lib.WaitTimeout as exc:
                # The job did not come back whole and training: say why, keep what was
                # measured, stop the trials.
                print(f"[{kind} {i // len(kinds) + 1}] not run: {exc}", flush=True)
                results.append(Trial(kind, "-", missed=f"not run: {exc}"))
                break
            results.append(result)
            print(
                f"[{kind} {i // len(kinds) + 1}] {result.node}: "
                + (result.missed or _shown(result.seconds)),
                flush=True,
            )
    return cold, results


def _shown(seconds: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items())


def _cells(values: list[float]) -> list[object]:
    """n, median, p90, max of what was recorded (NaN: a milestone the trial has not)."""
    clean = [v for v in values if v == v]
    if not clean:
        return [0, "-", "-", "-"]
    return [len(clean), median(clean), percentile(clean, 90), max(clean)]


def report(
    args: argparse.Namespace,
    cold: list[dict[str, float]],
    results: list[Trial],
    load_before: str,
) -> str:
    rows: list[list[object]] = []
    for name in COLD:
        rows.append(["cold start", name, *_cells([c[name] for c in cold])])
    for kind in args.kinds:
        done = [t for t in results if t.kind == kind and not t.missed]
        for name in MILESTONES:
            rows.append([kind, name, *_cells([t.seconds[name] for t in done])])
    missed = [t for t in results if t.missed]
    lost = [t.lost_work for t in results if t.lost_work is not None]
    return "\n\n".join(
        [
            "Seconds from the failure's injection (cold start: from the TrainingJob's "
            "creation) to each milestone; median, p90 (nearest rank) and max over the trials. "
            "`detected` is a node condition's transition time, which has whole seconds: it "
            "can read up to 1 s early (below 0 for a fault set by the bench itself).",
            table(["trial", "milestone", "n", "median s", "p90 s", "max s"], rows),
            f"Kinds: {'; '.join(f'**{k}**: {KINDS[k]}' for k in args.kinds)}. "
            f"Checkpoints every {EVERY} steps of {PACE} s (the first report of a generation "
            f"comes after its {EVERY}th step: up to {EVERY * PACE:.0f} s after training "
            "resumed). Node-monitor grace 20 s (kubelet-stop's detection waits for it), "
            "`notReadyGrace` 3 s, `gpuFaultGrace` 0 s, `survivorGracePeriod` 5 s. "
            f"Work lost to the restarts (ledger `lostWorkSeconds`): median "
            f"{median(lost) if lost else float('nan'):.1f} s. "
            f"Not answered within 300 s: {len(missed)}"
            + (f" ({'; '.join(t.missed for t in missed)})" if missed else "")
            + ".",
            f"Load average before: {load_before}; after: {load_average()}.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--trials", type=int, default=8, help="trials of each kind")
    parser.add_argument("--cold-starts", type=int, default=3)
    parser.add_argument("--cluster", default="real")
    parser.add_argument("--port-base", type=int, default=32850)
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    args.kinds = [k for k in args.kinds.split(",") if k]
    for kind in args.kinds:
        if kind not in KINDS:
            parser.error(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    # This instance's names, ports and folders, for the e2e helpers that read them.
    os.environ.update(bench_cluster_env(args.cluster, args.port_base))
    os.environ["PHASED_REAL_NODES"] = "3"
    # The nodes' network follows from the API server's port (nodes-env.sh): 32850 would give
    # the default instance's 10.232/16. A net of its own, so both can run at once.
    os.environ.setdefault("PHASED_NODES_NET", "10.251")
    load_before = load_average()
    cluster = BenchCluster(args.cluster, port_base=args.port_base)
    # Two simulated nodes too (the cluster script waits for its simulated nodes to be Ready
    # and refuses none); the operator here watches only the real ones (type=real).
    cluster.up(h100=2, kcm_flags=KCM_FLAGS)
    try:
        with tempfile.TemporaryDirectory(prefix="phased-bench-real-") as work:
            bench = Bench(cluster.kubeconfig, Path(work))
            cold, results = run(bench, args.kinds, args.trials, args.cold_starts)
            body = report(args, cold, results, load_before)
    finally:
        if not args.keep_cluster:
            cluster.down()
    print(body)
    if not args.no_write:
        write_section(
            "realnodes",
            "Failure to training resumed, on real nodes",
            body,
            {"Trials": f"{args.trials} per kind, {args.cold_starts} cold starts"},
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
