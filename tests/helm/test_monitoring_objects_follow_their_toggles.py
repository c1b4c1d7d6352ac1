"""ServiceMonitor and PrometheusRule are off by default and refuse a cluster without their API."""

from __future__ import annotations

import pytest

from tests.helm.chart import MONITORING, find, needs_helm, one, render, template_result

pytestmark = needs_helm

OPTIONAL = {
    "ServiceMonitor": "metrics.serviceMonitor.enabled",
    "PrometheusRule": "metrics.prometheusRule.enabled",
}


def test_defaults_ship_the_dashboard_but_no_prometheus_operator_objects() -> None:
    docs = render(api_versions=(MONITORING,))
    assert not find(docs, "ServiceMonitor")
    assert not find(docs, "PrometheusRule")
    assert one(docs, "ConfigMap", "phased-dashboard")


@pytest.mark.parametrize(("kind", "key"), OPTIONAL.items())
def test_enabled_without_the_monitoring_api_fails_with_a_clear_message(kind: str, key: str) -> None:
    result = template_result(f"{key}=true")
    assert result.returncode != 0
    assert f"{key.removesuffix('.enabled')} is enabled" in result.stderr
    assert "monitoring.coreos.com/v1" in result.stderr
    assert f"set {key}=false" in result.stderr


@pytest.mark.parametrize(("kind", "key"), OPTIONAL.items())
def test_enabled_with_the_monitoring_api_renders(kind: str, key: str) -> None:
    docs = render(f"{key}=true", api_versions=(MONITORING,))
    obj = one(docs, kind)
    assert obj["apiVersion"] == MONITORING
    assert obj["metadata"]["namespace"] == "phased-system"


def test_the_service_monitor_scrapes_the_metrics_service() -> None:
    docs = render(
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
        "metrics.serviceMonitor.interval=15s",
        api_versions=(MONITORING,),
    )
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service", "phased-metrics")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["interval"] == "15s"
    assert endpoint["honorLabels"] is True  # keep the jobs' own namespace label


def test_a_service_monitor_without_the_service_is_refused() -> None:
    result = template_result(
        "metrics.serviceMonitor.enabled=true",
        "metrics.service.enabled=false",
        api_versions=(MONITORING,),
    )
    assert result.returncode != 0
    assert "needs metrics.service.enabled" in result.stderr


def test_the_rules_hold_the_documented_alerts() -> None:
    rule = one(
        render("metrics.prometheusRule.enabled=true", api_versions=(MONITORING,)), "PrometheusRule"
    )
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) >= {
        "PhasedInterruptionBudgetBurningFast",
        "PhasedMassFailure",
        "PhasedCapacityShort",
        "PhasedNoSpareLeft",
        "PhasedOperatorNotReconciling",
    }
    for name, alert in alerts.items():
        assert alert["labels"]["severity"] in {"warning", "critical"}, name
        assert alert["annotations"]["summary"] and alert["annotations"]["description"], name
    assert alerts["PhasedCapacityShort"]["for"] == "30m"
    assert (
        "0.25 * phased_job_interruption_budget_seconds"
        in (alerts["PhasedInterruptionBudgetBurningFast"]["expr"])
    )


def test_thresholds_come_from_values() -> None:
    rule = one(
        render(
            "metrics.prometheusRule.enabled=true",
            "metrics.prometheusRule.thresholds.capacityShortFor=2h",
            values={
                "metrics": {
                    "prometheusRule": {
                        "thresholds": {"massFailureShare": 0.3, "reconcileErrorShare": 0.05}
                    }
                }
            },
            api_versions=(MONITORING,),
        ),
        "PrometheusRule",
    )
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert alerts["PhasedCapacityShort"]["for"] == "2h"
    assert "floor(0.3 * sum" in alerts["PhasedMassFailure"]["expr"]
    assert "> 0.05" in alerts["PhasedReconcileErrors"]["expr"]


def test_the_dashboard_can_be_turned_off_or_moved() -> None:
    assert not find(render("metrics.dashboard.enabled=false"), "ConfigMap", "phased-dashboard")
    moved = one(render("metrics.dashboard.namespace=monitoring"), "ConfigMap", "phased-dashboard")
    assert moved["metadata"]["namespace"] == "monitoring"
    assert moved["metadata"]["labels"]["grafana_dashboard"] == "1"
