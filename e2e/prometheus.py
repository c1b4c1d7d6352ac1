"""A real Prometheus for the end-to-end tests: it scrapes the operator and evaluates the chart's
alert rules, and the tests read it through its HTTP API as Grafana and Alertmanager would.

The binary is the one ``e2e/cluster/build.sh prometheus`` caches (or ``prometheus`` on PATH).
It runs as a local process on a free port with its data in a temporary folder; scrape and
rule evaluation every second keep a test short.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e.harness import free_port


@functools.cache
def prometheus_binary() -> str | None:
    """prometheus from PATH, else the newest one the build caches (never a half-built .tmp)."""
    found = shutil.which("prometheus")
    if found:
        return found
    caches = [Path(os.environ["PHASED_CACHE"])] if os.environ.get("PHASED_CACHE") else []
    caches.append(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "phased")
    for cache in caches:
        for candidate in sorted((cache / "bin").glob("prometheus-*/prometheus"), reverse=True):
            if not candidate.parent.name.endswith(".tmp") and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def require_prometheus() -> str:
    """The binary; skip without it (fail when CI is set), saying how to build it."""
    binary = prometheus_binary()
    if binary is None:
        message = (
            "no prometheus binary: not in PATH, nor in ~/.cache/phased/bin/prometheus-*/ "
            "(build it with `bash e2e/cluster/build.sh prometheus`)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI is set, so this is a failure, not a skip")
        pytest.skip(message)
    return binary


class QueryError(AssertionError):
    """Prometheus answered a query with an error."""


class Prometheus:
    """One Prometheus process scraping ``targets`` every second, evaluating ``rules``."""

    def __init__(self, workdir: Path, targets: list[str], rules: dict[str, Any]) -> None:
        self.workdir = workdir
        self.targets = targets
        self.rules = rules
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Prometheus:
        binary = require_prometheus()
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "rules.yaml").write_text(yaml.safe_dump(self.rules, sort_keys=False))
        config = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "rule_files": ["rules.yaml"],
            "scrape_configs": [
                {
                    "job_name": "phased",
                    # as the chart's ServiceMonitor: the job's own namespace label wins
                    "honor_labels": True,
                    "static_configs": [{"targets": self.targets}],
                }
            ],
        }
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                # targets reach the scraper after 1 s, not the default 5 s
                "--scrape.discovery-reload-interval=1s",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}:\n{self.tail()}")
            if self._status("/-/ready") == 200:
                return self
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready after {timeout}s:\n{self.tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _status(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=2) as r:
                return int(r.status)
        except OSError as exc:
            code = getattr(exc, "code", None)
            return int(code) if code is not None else None

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the ``data`` of a success, else :class:`QueryError`."""
        query = urllib.parse.urlencode(params)
        url = f"{self.url}/api/v1/{path}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise QueryError(f"{params or path}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result (a vector: ``[{"metric": {...}, "value": [t, "v"]}]``)."""
        data = self.api("query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result if data["resultType"] in ("vector", "matrix") else [{"value": result}]

    def value(self, expr: str) -> float | None:
        """The value of a query that gives one series, ``None`` when it gives none."""
        result = self.query(expr)
        assert len(result) <= 1, f"{expr} gave {len(result)} series: {result}"
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return alerts


def with_short_for(groups: dict[str, Any], seconds: int = 2) -> dict[str, Any]:
    """The rules with every ``for`` cut to ``seconds``: the e2e run checks that the expressions
    hold on the operator's real series; the ``for`` durations are promtool's part
    (tests/alerts)."""
    copied: dict[str, Any] = json.loads(json.dumps(groups))
    for group in copied["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = f"{seconds}s"
    return copied
