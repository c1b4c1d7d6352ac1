"""`helm lint` passes, and the chart renders with defaults and with every toggle flipped."""

from __future__ import annotations

from collections import Counter

import yaml

from tests.helm.chart import CHART, MONITORING, helm, needs_helm, render

pytestmark = needs_helm

EVERYTHING_ON = (
    "metrics.serviceMonitor.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "leaderElection.enabled=true",
    "fullnameOverride=gpu-operator",
    "podAnnotations.example\\.com/team=ml",
    "priorityClassName=system-cluster-critical",
    "priorityClass.create=false",
    "replicaCount=2",
    "image.digest=sha256:" + "ab" * 32,
)


def test_helm_lint_is_clean() -> None:
    result = helm("lint", str(CHART), "--strict")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_helm_lint_is_clean_with_non_default_values() -> None:
    # helm lint cannot be told of extra APIs, so the prometheus-operator objects stay off here.
    args = [f"--set={s}" for s in EVERYTHING_ON if "metrics." not in s]
    result = helm("lint", str(CHART), "--strict", *args, "--set", "metrics.dashboard.enabled=false")
    assert result.returncode == 0, result.stdout + result.stderr


def test_defaults_render_the_expected_objects() -> None:
    kinds = Counter(d["kind"] for d in render())
    assert kinds == Counter(
        {
            "CustomResourceDefinition": 1,
            "ServiceAccount": 1,
            "ClusterRole": 1,
            "ClusterRoleBinding": 1,
            "ConfigMap": 2,  # settings, dashboard
            "Service": 2,  # metrics, checkpoint reports
            "Secret": 1,  # the report-token key
            "Deployment": 1,
            "PriorityClass": 1,  # phased-operator, priorityClass.create
        }
    )


def test_everything_on_renders_with_the_names_overridden() -> None:
    docs = render(*EVERYTHING_ON, api_versions=(MONITORING,))
    kinds = Counter(d["kind"] for d in docs)
    assert kinds["ServiceMonitor"] == kinds["PrometheusRule"] == kinds["Role"] == 1
    for doc in docs:
        if doc["kind"] != "CustomResourceDefinition":
            assert doc["metadata"]["name"].startswith("gpu-operator"), doc["metadata"]["name"]
            assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "phased"


def test_every_rendered_object_is_plain_yaml_with_a_name() -> None:
    for doc in render(*EVERYTHING_ON, api_versions=(MONITORING,)):
        assert doc["apiVersion"] and doc["metadata"]["name"]
        assert yaml.safe_load(yaml.safe_dump(doc)) == doc


def test_notes_tell_a_person_what_to_do_next() -> None:
    result = helm("install", "phased", str(CHART), "--dry-run=client", "-n", "phased-system")
    assert result.returncode == 0, result.stderr
    notes = result.stdout.split("NOTES:", 1)[1]
    assert "kubectl get tj -A -w" in notes
    assert "kubectl apply -f examples/" in notes
    assert "port-forward svc/phased-metrics 8080:8080" in notes
