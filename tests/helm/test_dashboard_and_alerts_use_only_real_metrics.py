"""The Grafana dashboard is valid, and every metric a query or alert names is one we export."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from phased.metrics import Metrics
from tests.helm.chart import CHART
from tests.metrics.statuses import failure, training_status

DASHBOARD = json.loads((CHART / "dashboards" / "phased.json").read_text())
RULES_TEMPLATE = (CHART / "templates" / "prometheusrule.yaml").read_text()
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
SELECTOR = re.compile(r"\b(phased_[a-z0-9_]+)\b(\{[^}]*\})?")
LABEL_MATCHER = re.compile(r"([a-z_]+)\s*(=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)")


def _exported() -> dict[str, set[str]]:
    """Every sample name a fresh Metrics registers, with the label names its samples carry."""
    registry = CollectorRegistry()
    metrics = Metrics.create(registry)
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for suffix in SUFFIXES.get(family.type, ("",)):
            names[family.name + suffix] = set()
    # Feed one job to learn the label names of the per-job series.
    metrics.observe_job("ns", "job", training_status(), training_status([failure(1)]), 8, 1)
    metrics.api_error("get", "pods")
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


EXPORTED = _exported()


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for panel in panels:
        found.append(panel)
        found += _panels(panel.get("panels", []))
    return found


PANELS = _panels(DASHBOARD["panels"])
QUERIES = [t["expr"] for p in PANELS for t in p.get("targets", [])]
ALERT_EXPRS = re.findall(r"expr: \|?\n?((?:.|\n)*?)\n\s+(?:for|labels):", RULES_TEMPLATE)


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    assert DASHBOARD["title"] and DASHBOARD["uid"]
    assert isinstance(DASHBOARD["schemaVersion"], int) and DASHBOARD["schemaVersion"] >= 36
    ids = [p["id"] for p in PANELS]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    for panel in PANELS:
        grid = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= grid.keys() and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["type"] in {"timeseries", "stat", "gauge", "bargauge", "state-timeline"}
        assert panel["title"] and panel["description"], panel["id"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
    variables = {v["name"] for v in DASHBOARD["templating"]["list"]}
    assert variables == {"datasource", "namespace", "trainingjob"}


def test_the_dashboard_covers_what_a_run_owner_asks() -> None:
    text = json.dumps(DASHBOARD)
    for metric in (
        "phased_job_current_phase",  # phase timeline
        "phased_job_nodes",  # pool sizes by role
        "phased_job_allocation_utilization_ratio",
        "phased_job_failures_total",
        "phased_job_failure_recovery_seconds_bucket",
        "phased_job_interruption_budget_seconds",
        "phased_job_cost_total",
    ):
        assert metric in text, metric


def test_per_job_panels_filter_on_the_selected_job() -> None:
    for query in QUERIES:
        if "phased_job_" in query:
            assert 'trainingjob="$trainingjob"' in query, query


def test_there_are_alert_expressions_to_check() -> None:
    assert len(ALERT_EXPRS) >= 5


@pytest.mark.parametrize("expr", QUERIES + ALERT_EXPRS)
def test_every_metric_and_label_in_a_query_is_exported(expr: str) -> None:
    mentioned = SELECTOR.findall(expr)
    assert mentioned, f"no phased_ metric in {expr!r}"
    for name, selector in mentioned:
        assert name in EXPORTED, f"{name} is not registered by Metrics.create"
        labels = set(LABEL_MATCHER.findall(selector))
        for label, _ in labels:
            assert label in EXPORTED[name] | {"le"}, f"{name} has no label {label!r}"
    all_labels = set().union(*(EXPORTED[n] for n, _ in mentioned)) | {"le"}
    for group in GROUPING.findall(expr):
        for label in filter(None, (g.strip() for g in group.split(","))):
            assert label in all_labels, f"grouping by {label!r}, which no series here carries"
