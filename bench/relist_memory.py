"""What a full Node list costs in memory: the whole list in one request against pages of 500.

    python bench/relist_memory.py [--sizes 1000,5000] [--trials 3] [--lists 3] [--no-write]

The node view is filled by a full LIST of Nodes when the operator starts and replaced by
one every ``nodeRelistInterval``. Read in one request, the list is one body of ~4 KB per
node, decoded into dicts all at once; paged (``phased.kube.nodes.list_nodes``), it is 500
Nodes a request, each page converted into what the view keeps before the next is read.

An API server of its own, in this process on 127.0.0.1 (an ``aiohttp.web`` app on a free
port), answers ``GET /api/v1/nodes`` with N Nodes shaped as the bench cluster's simulated
ones are as the API server returns them (``e2e/cluster/nodes.py``'s manifest, kwok's five
conditions, the managed fields of the three writers), honouring ``limit`` and ``continue``.
Each variant runs in a fresh process of its own, which connects through the operator's
``KubeClient`` (a kubeconfig pointing at that server) and lists ``--lists`` times into one
``NodeView`` (the first list fills it, as at start-up; the others replace it, as the
periodic relist does), through the operator's real code:

- *one request*: one ``GET /api/v1/nodes`` then ``NodeView.replace_all`` (the code before pages);
- *pages of 500*: ``list_nodes`` then ``NodeView.replace_converted`` (the code now).

Reported per size and variant, medians over ``--trials`` (each trial a fresh process for
each variant and measure, the variants in alternating order):

- RSS growth: VmRSS after the first list and after the last, less VmRSS before the first
  (the process has imported everything and made one small request first); peak RSS growth:
  VmHWM after the last list less VmRSS before (the peak is reset, ``/proc/self/clear_refs``,
  before the first list);
- peak traced: the highest ``tracemalloc`` figure during a list, less the figure before
  it, the largest of the ``--lists`` lists; kept: what is still traced after the last list
  (the view), less before the first. Traced in a process of its own, as tracing slows
  the lists and takes memory of its own;
- time per list: the median of the lists' wall time in the untraced process (the server
  shares the machine, so this is of the whole machine's load as much as of the code).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))

from aiohttp import web
from e2e.cluster.nodes import node_manifest

from common import REPO, load_average, median, table, write_section
from phased.kube.client import KubeClient
from phased.kube.nodes import list_nodes
from phased.kube.nodeview import NodeView
from phased.kube.paging import LIST_PAGE

SELECTOR = "type=kwok"  # every simulated node carries it; sent as the operator sends its own
VARIANTS = {"one": "one request", "paged": f"pages of {LIST_PAGE}"}
MIB = 1024 * 1024
SCRIPT = Path(__file__).resolve()

# kwok's node conditions (its NodeConditions, as the bench cluster's stages write them).
CONDITIONS = (
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
)


def _fields(keys: list[str]) -> dict[str, Any]:
    return {f"f:{key}": {} for key in keys}


def simulated_node(index: int, version: int) -> dict[str, Any]:
    """The ``index``-th simulated H100 node as the API server lists it: the manifest the
    bench cluster creates, what kwok's stages and the control plane add, managed fields."""
    raw = node_manifest("h100", index)
    meta = raw["metadata"]
    stamp = "2026-12-01T20:00:00Z"
    meta.update(
        {
            "uid": f"6b1c4f0e-{index:04x}-4d5e-9f00-{index:012x}",
            "resourceVersion": str(version - index % 97),
            "creationTimestamp": stamp,
        }
    )
    meta["managedFields"] = [
        {
            "manager": "OpenAPI-Generator",
            "operation": "Update",
            "apiVersion": "v1",
            "time": stamp,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": _fields(list(meta["annotations"])),
                    "f:labels": _fields(list(meta["labels"])),
                },
                "f:spec": {
                    "f:podCIDR": {},
                    "f:podCIDRs": {".": {}, f'v:"{raw["spec"]["podCIDR"]}"': {}},
                },
            },
        },
        {
            "manager": "kwok",
            "operation": "Update",
            "apiVersion": "v1",
            "time": stamp,
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": {
                "f:status": {
                    "f:allocatable": _fields(list(raw["status"]["allocatable"])),
                    "f:capacity": _fields(list(raw["status"]["capacity"])),
                    "f:conditions": {
                        ".": {},
                        **{
                            f'k:{{"type":"{kind}"}}': {
                                ".": {},
                                **_fields(
                                    [
                                        "lastHeartbeatTime",
                                        "lastTransitionTime",
                                        "message",
                                        "reason",
                                        "status",
                                        "type",
                                    ]
                                ),
                            }
                            for kind, *_ in CONDITIONS
                        },
                    },
                    "f:daemonEndpoints": {"f:kubeletEndpoint": {"f:Port": {}}},
                    "f:nodeInfo": _fields(list(raw["status"]["nodeInfo"])),
                    "f:phase": {},
                }
            },
        },
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": stamp,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}}},
        },
    ]
    raw["status"].update(
        {
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
                for kind, status, reason, message in CONDITIONS
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "phase": "Running",
        }
    )
    return raw


# --- the API server ----------------------------------------------------------------------------


class NodeServer:
    """``GET /api/v1/nodes`` over N simulated nodes, encoded once; ``limit`` and ``continue``
    honoured (the token is the offset of the next page), the label selector checked."""

    VERSION = 900_000

    def __init__(self, count: int) -> None:
        self.items = [
            json.dumps(simulated_node(i, self.VERSION), separators=(",", ":")).encode()
            for i in range(count)
        ]
        self.requests = 0

    @property
    def bytes_per_node(self) -> float:
        return sum(map(len, self.items)) / len(self.items)

    async def nodes(self, request: web.Request) -> web.Response:
        self.requests += 1
        if request.query.get("labelSelector", "") != SELECTOR:
            return web.json_response({"kind": "Status", "code": 400}, status=400)
        offset = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0) or len(self.items)
        end = offset + limit
        meta = {
            "resourceVersion": str(self.VERSION),
            "continue": str(end) if end < len(self.items) else "",
        }
        head = json.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": meta})
        body = b"".join(
            [head[:-1].encode(), b',"items":[', b",".join(self.items[offset:end]), b"]}"]
        )
        return web.Response(body=body, content_type="application/json")

    async def start(self) -> tuple[web.AppRunner, int]:
        app = web.Application()
        app.router.add_get("/api/v1/nodes", self.nodes)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return runner, int(runner.addresses[0][1])


def kubeconfig(port: int, folder: Path) -> Path:
    path = folder / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bench", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "bench", "user": {"token": "bench"}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
        "current-context": "bench",
    }
    path.write_text(json.dumps(config))
    return path


# --- one variant, in a process of its own -------------------------------------------------------


def _reset_peak() -> None:
    """VmHWM := VmRSS (Linux 4.0 and later)."""
    Path("/proc/self/clear_refs").write_text("5")


def _status(field: str) -> int:
    """A VmRSS/VmHWM figure of this process, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


async def measure(variant: str, config: str, lists: int, traced: bool) -> dict[str, Any]:
    kube = await KubeClient.connect(config)
    view = NodeView()

    async def one() -> int:
        if variant == "one":
            # Every Node in one request, as the operator read them before the pages.
            data = await kube.request(
                "list", "GET", "/api/v1/nodes", resource="nodes", query={"labelSelector": SELECTOR}
            )
            version = str((data.get("metadata") or {}).get("resourceVersion") or "")
            view.replace_all(data.get("items") or [], version)
            return 1
        listed = await list_nodes(kube, SELECTOR)
        view.replace_converted(listed.entries, listed.resource_version)
        return listed.pages

    try:
        # Everything imported and the connection open before anything is measured.
        await kube.request(
            "list",
            "GET",
            "/api/v1/nodes",
            resource="nodes",
            query={"labelSelector": SELECTOR, "limit": 1},
        )
        if traced:
            tracemalloc.start()
        out: dict[str, Any] = await _lists(one, lists, traced)
    finally:
        await kube.close()
    out["nodes"] = len(view)
    return out


async def _lists(one: Callable[[], Awaitable[int]], lists: int, traced: bool) -> dict[str, Any]:
    _reset_peak()
    rss0 = _status("VmRSS")
    traced0 = tracemalloc.get_traced_memory()[0] if traced else 0
    seconds, cpu, peaks, rss_after = [], [], [], []
    pages = 0
    for _ in range(lists):
        if traced:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        began, began_cpu = time.perf_counter(), time.process_time()
        pages = await one()
        seconds.append(time.perf_counter() - began)
        cpu.append(time.process_time() - began_cpu)
        if traced:
            peaks.append(tracemalloc.get_traced_memory()[1] - before)
        rss_after.append(_status("VmRSS") - rss0)
    return {
        "pages": pages,
        "seconds": seconds,
        "cpu": cpu,
        "rss_first": rss_after[0],
        "rss_last": rss_after[-1],
        "rss_peak": _status("VmHWM") - rss0,
        "traced_peak": max(peaks) if traced else None,
        "traced_kept": tracemalloc.get_traced_memory()[0] - traced0 if traced else None,
    }


def child(args: argparse.Namespace) -> int:
    result = asyncio.run(measure(args.child, args.kubeconfig, args.lists, args.traced))
    print(json.dumps(result))
    return 0


# --- the runs ----------------------------------------------------------------------------------


@dataclass
class Trial:
    size: int
    variant: str
    plain: dict[str, Any]
    traced: dict[str, Any]


async def run_child(variant: str, config: Path, lists: int, traced: bool) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO / "operator"), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    env.pop("KUBECONFIG", None)
    cmd = [sys.executable, str(SCRIPT), "--child", variant]
    cmd += ["--kubeconfig", str(config), "--lists", str(lists)] + (["--traced"] if traced else [])
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} exited with {proc.returncode}:\n{err.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def run(sizes: list[int], trials: int, lists: int) -> tuple[list[Trial], dict[int, float]]:
    results: list[Trial] = []
    per_node: dict[int, float] = {}
    for size in sizes:
        server = NodeServer(size)
        per_node[size] = server.bytes_per_node
        runner, port = await server.start()
        try:
            with tempfile.TemporaryDirectory(prefix="phased-relist-") as folder:
                config = kubeconfig(port, Path(folder))
                for trial in range(trials):
                    order = list(VARIANTS) if trial % 2 == 0 else list(VARIANTS)[::-1]
                    for variant in order:
                        plain = await run_child(variant, config, lists, traced=False)
                        traced = await run_child(variant, config, lists, traced=True)
                        results.append(Trial(size, variant, plain, traced))
                        print(
                            f"{size:>6} nodes  {VARIANTS[variant]:<14} trial {trial + 1}: "
                            f"RSS +{plain['rss_first'] / MIB:.1f} MiB after the first list, "
                            f"peak +{plain['rss_peak'] / MIB:.1f} MiB, traced peak "
                            f"{traced['traced_peak'] / MIB:.1f} MiB, "
                            f"{statistics.median(plain['seconds']) * 1000:.0f} ms a list "
                            f"({statistics.median(plain['cpu']) * 1000:.0f} ms of CPU)",
                            flush=True,
                        )
        finally:
            await runner.cleanup()
    return results, per_node


def saving(results: list[Trial], per_node: dict[int, float]) -> str:
    """One sentence a size: what the pages save, from the medians above."""

    def med(size: int, variant: str, key: str) -> float:
        return median([t.plain[key] for t in results if t.size == size and t.variant == variant])

    parts = [
        f"at {size:,} nodes {med(size, 'one', 'rss_first') / MIB:.1f} -> "
        f"{med(size, 'paged', 'rss_first') / MIB:.1f} MiB after the first list, "
        f"{med(size, 'one', 'rss_last') / MIB:.1f} -> {med(size, 'paged', 'rss_last') / MIB:.1f} "
        f"MiB after the last, peak {med(size, 'one', 'rss_peak') / MIB:.1f} -> "
        f"{med(size, 'paged', 'rss_peak') / MIB:.1f} MiB"
        for size in sorted(per_node)
    ]
    return "RSS growth, one request -> pages (medians): " + "; ".join(parts) + "."


def report(
    results: list[Trial],
    per_node: dict[int, float],
    trials: int,
    lists: int,
    write: bool,
    load_at_start: str,
) -> None:
    rows = []
    for size in sorted(per_node):
        for variant, name in VARIANTS.items():
            mine = [t for t in results if t.size == size and t.variant == variant]
            if not mine:
                continue

            def mib(values: list[float]) -> str:
                return (
                    f"{median(values) / MIB:.1f} ({min(values) / MIB:.1f}-{max(values) / MIB:.1f})"
                )

            def ms(runs: list[list[float]]) -> str:
                return f"{median([statistics.median(r) * 1000 for r in runs]):.0f}"

            rows.append(
                (
                    f"{size:,}",
                    name,
                    mine[0].plain["pages"],
                    mib([t.plain["rss_first"] for t in mine]),
                    mib([t.plain["rss_last"] for t in mine]),
                    mib([t.plain["rss_peak"] for t in mine]),
                    mib([t.traced["traced_peak"] for t in mine]),
                    mib([t.traced["traced_kept"] for t in mine]),
                    ms([t.plain["seconds"] for t in mine]),
                    ms([t.plain["cpu"] for t in mine]),
                )
            )
    headers = (
        "nodes",
        "list",
        "requests a list",
        "RSS growth after the 1st list MiB",
        f"RSS growth after list {lists} MiB",
        "peak RSS growth MiB",
        "peak traced during a list MiB",
        "traced kept (the view) MiB",
        "ms a list",
        "CPU ms a list (client)",
    )
    text = table(headers, rows)
    print()
    print(text)
    sizes = ", ".join(sorted({f"{b / 1024:.1f} KiB" for b in per_node.values()}))
    body = f"""{text}

{saving(results, per_node)}

Medians of {trials} trials (min-max in brackets); each trial runs each variant in fresh
processes of its own (one untraced for RSS and time, one under `tracemalloc`), the variants
in alternating order. Each process lists {lists} times into one node view: the first list
fills it (start-up), the others replace it (the periodic relist). "one request" is
one `GET /api/v1/nodes` + `NodeView.replace_all`, the whole list read and decoded at once (the
code before pages); "pages of {LIST_PAGE}" is `list_nodes` + `NodeView.replace_converted`,
each page converted before the next is read (the code now).

The API server is the bench's own, in its process on 127.0.0.1, serving Nodes shaped as the
bench cluster's simulated H100 nodes come from its API server (labels incl. the GPU and
topology labels, kwok's five conditions, managed fields of three writers), {sizes} of JSON
a node. RSS growth is VmRSS after the list less VmRSS before the first (the process has
imported everything and made one small request); peak RSS growth is VmHWM (reset before
the first list) less the same. Peak traced is the largest rise of the traced memory during
one list over what was traced before it; kept is what is traced after the last list over
before the first. "ms a list" is wall time on a shared machine (the server's share and
others' load included); "CPU ms" is the listing process's own CPU time (user and system),
which load from others touches less. Load average at the start: {load_at_start}; at the
end: {load_average()}.
"""
    if write:
        write_section(
            "relist-memory",
            "4d. A full Node list in memory: one request against pages",
            body,
            {"Trials": f"{trials} per size and variant, {lists} lists each"},
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,5000")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--lists", type=int, default=3, help="lists in each process")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    sizes = [int(s) for s in args.sizes.split(",")]
    load_at_start = load_average()
    results, per_node = asyncio.run(run(sizes, args.trials, args.lists))
    report(results, per_node, args.trials, args.lists, not args.no_write, load_at_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
