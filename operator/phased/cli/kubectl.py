"""``kubectl phased``: what happened to a run, from the cluster's own record.

Installed as the console script ``kubectl-phased``, which kubectl runs as a plugin:

- ``kubectl phased status NAME [-n NS]``: phases with sizes, times, GPU-hours and cost so far,
  the pool by role, interruptions, checkpoints and conditions;
- ``kubectl phased timeline NAME [-n NS]``: phases, every failure as detect → cordon → swap →
  resume, restarts and the operator's other events, in time order;
- ``kubectl phased nodes``: which job holds which node in which role, and the quarantined
  nodes with why.

``-o json`` prints the same as JSON for scripts. Everything is read with the caller's
credentials (``--kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``); nothing is
written. Exit codes: 0 shown, 1 not found, 2 the cluster could not be read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from phased.cli import views

EXIT_NOT_FOUND = 1
EXIT_UNREADABLE = 2


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-o", "--output", choices=["text", "json"], default="text")
    common.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG)")
    named = argparse.ArgumentParser(add_help=False)
    named.add_argument("name", help="the TrainingJob's name")
    named.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace")

    top = argparse.ArgumentParser(
        prog="kubectl phased",
        description="What happened to a Phased TrainingJob, and who holds which node.",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "status",
        parents=[named, common],
        help="phases, pool, GPU-hours, cost, interruptions, checkpoints",
    )
    sub.add_parser(
        "timeline",
        parents=[named, common],
        help="phases, failures (detect, cordon, swap, resume) and restarts in time order",
    )
    sub.add_parser("nodes", parents=[common], help="nodes held by jobs, and quarantined nodes")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130


async def _run(args: argparse.Namespace) -> int:
    from phased.kube import inspect
    from phased.kube.client import KubeClient, KubeError

    try:
        kube = await KubeClient.connect(args.kubeconfig)
    except Exception as exc:  # a missing or unreadable kubeconfig, of several kinds
        print(f"kubectl phased: cannot connect: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        if args.command == "nodes":
            rows = views.nodes_view(await inspect.phased_nodes(kube))
            _print(args, rows, lambda: views.render_nodes(rows))
            return 0
        namespace = args.namespace or inspect.current_namespace(args.kubeconfig)
        job = await inspect.read_trainingjob(kube, namespace, args.name)
        if job is None:
            print(f'kubectl phased: TrainingJob "{args.name}" not found in namespace '
                  f'"{namespace}"', file=sys.stderr)  # fmt: skip
            return EXIT_NOT_FOUND
        if args.command == "status":
            view = views.status_view(job, datetime.now(UTC))
            _print(args, view, lambda: views.render_status(view))
            return 0
        uid = str((job.get("metadata") or {}).get("uid") or "")
        events = await inspect.trainingjob_events(kube, namespace, args.name, uid)
        entries = views.timeline_view(job, events)
        _print(args, entries, lambda: views.render_timeline(job, entries))
        return 0
    except KubeError as exc:
        print(f"kubectl phased: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    finally:
        await kube.close()


def _print(args: argparse.Namespace, view: Any, text: Any) -> None:
    sys.stdout.write(views.to_json(view) + "\n" if args.output == "json" else text())


if __name__ == "__main__":
    sys.exit(main())
