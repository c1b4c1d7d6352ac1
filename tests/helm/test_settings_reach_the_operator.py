"""values.settings becomes the operator's settings file, and a change restarts the operator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from phased.core.settings import Settings, load_settings
from tests.helm.chart import CHART, NAMESPACE, needs_helm, one, render


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def test_values_yaml_sets_every_operator_setting() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["settings"]
    assert set(values) == {_camel(f) for f in Settings.model_fields}
    # ... and the defaults agree with the operator's own.
    assert load_settings(yaml.safe_dump(values)) == Settings()


def _settings_file(docs: list[dict[str, Any]]) -> str:
    config_map = one(docs, "ConfigMap", "phased-settings")
    text: str = config_map["data"]["settings.yaml"]
    return text


@needs_helm
def test_the_rendered_file_is_what_the_operator_loads() -> None:
    # The chart fills in the report endpoint (reports.enabled, the default); nothing else.
    loaded = load_settings(_settings_file(render()))
    assert loaded.reports.url == f"http://phased-reports.{NAMESPACE}.svc:8082"
    assert loaded.reports.key_file == "/etc/phased-report-key/key"
    assert loaded.model_copy(update={"reports": Settings().reports}) == Settings()
    assert load_settings(_settings_file(render("reports.enabled=false"))) == Settings()


@needs_helm
def test_the_report_endpoint_has_its_service_port_and_key() -> None:
    docs = render()
    service = one(docs, "Service", "phased-reports")
    assert service["spec"]["ports"] == [
        {"name": "reports", "port": 8082, "targetPort": "reports", "protocol": "TCP"}
    ]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "reports", "containerPort": 8082, "protocol": "TCP"} in container["ports"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "report-key")
    assert mount == {"name": "report-key", "mountPath": "/etc/phased-report-key", "readOnly": True}
    volume = next(v for v in pod["volumes"] if v["name"] == "report-key")
    assert volume["secret"]["secretName"] == "phased-report-key"
    secret = one(docs, "Secret", "phased-report-key")
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert len(secret["data"]["key"]) >= 48  # base64 of 48 random characters
    off = render("reports.enabled=false")
    assert not [
        d for d in off if d["kind"] == "Secret" or d["metadata"]["name"].endswith("-reports")
    ]
    mine = render("reports.existingSecret=my-key")
    assert not [d for d in mine if d["kind"] == "Secret"]
    pod = one(mine, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "report-key")
    assert volume["secret"]["secretName"] == "my-key"


@needs_helm
def test_changed_values_reach_the_settings_file() -> None:
    docs = render(
        "settings.gpuTypes.H200=null",
        values={
            "settings": {
                "currency": "EUR",
                "gpuTypes": {"H100": {"pricePerGpuHour": 2.1}},
                "resyncInterval": "1m",
                "nodeSelector": "phased.dev/pool=gpu",
                "workers": {"allowedImagePrefixes": ["registry.example.com/ml/"]},
                "cpu": {"nodeLabels": {"node-role.example.com/cpu": "true"}},
            }
        },
    )
    settings = load_settings(_settings_file(docs))
    assert settings.currency == "EUR"
    assert settings.gpu_types["H100"].price_per_gpu_hour == 2.1  # type: ignore[index]
    assert {t.value for t in settings.gpu_types} == {"H100", "Ascend910B"}
    assert settings.resync_interval == "1m"
    assert settings.node_selector == "phased.dev/pool=gpu"
    assert settings.workers.allowed_image_prefixes == ["registry.example.com/ml/"]
    assert settings.cpu.node_labels == {"node-role.example.com/cpu": "true"}


@needs_helm
def test_the_operator_reads_the_mounted_file() -> None:
    docs = render()
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    path = Path(env["PHASED_SETTINGS_FILE"])
    mount = next(m for m in container["volumeMounts"] if m["name"] == "settings")
    assert Path(mount["mountPath"]) / path.name == path
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == "settings")
    assert volume["configMap"]["name"] == "phased-settings"
    assert path.name in one(docs, "ConfigMap", "phased-settings")["data"]


@needs_helm
def test_a_settings_change_changes_the_pod_template_checksum() -> None:
    def checksum(*sets: str) -> str:
        deployment = one(render(*sets), "Deployment")
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/settings"]
        return value

    assert checksum() == checksum()
    assert checksum() != checksum("settings.currency=EUR")
    assert checksum() == checksum("replicaCount=0")
