"""docs/metrics.md names every metric Metrics.create registers, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from phased.metrics import Metrics

DOC = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
SUFFIX = {"counter": "_total"}


def _exported() -> set[str]:
    registry = CollectorRegistry()
    Metrics.create(registry)
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {f.name + SUFFIX.get(f.type, "") for f in families if not f.name.endswith("_created")}


def test_every_metric_is_in_the_docs() -> None:
    documented = set(re.findall(r"`(phased_[a-z0-9_]+)`", DOC))
    exported = _exported()
    assert exported - documented == set(), "undocumented metrics"
    assert documented - exported == set(), "documented metrics that do not exist"
