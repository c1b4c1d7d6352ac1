"""Run the Phased operator as a real process against the test cluster, and read its state.

Used by the end-to-end tests, the demo and the benchmarks: the operator runs exactly as a
user runs it (``python -m phased run``), with its own metrics and health ports, and can be
stopped politely or killed with SIGKILL at any moment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CRD = REPO / "crds" / "trainingjobs.phased.dev.yaml"
TEST_SETTINGS = REPO / "e2e" / "settings.yaml"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Operator:
    """One operator process; ``start()``, ``kill()`` (SIGKILL) and ``stop()`` (SIGTERM)."""

    def __init__(
        self,
        kubeconfig: str,
        log_path: Path,
        *,
        settings: Path | None = TEST_SETTINGS,
        env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.settings = settings
        self.env = env or {}
        self.extra_args = extra_args or []
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.report_port = free_port()  # used when the settings give a report key
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, wait_ready: bool = True) -> Operator:
        env = {
            **os.environ,
            "PHASED_METRICS_PORT": str(self.metrics_port),
            "PHASED_HEALTH_PORT": str(self.health_port),
            "PHASED_REPORT_PORT": str(self.report_port),
            "PYTHONUNBUFFERED": "1",
            # Run this checkout's operator, whichever copy of the package is installed.
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO / "operator"), os.environ.get("PYTHONPATH", "")) if p
            ),
            **self.env,
        }
        args = [*self.interpreter(), "-m", "phased", "run", "--kubeconfig", self.kubeconfig]
        if self.settings is not None:
            args += ["--settings", str(self.settings)]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        log.write(f"\n===== start #{self.starts + 1} at {time.strftime('%X')} =====\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            args + self.extra_args, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        self.starts += 1
        if wait_ready:
            self.wait_ready()
        return self

    def interpreter(self) -> list[str]:
        """The command the operator's ``-m phased`` runs under (a subclass may wrap it)."""
        return [sys.executable]

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"operator exited with {self.proc.returncode}:\n{self.tail()}")
            if self.http_status("/readyz") == 200:
                return
            time.sleep(0.2)
        raise TimeoutError(f"operator not ready after {timeout}s:\n{self.tail()}")

    def http_status(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}{path}", timeout=2
            ) as r:
                return int(r.status)
        except OSError as exc:
            code = getattr(exc, "code", None)
            return int(code) if code is not None else None

    def scrape(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            return str(r.read().decode())

    def kill(self) -> None:
        """SIGKILL: no cleanup, no last status write — the crash the design must survive."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def metric_values(exposition: str, name: str, **match: str) -> list[float]:
    """Values of the samples named ``name`` whose labels include ``match``."""
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in match.items()):
                out.append(float(sample.value))
    return out


def wait_for(
    what: str, check: Callable[[], Any], timeout: float = 120.0, every: float = 0.5
) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, default=str)[:4000]
