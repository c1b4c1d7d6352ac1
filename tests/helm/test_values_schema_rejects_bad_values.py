"""values.schema.json refuses bad values at `helm install` time, naming the key."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from tests.helm.chart import CHART, needs_helm, template_result

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())

# (what is set, the path helm names, a fragment of its message)
BAD = [
    ({"replicaCount": 6}, "/replicaCount", "maximum"),
    ({"replicaCount": 2}, "/leaderElection/enabled", "must be true"),
    ({"replicaCount": "one"}, "/replicaCount", "want integer"),
    ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy", "Always"),
    ({"settings": {"currency": "euro"}}, "/settings/currency", "does not match"),
    ({"settings": {"metricsPort": 70000}}, "/settings/metricsPort", "maximum"),
    ({"settings": {"resyncInterval": "30 seconds"}}, "/settings/resyncInterval", "does not match"),
    ({"settings": {"gpuTypes": {"A100": {}}}}, "/settings/gpuTypes", "A100"),
    (
        {"settings": {"gpuTypes": {"H100": {"pricePerGpuHour": -1}}}},
        "/settings/gpuTypes/H100/pricePerGpuHour",
        "minimum",
    ),
    ({"settings": {"resyncIntervall": "1m"}}, "/settings", "resyncIntervall"),
    ({"securityContext": {"allowPrivilegeEscalation": True}}, "/securityContext", "false"),
    ({"podSecurityContext": {"runAsNonRoot": False}}, "/podSecurityContext", "true"),
    ({"metrics": {"service": {"type": "ExternalName"}}}, "/metrics/service/type", "ClusterIP"),
    (
        {"metrics": {"prometheusRule": {"thresholds": {"massFailureShare": 20}}}},
        "/metrics/prometheusRule/thresholds/massFailureShare",
        "maximum",
    ),
]
IDS = [case[1] + ":" + case[2] for case in BAD]


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def test_the_schema_is_draft_07_and_accepts_the_defaults() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    jsonschema.Draft7Validator(SCHEMA).validate(DEFAULTS)


@pytest.mark.parametrize(("override", "path", "fragment"), BAD, ids=IDS)
def test_the_schema_refuses(override: dict[str, Any], path: str, fragment: str) -> None:
    errors = list(jsonschema.Draft7Validator(SCHEMA).iter_errors(_merge(DEFAULTS, override)))
    assert errors, f"{override} was accepted"


@needs_helm
@pytest.mark.parametrize(("override", "path", "fragment"), BAD, ids=IDS)
def test_helm_refuses_with_the_key_in_the_message(
    override: dict[str, Any], path: str, fragment: str
) -> None:
    result = template_result(values=override)
    assert result.returncode != 0, f"{override} was accepted"
    assert "don't meet the specifications of the schema" in result.stderr
    assert f"at '{path}" in result.stderr, result.stderr
    assert fragment in result.stderr, result.stderr


@needs_helm
def test_equal_metrics_and_health_ports_are_refused() -> None:
    result = template_result("settings.metricsPort=8081")
    assert result.returncode != 0
    assert "settings.metricsPort and settings.healthPort must differ" in result.stderr


# Weakening the operator pod's security context: refused unless the opt-out is set.
WEAKER = [
    ({"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}},
     "/securityContext/capabilities/add"),
    ({"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}},
     "/securityContext/capabilities/drop"),
    ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
     "/securityContext/seccompProfile/type"),
    ({"podSecurityContext": {"seccompProfile": {"type": "Unconfined"}}},
     "/podSecurityContext/seccompProfile/type"),
    ({"securityContext": {"readOnlyRootFilesystem": False}},
     "/securityContext/readOnlyRootFilesystem"),
    ({"securityContext": {"allowPrivilegeEscalation": True}},
     "/securityContext/allowPrivilegeEscalation"),
    ({"securityContext": {"privileged": True}}, "/securityContext/privileged"),
    ({"securityContext": {"runAsUser": 0}}, "/securityContext/runAsUser"),
    ({"podSecurityContext": {"runAsUser": 0}}, "/podSecurityContext/runAsUser"),
    ({"podSecurityContext": {"runAsNonRoot": False}}, "/podSecurityContext/runAsNonRoot"),
]  # fmt: skip
WEAKER_IDS = [case[1] for case in WEAKER]
OPT_OUT = {"unsafeAllowWeakerSecurityContext": True}


@pytest.mark.parametrize(("override", "path"), WEAKER, ids=WEAKER_IDS)
def test_a_weaker_security_context_is_refused_without_the_opt_out(
    override: dict[str, Any], path: str
) -> None:
    validator = jsonschema.Draft7Validator(SCHEMA)
    assert list(validator.iter_errors(_merge(DEFAULTS, override))), f"{override} was accepted"
    assert not list(validator.iter_errors(_merge(DEFAULTS, {**override, **OPT_OUT})))


@needs_helm
@pytest.mark.parametrize(("override", "path"), WEAKER, ids=WEAKER_IDS)
def test_helm_refuses_a_weaker_security_context_naming_the_key(
    override: dict[str, Any], path: str
) -> None:
    refused = template_result(values=override)
    assert refused.returncode != 0, f"{override} was accepted"
    assert f"at '{path}" in refused.stderr, refused.stderr
    accepted = template_result(values={**override, **OPT_OUT})
    assert accepted.returncode == 0, accepted.stderr


BAD_DIGESTS = ["sha256:abc", "latest", "sha256:" + "A" * 64, "md5:" + "a" * 64]


@pytest.mark.parametrize("digest", BAD_DIGESTS)
def test_an_image_digest_must_be_sha256_and_64_hex_digits(digest: str) -> None:
    validator = jsonschema.Draft7Validator(SCHEMA)
    assert list(validator.iter_errors(_merge(DEFAULTS, {"image": {"digest": digest}})))
    good = {"image": {"digest": "sha256:" + "0f" * 32}}
    assert not list(validator.iter_errors(_merge(DEFAULTS, good)))
