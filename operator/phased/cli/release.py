"""``phased release-node NODE...``: return quarantined nodes to the cluster.

A node Phased quarantined stays cordoned, tainted and labelled until a person has looked at
it (policy ``Quarantine``). This command uncordons it and removes every Phased mark, so any
job (or any other workload) can use it again. It refuses nodes that are not quarantined.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "release-node", help="uncordon quarantined nodes and remove Phased's marks"
    )
    parser.add_argument("nodes", nargs="+", metavar="NODE")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_release(list(args.nodes), args.kubeconfig))


async def _release(names: list[str], kubeconfig: str | None) -> int:
    from phased.kube.client import KubeClient, KubeError
    from phased.kube.nodes import NodeVerbs

    try:
        kube = await KubeClient.connect(kubeconfig)
    except Exception as exc:
        print(f"phased: cannot connect: {exc}", file=sys.stderr)
        return 2
    failed = 0
    try:
        verbs = NodeVerbs(kube)
        for name in names:
            try:
                released = await verbs.release_quarantined(name)
            except KubeError as exc:
                print(f"{name}: {exc}", file=sys.stderr)
                failed += 1
                continue
            if released:
                print(f"{name}: released")
            else:
                print(f"{name}: not quarantined by Phased (or not found); left alone")
                failed += 1
    finally:
        await kube.close()
    return 1 if failed else 0
