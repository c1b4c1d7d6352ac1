"""``phased release-node NODE...``: hand nodes Phased marked back to the cluster.

A node Phased quarantined stays cordoned, tainted and labelled until a person has looked at
it (policy ``Quarantine``). This command uncordons it and removes every Phased mark, so any
job (or any other workload) can use it again; a cordon someone put on the node before its
quarantine (its note says ``cordonedBefore``) is theirs, and stays. It also clears a node
left *partially marked* — Phased marks that no job holds it by, such as a quarantined node
from which a person removed only the ``role`` label — which no job would ever claim again;
such a node is uncordoned only when its quarantine note says Phased's quarantine cordoned it. Each
release says which marks it removed.

It leaves alone, and says why: a node of another installation (``--installation``, by
default ``$PHASED_INSTALLATION`` or ``default``, as the operator's setting), a node a job
holds (the operator gives it back when the job lets go), and a node with no Phased mark.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from phased.kube.nodes import NodeVerbs


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "release-node",
        help="uncordon quarantined (or partially marked) nodes and remove Phased's marks",
    )
    parser.add_argument("nodes", nargs="+", metavar="NODE")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG)")
    parser.add_argument(
        "--installation",
        default=os.environ.get("PHASED_INSTALLATION", "default"),
        help="the operator's installation name (default: $PHASED_INSTALLATION or 'default'); "
        "a node another installation marked is left alone",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_release(list(args.nodes), args.kubeconfig, args.installation))


async def release_nodes(verbs: NodeVerbs, names: list[str], out: TextIO, err: TextIO) -> int:
    """Release each node, one line each: what it removed, or why it left the node alone.
    1 when any was left alone or failed."""
    from phased.kube.client import KubeError

    failed = 0
    for name in names:
        try:
            done = await verbs.release_by_hand(name)
        except KubeError as exc:
            print(f"{name}: {exc}", file=err)
            failed += 1
            continue
        if not done.released:
            print(f"{name}: {done.why}; left alone", file=err)
            failed += 1
            continue
        what = f"removed {', '.join(done.removed)}" if done.removed else "no mark left"
        cordon = "; uncordoned" if done.uncordoned else ""
        if done.kept_cordon:
            cordon = (
                "; left cordoned: it was cordoned before its quarantine, not by Phased "
                "(kubectl uncordon it when it may take work)"
            )
        print(f"{name}: released ({done.why}): {what}{cordon}", file=out)
    return 1 if failed else 0


async def _release(names: list[str], kubeconfig: str | None, installation: str) -> int:
    from phased.kube.client import KubeClient
    from phased.kube.nodes import NodeVerbs

    try:
        kube = await KubeClient.connect(kubeconfig)
    except Exception as exc:
        print(f"phased: cannot connect: {exc}", file=sys.stderr)
        return 2
    try:
        return await release_nodes(NodeVerbs(kube, installation), names, sys.stdout, sys.stderr)
    finally:
        await kube.close()
