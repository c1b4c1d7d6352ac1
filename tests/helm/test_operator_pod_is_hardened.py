"""The operator's Deployment: one replica, Recreate, a locked-down pod, probes, resources."""

from __future__ import annotations

from typing import Any

from tests.helm.chart import find, needs_helm, one, render

pytestmark = needs_helm


def _pod(*sets: str) -> dict[str, Any]:
    spec: dict[str, Any] = one(render(*sets), "Deployment")["spec"]["template"]["spec"]
    return spec


def _container(*sets: str) -> dict[str, Any]:
    (container,) = _pod(*sets)["containers"]
    return dict(container)


def test_one_replica_replaced_by_recreate() -> None:
    spec = one(render(), "Deployment")["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}


def test_the_pod_runs_as_an_unprivileged_user() -> None:
    pod = _pod()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is True
    sc = _container()["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert "add" not in sc["capabilities"]
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID")


def test_a_read_only_root_still_has_a_writable_tmp() -> None:
    pod = _pod()
    mounts = {m["name"]: m["mountPath"] for m in _container()["volumeMounts"]}
    assert mounts["tmp"] == "/tmp"
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]


def test_probes_use_the_operators_health_endpoints() -> None:
    container = _container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "health": 8081, "reports": 8082}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    moved = _container("settings.healthPort=9001", "settings.metricsPort=9000")
    assert {p["name"]: p["containerPort"] for p in moved["ports"]} == {
        "metrics": 9000,
        "health": 9001,
        "reports": 8082,
    }
    quiet = _container("reports.enabled=false")
    assert {p["name"] for p in quiet["ports"]} == {"metrics", "health"}


def test_the_container_runs_phased_run_with_resources() -> None:
    container = _container()
    assert container["command"] == ["phased"]
    assert container["args"] == ["run"]
    assert container["image"] == "phased:0.1.0"
    assert container["resources"]["requests"] == {"cpu": "200m", "memory": "256Mi"}
    assert container["resources"]["limits"]["memory"] == "1Gi"
    extra = _container("operator.extraArgs={--namespace,ml-team,--verbose}", "image.tag=dev")
    assert extra["args"] == ["run", "--namespace", "ml-team", "--verbose"]
    assert extra["image"] == "phased:dev"


def test_the_metrics_service_selects_the_operator_pod() -> None:
    docs = render()
    service = one(docs, "Service", "phased-metrics")
    pod_labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert not find(render("metrics.service.enabled=false"), "Service", "phased-metrics")


def test_the_crd_is_shipped_in_crds_so_helm_keeps_it_on_uninstall() -> None:
    crd = one(render(), "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "trainingjobs.phased.dev"
    assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})
