"""Find promtool (built by e2e/cluster/build-prometheus.sh) and render the chart's alert rules.

A test that needs promtool (or helm, to render the chart) skips when the binary is missing,
saying how to build it, and fails instead when the environment variable ``CI`` is set: CI
builds both before the unit suite (``.ci/run``), so a missing one there is a broken build.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helm.chart import MONITORING, helm_binary, one, render

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
RULE_FILE = "rules.yaml"


def _caches() -> list[Path]:
    caches = [Path(os.environ["PHASED_CACHE"])] if os.environ.get("PHASED_CACHE") else []
    caches.append(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "phased")
    return caches


@functools.cache
def promtool_binary() -> str | None:
    """promtool from PATH, else the newest one the build caches (never a half-built .tmp)."""
    found = shutil.which("promtool")
    if found:
        return found
    for cache in _caches():
        for candidate in sorted((cache / "bin").glob("prometheus-*/promtool"), reverse=True):
            if not candidate.parent.name.endswith(".tmp") and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def require(binary: str | None, what: str, build: str) -> str:
    """``binary``, or skip (fail under CI) with how to get it."""
    if binary is not None:
        return binary
    message = (
        f"no {what} binary: not in PATH, nor in ~/.cache/phased/bin/ "
        f"(build it with `bash e2e/cluster/build.sh {build}`)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, so this is a failure, not a skip")
    pytest.skip(message)


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    binary = require(promtool_binary(), "promtool", "prometheus")
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


@functools.cache
def _rule_groups() -> str:
    docs = render("metrics.prometheusRule.enabled=true", api_versions=(MONITORING,))
    rule = one(docs, "PrometheusRule")
    return yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False)


def rule_groups() -> dict[str, Any]:
    """The chart's PrometheusRule (default thresholds) as a Prometheus rule file."""
    require(helm_binary(), "helm", "helm")
    data: dict[str, Any] = yaml.safe_load(_rule_groups())
    return data


def alert_names() -> list[str]:
    return [r["alert"] for g in rule_groups()["groups"] for r in g["rules"] if "alert" in r]


def write_rule_file(directory: Path) -> Path:
    path = directory / RULE_FILE
    path.write_text(yaml.safe_dump(rule_groups(), sort_keys=False))
    return path
