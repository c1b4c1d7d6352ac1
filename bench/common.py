"""Shared helpers for the benchmarks: the machine, tables, RESULTS.md sections, statistics,
and a bench-only cluster instance that never touches the default one.

Benchmarks print figures; they never fail on a timing.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "RESULTS.md"
E2E = REPO / "e2e"

# --- the machine ---------------------------------------------------------------------------


def machine() -> str:
    """``nproc``, memory and CPU model, as one line."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {mem} memory, {model}; "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def command_line() -> str:
    """The command that ran this benchmark, as a person would type it."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(REPO))
    except ValueError:
        shown = str(script)
    return " ".join(["python", shown, *map(shlex.quote, sys.argv[1:])])


# --- tables ----------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table (readable as plain text too)."""
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


# --- statistics ------------------------------------------------------------------------------


def nearest_rank(n: int, p: float) -> int:
    """The 1-based nearest rank of the ``p``-th percentile among ``n`` sorted values:
    ``ceil(p/100 * n)``, at least 1. With fewer than ``100 / (100 - p)`` values it is ``n``,
    the maximum (p99 needs 100 values to be anything but the maximum, p90 needs 10)."""
    return max(1, min(n, math.ceil(p / 100 * n - 1e-9)))


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank on the sorted values); NaN when empty."""
    if not values:
        return float("nan")
    return float(sorted(values)[nearest_rank(len(values), p) - 1])


def is_max_rank(n: int, p: float) -> bool:
    """True when the ``p``-th percentile of ``n`` values is just their maximum."""
    return n > 0 and p < 100 and nearest_rank(n, p) == n


def load_average() -> str:
    """The 1, 5 and 15-minute load averages and the CPU count, as one phrase."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} CPUs"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


# --- RESULTS.md ------------------------------------------------------------------------------

_HEADER = """# Benchmark results

Produced by the commands in `bench/README.md`; each section is rewritten by its benchmark
(the command, the machine and the date are recorded with it). Benchmarks print figures; they
never fail on a timing.
"""


def read_section(key: str) -> str | None:
    """The text of the section ``key`` of bench/RESULTS.md as last written, or None."""
    if not RESULTS.exists():
        return None
    start, end = f"<!-- bench:{key} -->", f"<!-- /bench:{key} -->"
    match = re.search(re.escape(start) + r"(.*?)" + re.escape(end), RESULTS.read_text(), re.S)
    return match.group(1) if match else None


def write_section(
    key: str, title: str, body: str, details: Mapping[str, str] | None = None
) -> None:
    """Replace (or append) the section ``key`` of bench/RESULTS.md. ``details`` are more
    lines of the header list (name -> text), after the command, machine and date."""
    start, end = f"<!-- bench:{key} -->", f"<!-- /bench:{key} -->"
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    extra = "".join(f"- {name}: {text}\n" for name, text in (details or {}).items())
    block = (
        f"{start}\n## {title}\n\n"
        f"- Command: `{command_line()}`\n"
        f"- Machine: {machine()}\n"
        f"- Date: {stamp}\n"
        f"{extra}\n"
        f"{body.strip()}\n{end}"
    )
    text = RESULTS.read_text() if RESULTS.exists() else _HEADER
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    RESULTS.write_text(text.rstrip() + "\n")
    print(f"\n(written to {RESULTS.relative_to(REPO)}, section '{title}')")


# --- the CRD ---------------------------------------------------------------------------------


def crd_established(kubectl: Any, name: str = "trainingjobs.phased.dev") -> bool:
    """The CRD's Established condition is True. Polled, since ``kubectl wait`` fails
    outright while a CRD just created has no conditions yet."""
    out = kubectl.run(
        "get",
        f"crd/{name}",
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Established')].status}",
        check=False,
    )
    return str(out.stdout).strip() == "True"


# --- a bench-only cluster instance -----------------------------------------------------------

# Own name, folder and ports: the default instance (phased-e2e, ports 32761-32766) that other
# people's e2e runs use is never touched. down.sh with the same environment stops only this one.
BENCH_PORT_BASE = 32800
KUBELET_LEASE_SECONDS = 40  # a kubelet's nodeLeaseDurationSeconds; renewed every 10 s


def lease_note(lease_seconds: int) -> str:
    """What a section says of the simulated nodes' leases."""
    if lease_seconds == KUBELET_LEASE_SECONDS:
        return (
            f"The simulated nodes renew their Lease as kubelets do (every "
            f"{lease_seconds / 4:.0f} s)."
        )
    return (
        f"The simulated nodes renew their Lease every {lease_seconds / 4:.0f} s "
        f"(nodeLeaseDurationSeconds {lease_seconds}, a kubelet's is {KUBELET_LEASE_SECONDS}; "
        f"node monitor grace {lease_seconds} s to match): at thousands of nodes a kubelet's "
        "pace of renewals is most of what the API server and etcd do and would measure the "
        "machine, not the operator, which reads no Lease. Failures here are Node "
        "conditions, not expired leases."
    )


def bench_cluster_env(name: str, port_base: int = BENCH_PORT_BASE) -> dict[str, str]:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "phased"
    folder = cache / f"bench-{name}"
    return {
        "PHASED_CLUSTER_NAME": f"phased-bench-{name}",
        "PHASED_CLUSTER_DIR": str(folder),
        "PHASED_KUBECONFIG": str(folder / "kubeconfig"),
        "PHASED_KWOK_WORKDIR": str(folder / "kwok"),
        "PHASED_APISERVER_PORT": str(port_base),
        "PHASED_ETCD_PORT": str(port_base + 1),
        "PHASED_ETCD_PEER_PORT": str(port_base + 2),
        "PHASED_KCM_PORT": str(port_base + 3),
        "PHASED_SCHEDULER_PORT": str(port_base + 4),
        "PHASED_KWOK_PORT": str(port_base + 5),
    }


class BenchCluster:
    """``up()``/``down()`` of one bench-only instance through e2e/cluster/up.sh and down.sh."""

    def __init__(self, name: str, port_base: int = BENCH_PORT_BASE) -> None:
        self.env = bench_cluster_env(name, port_base)
        self.kubeconfig = self.env["PHASED_KUBECONFIG"]

    def _run(self, script: str, extra: Mapping[str, str]) -> None:
        env = {**os.environ, **self.env, "PYTHON": sys.executable, **extra}
        # The operator under test must not pick up someone else's kubeconfig.
        env.pop("KUBECONFIG", None)
        shown = " ".join(f"{k}={v}" for k, v in extra.items())
        print(f"$ {script} ({self.env['PHASED_CLUSTER_NAME']}; {shown})", flush=True)
        subprocess.run(["bash", str(E2E / "cluster" / script)], env=env, check=True)

    def up(
        self,
        *,
        h100: int,
        kcm_flags: str = "",
        recreate: bool = True,
        other: int = 0,
        lease_seconds: int = KUBELET_LEASE_SECONDS,
    ) -> None:
        if lease_seconds != KUBELET_LEASE_SECONDS:
            # A node whose Lease is renewed less often than the node monitor grace would go
            # Unknown: the grace follows the lease.
            kcm_flags = f"--node-monitor-grace-period={lease_seconds}s {kcm_flags}".strip()
        extra = {
            "PHASED_NODES_H100": str(h100),
            "PHASED_NODES_H200": str(other),
            "PHASED_NODES_ASCEND": str(other),
            "PHASED_NODES_CPU": str(other),
            # On two busy cores the controller-manager can miss a lease renewal and exit
            # (kwokctl does not restart it): a single instance needs no leader election.
            "PHASED_KCM_FLAGS": f"--leader-elect=false {kcm_flags}".strip(),
            "PHASED_SKIP_BUILD": "1",
            "PHASED_NODE_LEASE_SECONDS": str(lease_seconds),
            # Benchmarks measure the control plane and the operator on simulated nodes.
            "PHASED_REAL_NODES": os.environ.get("PHASED_REAL_NODES", "0"),
        }
        if recreate:
            extra["PHASED_CLUSTER_RECREATE"] = "1"
        self._run("up.sh", extra)

    def down(self) -> None:
        self._run("down.sh", {})
