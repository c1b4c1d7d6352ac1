"""The CPU one pass of decide costs, by the number of nodes the operator sees: this checkout
against another commit, on the same scenarios in the same run.

    python bench/decide_cost.py [--sizes 500,1000,2000,5000,10000] [--trials 30]
                                [--baseline REF] [--no-write]

Offline, no cluster. The scale bench (``bench/scale.py``) measures what users see, the time
from a failure to the new workers, on a real API server; on 2 CPUs that figure moves by a
third from run to run, more than a change of a few milliseconds of CPU per pass can show.
This one measures that CPU alone, with nothing else running in the process.

Scenario at each size: N H100 nodes (racks of 4, blocks of 32, two zones), of which 49
other jobs hold 10 each (their marks on the nodes, as in the scale bench's 50 jobs), and
the job measured: one phase of 8 workers and 2 spares, driven through the operator's own
``decide`` and an in-memory cluster (``failure_sim.Sim``) until its gang runs. Then three
passes are timed, each ``--trials`` times on the same snapshot:

- *idle*: the gang running, nothing to do (what the periodic resync costs);
- *failure*: an active node NotReady (grace 0 s): the pass that quarantines it, stops the
  gang, promotes a spare and claims a free node for the spares;
- *restart*: that plan applied and the survivors gone: the pass that creates the new
  generation.

Each commit runs in a process of its own (the baseline from a temporary ``git worktree``),
one after the other; CPU is ``time.process_time`` around ``decide``; the figure is the
median of the trials, with the minimum beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, median, table, write_section

WORKERS, SPARES, OTHER_JOBS = 8, 2, 49
PASSES = ("idle", "failure", "restart")


def _measure(sizes: list[int], trials: int) -> dict[str, dict[str, list[float]]]:
    """CPU seconds of each pass kind, ``trials`` times, at each size (this process's
    ``phased``: whatever PYTHONPATH names)."""
    import heapq

    from failure_sim import JOB, Setup, Sim, make_node
    from phased.api.v1alpha1 import JobState, NodeRole, parse_spec
    from phased.core import labels
    from phased.core.decide import decide
    from phased.core.model import NodeCondition, Taint

    spec = parse_spec(
        {
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": WORKERS, "max": WORKERS},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "expectedDuration": "70d",
                }
            ],
            "template": {"image": "registry.example/llm:1"},
            "spares": {"count": SPARES},
            "failurePolicy": {
                "notReadyGrace": "0s",
                "restartBudget": 1000,
                "massFailure": {"maxFailedPercent": 100},
            },
        }
    )
    out: dict[str, dict[str, list[float]]] = {}
    for size in sizes:
        sim = Sim(spec, Setup(rate="published", spares=SPARES, grace="0s", seed=1))
        sim.events.clear()  # no random failures: the bench fails one node itself
        sim.nodes.clear()
        held_by_others = OTHER_JOBS * (WORKERS + SPARES)
        for i in range(size):
            node = make_node(i)
            node = replace(node, name=f"n{i:05d}", labels={**node.labels})
            if i < held_by_others:
                uid = f"uid-other-{i // (WORKERS + SPARES)}"
                role = NodeRole.ACTIVE if i % (WORKERS + SPARES) < WORKERS else NodeRole.SPARE
                node = replace(
                    node,
                    labels={
                        **node.labels,
                        labels.LABEL_JOB_UID: uid,
                        labels.LABEL_JOB: uid,
                        labels.LABEL_JOB_NAMESPACE: "bench",
                        labels.LABEL_ROLE: role.value,
                        labels.LABEL_INSTALLATION: sim.settings.installation,
                    },
                    taints=(Taint(labels.TAINT_POOL, uid),),
                )
            sim.nodes[node.name] = node
        # To a running gang: decide, start the pods it created, until Running.
        sim.reconcile()
        for _ in range(50):
            if sim.status.state == JobState.RUNNING:
                break
            if sim.events:
                when, _, _, name = heapq.heappop(sim.events)
                sim.now = sim.at(max(when, sim.t))
                sim._start_pod(name)
            sim.reconcile()
        if sim.status.state != JobState.RUNNING:
            raise SystemExit(f"{size} nodes: the job did not reach Running ({sim.status.state})")
        sim.now += timedelta(minutes=10)
        cpu: dict[str, list[float]] = {}
        cpu["idle"], _ = _timed(decide, sim, trials)
        victim = next(
            n.name
            for n in sim.nodes.values()
            if n.owner_uid == JOB.uid and n.role == NodeRole.ACTIVE
        )
        node = sim.nodes[victim]
        sim.nodes[victim] = replace(
            node, conditions=(NodeCondition("Ready", "False", sim.now, "KubeletNotReady"),)
        )
        sim.now += timedelta(seconds=1)
        cpu["failure"], plan = _timed(decide, sim, trials)
        if not any(type(a).__name__ == "QuarantineNode" for a in plan.actions):
            raise SystemExit(f"{size} nodes: the failure pass quarantined nothing")
        for action in plan.actions:
            sim._apply(action)
        sim.status = plan.status
        sim.now += timedelta(seconds=1)
        cpu["restart"], plan = _timed(decide, sim, trials)
        if not any(type(a).__name__ == "CreatePod" for a in plan.actions):
            raise SystemExit(f"{size} nodes: the restart pass created no worker")
        out[str(size)] = cpu
    return out


def _timed(decide: Any, sim: Any, trials: int) -> tuple[list[float], Any]:
    """CPU seconds of ``trials`` calls of ``decide`` on the sim's snapshot as it stands, and
    the (last) plan."""
    snap, times, plan = sim.snapshot(), [], None
    for _ in range(trials):
        start = time.process_time()
        plan = decide(snap, sim.settings, sim.now)
        times.append(time.process_time() - start)
    return times, plan


def _run(python_path: Path, sizes: list[int], trials: int) -> dict[str, dict[str, list[float]]]:
    env = {**os.environ, "PYTHONPATH": str(python_path)}
    args = [sys.executable, __file__, "--measure", "--sizes", ",".join(map(str, sizes))]
    done = subprocess.run(
        [*args, "--trials", str(trials)], env=env, check=True, capture_output=True, text=True
    )
    result: dict[str, dict[str, list[float]]] = json.loads(done.stdout.splitlines()[-1])
    return result


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="500,1000,2000,5000,10000")
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--baseline", help="a commit to measure beside this checkout")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.measure:
        print(json.dumps(_measure(sizes, args.trials)))
        return 0
    runs: list[tuple[str, dict[str, dict[str, list[float]]]]] = []
    if args.baseline:
        sha = _git("rev-parse", "--short", args.baseline)
        tree = Path(f"/tmp/phased-decide-baseline-{sha}")
        _git("worktree", "add", "--detach", str(tree), sha)
        try:
            runs.append((f"before ({sha})", _run(tree / "operator", sizes, args.trials)))
        finally:
            _git("worktree", "remove", "--force", str(tree))
    dirty = _git("status", "--porcelain", "--", "operator")
    label = f"after ({_git('rev-parse', '--short', 'HEAD')}{'+changes' if dirty else ''})"
    runs.append(
        (label if args.baseline else "this checkout", _run(REPO / "operator", sizes, args.trials))
    )

    rows = []
    for size in sizes:
        for name, result in runs:
            cells: list[object] = [f"{size:,}", name]
            for kind in PASSES:
                times = result[str(size)][kind]
                cells.append(f"{1000 * median(times):.1f} ({1000 * min(times):.1f})")
            rows.append(cells)
    headers = ["nodes", "operator", *(f"{k} pass ms, median (min)" for k in PASSES)]
    slopes = []
    for name, result in runs:
        per = []
        for kind in PASSES:
            ms = [1000 * median(result[str(size)][kind]) for size in sizes]
            per.append(f"{kind} {1000 * _slope(sizes, ms):.2f}")
        slopes.append(f"- {name}, ms per 1,000 nodes (least squares): " + ", ".join(per))
    text = table(headers, rows) + "\n\n" + "\n".join(slopes) + "\n"
    print(text)
    if not args.no_write:
        notes = (
            f"CPU time of one call of `decide` (`time.process_time`), {args.trials} trials of "
            "each pass on the same snapshot; the median, the minimum in brackets. One job of "
            f"{WORKERS} workers and {SPARES} spares among {OTHER_JOBS} other jobs' pools of "
            f"{WORKERS + SPARES} and the free nodes; *idle*: its gang running, nothing to do; "
            "*failure*: an active node NotReady at a grace of 0 s (quarantine, the gang stopped, "
            "a spare promoted, a free node claimed); *restart*: that plan applied, the new "
            "generation created. Each operator ran in a process of its own, one after the other, "
            "nothing else measured meanwhile. No API server: this is the operator's own CPU per "
            "pass, which the scale bench's reaction figures include with everything else."
        )
        write_section(
            "decide-cost", "4l. CPU of one decide pass, by nodes seen", text + "\n" + notes
        )
    return 0


def _slope(xs: list[int], ys: list[float]) -> float:
    from apiload import slope

    return slope([float(x) for x in xs], ys)


if __name__ == "__main__":
    sys.exit(main())
