"""Render the chart with the helm binary, and the facts about it the tests share."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "phased"
RELEASE = "phased"
NAMESPACE = "phased-system"
MONITORING = "monitoring.coreos.com/v1"


@functools.cache
def helm_binary() -> str | None:
    """helm from PATH, else the one e2e/cluster/build.sh caches (never a half-built .tmp)."""
    found = shutil.which("helm")
    if found:
        return found
    caches = [Path(os.environ["PHASED_CACHE"])] if os.environ.get("PHASED_CACHE") else []
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    caches.append(xdg / "phased")
    for cache in caches:
        for candidate in sorted((cache / "bin").glob("helm-*/helm"), reverse=True):
            if not candidate.parent.name.endswith(".tmp") and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


# Skips without helm, fails without it in CI (tests/tools.py; the fixture: tests/helm/conftest.py).
needs_helm = pytest.mark.usefixtures("helm_present")


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    binary = helm_binary()
    assert binary is not None
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/phased-helm-test/cache",
           "HELM_CONFIG_HOME": "/tmp/phased-helm-test/config",
           "HELM_DATA_HOME": "/tmp/phased-helm-test/data"}  # fmt: skip
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def template_result(
    *sets: str, values: dict[str, Any] | None = None, api_versions: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--include-crds"]
    for s in sets:
        args += ["--set", s]
    for api in api_versions:
        args += ["--api-versions", api]
    if values is not None:
        path = Path("/tmp/phased-helm-test")
        path.mkdir(parents=True, exist_ok=True)
        file = path / f"values-{abs(hash(repr(values)))}.yaml"
        file.write_text(yaml.safe_dump(values))
        args += ["--values", str(file)]
    return helm(*args)


@functools.cache
def _render(
    sets: tuple[str, ...], values: str | None, api_versions: tuple[str, ...]
) -> tuple[dict[str, Any], ...]:
    parsed = yaml.safe_load(values) if values is not None else None
    result = template_result(*sets, values=parsed, api_versions=api_versions)
    assert result.returncode == 0, result.stderr
    return tuple(d for d in yaml.safe_load_all(result.stdout) if d)


def render(
    *sets: str, values: dict[str, Any] | None = None, api_versions: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """Every object `helm template` prints, CRDs included (``sets`` as with ``--set``)."""
    text = yaml.safe_dump(values) if values is not None else None
    return list(_render(tuple(sets), text, tuple(api_versions)))


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]
