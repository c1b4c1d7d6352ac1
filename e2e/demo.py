"""The demo: a four-phase TrainingJob on the local cluster, watched live, with a node failure.

Run by ``make demo``. It starts the local cluster (built and cached on the first run),
installs the CRD, runs the operator, applies ``examples/small.yaml``, and redraws a view of
the job every second: phase, state, nodes by role, workers, the failure ledger. In the
training phase it makes one active node NotReady; you watch Phased cordon it and promote a
spare. It ends with a summary when the job has succeeded. The cluster stays up afterwards
(`make cluster-down` stops it).

With ``--jax`` (``make demo-jax``) it runs a real training program instead: the JAX example
(examples/jax-data-parallel) on two of the cluster's real nodes, with a spare and a checkpoint
volume. Once two checkpoints are reported it stops the kubelet of rank 1's node; you watch
Phased swap the spare in and the new generation resume from the last checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e2e import lib
from e2e.harness import CRD, REPO, Operator
from e2e.operator_fixtures import release_quarantined

EXAMPLE = REPO / "examples" / "small.yaml"
NAMESPACE = "demo"
CLEAR = "\033[H\033[2J"


def get_json(kubectl: lib.Kubectl, *args: str) -> Any:
    return json.loads(kubectl(*args, "-o", "json"))


def view(
    job: dict[str, Any],
    pods: list[dict[str, Any]],
    started: float,
    note: str,
    namespace: str = NAMESPACE,
) -> str:
    status = job.get("status") or {}
    pool = status.get("pool") or {}
    lines = [
        f"Phased demo — TrainingJob {namespace}/{job['metadata']['name']}"
        f"   elapsed {time.monotonic() - started:5.0f}s",
        "",
        f"  state   {status.get('state', '-'):<12} phase {status.get('phase') or '-'}"
        f" ({status.get('phaseIndex', 0) + 1}/{len(job['spec']['phases'])})",
        f"  nodes   active {len(pool.get('active', []))}   spare {len(pool.get('spares', []))}"
        f"   quarantined {len(pool.get('quarantined', []))}",
        f"  active  {' '.join(pool.get('active', [])) or '-'}",
        f"  spares  {' '.join(pool.get('spares', [])) or '-'}",
        f"  quarantined {' '.join(pool.get('quarantined', [])) or '-'}",
        "",
        "  phases:",
    ]
    for record in status.get("phases", []):
        lines.append(
            f"    {record['name']:<11} {record.get('state', ''):<10}"
            f" nodes {record.get('nodes', 0):>3}"
            f"  GPU-h {record.get('gpuHours', 0):8.2f}  cost {record.get('cost', 0):8.2f}"
        )
    workers = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    lines += ["", f"  workers ({len(workers)}):"]
    for pod in sorted(workers, key=lambda p: p["metadata"]["name"])[-12:]:
        lines.append(
            f"    {pod['metadata']['name']:<34} {pod['status'].get('phase', ''):<10}"
            f" {pod['spec'].get('nodeName') or '-'}"
        )
    failures = status.get("failures", [])
    if failures:
        lines += ["", "  failure ledger:"]
        for f in failures:
            lines.append(
                f"    #{f['id']} {f['node']} {f['reason']}:"
                f" detected {f.get('detected', '-')[11:19]}"
                f" cordoned {str(f.get('cordoned') or '-')[11:19]} replaced by"
                f" {f.get('replacedBy') or '-'} resumed {str(f.get('resumed') or '-')[11:19]}"
            )
    interruption = status.get("interruption") or {}
    lines += [
        "",
        f"  interruption {interruption.get('used', '0s')} of"
        f" {interruption.get('budgetSeconds', 0) / 60:.0f}m budget"
        f"   utilization {status.get('utilizationPercent', 0):.1f}%"
        f"   cost so far {(status.get('accounting') or {}).get('cost', 0):.2f}",
    ]
    if note:
        lines += ["", f"  >> {note}"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-failure", action="store_true", help="do not fail a node")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--plain", action="store_true", help="append views instead of redrawing")
    parser.add_argument(
        "--jax", action="store_true", help="the JAX example on the real nodes (needs root)"
    )
    args = parser.parse_args()

    subprocess.run(["bash", str(REPO / "e2e" / "cluster" / "up.sh")], check=True)
    config = lib.kubeconfig_path()
    kubectl = lib.Kubectl(config)
    kubectl("apply", "-f", str(CRD))
    kubectl("wait", "--for=condition=Established", "crd/trainingjobs.phased.dev", "--timeout=60s")
    kubectl.run("create", "namespace", NAMESPACE, check=False)
    if args.jax:
        return jax_demo(args, config, kubectl)
    log = Path(os.environ.get("PHASED_DEMO_LOG", "/tmp/phased-demo-operator.log"))
    operator = Operator(config, log).start()
    # A job left by an earlier demo: the operator releases its nodes and lets it go; a node
    # that demo quarantined is given back, as a person would after looking at it.
    kubectl("delete", "trainingjob", "--all", "-n", NAMESPACE, "--wait=true", "--timeout=120s")
    release_quarantined(config)
    print(f"operator running (log: {log}); applying {EXAMPLE.relative_to(REPO)}")
    kubectl("apply", "-n", NAMESPACE, "-f", str(EXAMPLE))
    name = get_json(kubectl, "get", "-n", NAMESPACE, "-f", str(EXAMPLE))["metadata"]["name"]

    started = time.monotonic()
    failed_node = ""
    note = "waiting for the first phase"
    try:
        while time.monotonic() - started < args.timeout:
            job = get_json(kubectl, "get", "trainingjob", name, "-n", NAMESPACE)
            pods = get_json(
                kubectl, "get", "pods", "-n", NAMESPACE, "-l", f"phased.dev/job={name}"
            )["items"]
            status = job.get("status") or {}
            active = (status.get("pool") or {}).get("active", [])
            if (
                not args.no_failure
                and not failed_node
                and status.get("phase") == "train"
                and status.get("state") == "Running"
                and active
            ):
                failed_node = active[0]
                kubectl(
                    "annotate", "node", failed_node, "sim.phased.dev/not-ready=true", "--overwrite"
                )
                note = f"made node {failed_node} NotReady: watch it get cordoned and swapped"
            print(("" if args.plain else CLEAR) + view(job, pods, started, note), flush=True)
            if status.get("state") in ("Succeeded", "Failed"):
                break
            time.sleep(1)
        else:
            print("the demo timed out; the operator log is at", log)
            return 1
    finally:
        operator.stop()
        if failed_node:
            kubectl.run("annotate", "node", failed_node, "sim.phased.dev/not-ready-", check=False)

    status = job.get("status") or {}
    accounting = status.get("accounting") or {}
    print(
        f"\nTrainingJob {name} {status.get('state')} in {time.monotonic() - started:.0f}s:"
        f" {len(status.get('phases', []))} phases, {len(status.get('failures', []))} failure(s),"
        f" interruption {status.get('interruption', {}).get('used', '0s')},"
        f" {accounting.get('gpuHours', 0):.2f} GPU-hours, cost {accounting.get('cost', 0):.2f}"
        f" {accounting.get('currency', '')}."
    )
    print(
        "The cluster is still up: `kubectl --kubeconfig",
        config,
        "get tj -A`; stop it with `make cluster-down`.",
    )
    return 0 if status.get("state") == "Succeeded" else 1


def jax_demo(args: argparse.Namespace, config: str, kubectl: lib.Kubectl) -> int:
    """The JAX example on the real nodes through a stopped kubelet (see the docstring)."""
    from e2e import real_nodes

    core = lib.core_v1(config)
    real = lib.real_nodes(core)
    if len(real) < 3:
        print(f"the JAX demo needs 3 real nodes, the cluster has {len(real)} (run as root)")
        return 1
    name, every = "jax-data-parallel", 10
    namespace = lib.create_namespace(core, "demo-jax")
    log = Path(os.environ.get("PHASED_DEMO_LOG", "/tmp/phased-demo-operator.log"))
    work = Path(tempfile.mkdtemp(prefix="phased-demo-"))
    with (
        real_nodes.operator_on(config, core, real, work, log),
        real_nodes.host_checkpoint_volume(core, namespace) as (storage_class, _),
    ):
        real_nodes.create_jax_program(core, namespace)
        job = real_nodes.jax_training_job(name, storage_class, steps=360, every=every, pace=0.4)
        kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(job))
        started, stopped, note = time.monotonic(), "", "waiting for the first checkpoints"
        while time.monotonic() - started < args.timeout:
            job = get_json(kubectl, "get", "trainingjob", name, "-n", namespace)
            pods = get_json(kubectl, "get", "pods", "-n", namespace, "-l", f"phased.dev/job={name}")
            status = job.get("status") or {}
            record = (status.get("phases") or [{}])[0]
            last = record.get("lastCheckpoint") or {}
            if not stopped and last.get("step", 0) >= 2 * every:
                rank1 = [
                    p for p in pods["items"] if p["metadata"]["labels"]["phased.dev/rank"] == "1"
                ]
                stopped = rank1[-1]["spec"]["nodeName"]
                lib.stop_kubelet(stopped)
                note = f"stopped the kubelet of {stopped}: a silent node, NotReady in ~1 min"
            shown = note
            if last:
                shown += (
                    f"\n  >> last checkpoint: step {last['step']} of generation "
                    f"{last.get('generation', 0)} ({last.get('path', '')})"
                )
            frame = view(job, pods["items"], started, shown, namespace)
            print(("" if args.plain else CLEAR) + frame, flush=True)
            if status.get("state") in ("Succeeded", "Failed"):
                break
            time.sleep(1)
    for failure in status.get("failures", []):
        print(
            f"failure of {failure['node']}: resumed from step {failure.get('resumeStep')}, "
            f"{failure.get('lostWorkSeconds') or 0:.1f}s of work lost, "
            f"interrupted {failure.get('interruptionSeconds', 0):.1f}s"
        )
    print(f"TrainingJob {namespace}/{name}: {status.get('state')} (operator log: {log})")
    return 0 if status.get("state") == "Succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
