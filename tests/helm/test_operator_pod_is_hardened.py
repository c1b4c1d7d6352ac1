"""The operator's Deployment: one replica with Recreate (or RollingUpdate with leader election), a
locked-down pod off GPU and pool nodes at the operator's priority, probes, resources."""

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
    docs = render()
    spec = one(docs, "Deployment")["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    assert not find(docs, "PodDisruptionBudget"), "one replica: a budget would block drains"
    assert "podAntiAffinity" not in spec["template"]["spec"]["affinity"]


def test_leader_election_rolls_one_standby_at_a_time() -> None:
    spec = one(render("leaderElection.enabled=true"), "Deployment")["spec"]
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }


def test_several_replicas_get_a_disruption_budget_and_spread_over_nodes() -> None:
    docs = render("leaderElection.enabled=true", "replicaCount=3")
    deployment = one(docs, "Deployment")
    budget = one(docs, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert (
        budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    )
    (term,) = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == (deployment["spec"]["selector"]["matchLabels"])
    )


def _avoided(*sets: str) -> set[str]:
    affinity = _pod(*sets)["affinity"]["nodeAffinity"]
    (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {e["operator"] for e in term["matchExpressions"]} == {"DoesNotExist"}
    return {e["key"] for e in term["matchExpressions"]}


def test_the_operator_keeps_off_gpu_nodes_and_pool_nodes() -> None:
    assert _avoided() == {
        "phased.dev/job-uid",
        "phased.dev/role",
        "nvidia.com/gpu.product",  # settings.gpuTypes H100, H200
        "accelerator",  # settings.gpuTypes Ascend910B
        "nvidia.com/gpu.present",
        "feature.node.kubernetes.io/pci-10de.present",
        "feature.node.kubernetes.io/pci-19e5.present",
    }
    # A GPU type's own label keys are avoided too.
    assert "gpu.example.com/model" in _avoided(
        "settings.gpuTypes.H100.nodeLabels.gpu\\.example\\.com/model=h100"
    )
    # affinity.nodeAffinity replaces the rule; other affinity keys are kept beside it.
    infra = {"matchExpressions": [{"key": "role", "operator": "In", "values": ["infra"]}]}
    mine = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [infra]}}
    assert _pod_values({"affinity": {"nodeAffinity": mine}})["affinity"] == {"nodeAffinity": mine}
    extra = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    kept = _pod_values({"affinity": extra})["affinity"]
    assert kept["podAffinity"] == extra["podAffinity"] and "nodeAffinity" in kept


def _pod_values(values: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = one(render(values=values), "Deployment")["spec"]["template"]["spec"]
    return spec


def test_the_pod_runs_at_the_operators_priority_class() -> None:
    docs = render()
    assert _pod()["priorityClassName"] == "phased-operator"
    priority = one(docs, "PriorityClass")
    assert priority["metadata"]["name"] == "phased-operator"
    assert priority["value"] == 1_000_000
    assert priority["globalDefault"] is False
    elsewhere = render("priorityClassName=platform-critical", "priorityClass.create=false")
    assert not find(elsewhere, "PriorityClass")
    assert one(elsewhere, "Deployment")["spec"]["template"]["spec"]["priorityClassName"] == (
        "platform-critical"
    )


def test_an_image_digest_pins_what_is_pulled() -> None:
    digest = "sha256:" + "0f" * 32
    assert _container(f"image.digest={digest}", "image.tag=dev")["image"] == f"phased@{digest}"


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
