"""The pod spec schema is the Kubernetes API server's own, generated, and small enough.

``hack/gen-pod-schema.py`` turns the ``PodSpec`` of the Kubernetes OpenAPI document into
``operator/phased/api/podspec.schema.json`` and the CRD's pod spec blocks; these tests fail
when either was edited by hand or the generator changed without being run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from types import ModuleType
from typing import Any

import pytest
import yaml

from phased.api.podtemplate import (
    CEL_RULES,
    RESERVED_ENV_MESSAGE,
    RESERVED_ENV_RULE,
    SCHEMA_PATH,
    pod_spec_schema,
)
from tests.api.schema_walk import CRD_PATH, REPO, crd_root_schema

# `kubectl apply` keeps the whole object in an annotation of at most 256 KiB.
LAST_APPLIED_LIMIT = 256 * 1024


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_pod_schema", REPO / "hack" / "gen-pod-schema.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_pod_schema"] = module
    spec.loader.exec_module(module)
    return module


def test_the_schema_file_and_the_crd_are_what_the_generator_writes() -> None:
    gen = _generator()
    source = gen.openapi_path(None)
    if not source.is_file():
        if os.environ.get("CI"):
            pytest.fail(
                f"{source} is missing: go mod download k8s.io/kubernetes@{gen.KUBERNETES_VERSION}"
            )
        pytest.skip(f"{source} is missing (go mod download k8s.io/kubernetes)")
    generated = gen.generate(source)
    assert SCHEMA_PATH.read_text() == gen.schema_text(generated), "run hack/gen-pod-schema.py"
    assert CRD_PATH.read_text() == gen.crd_text(generated), "run hack/gen-pod-schema.py"


def test_the_crd_blocks_are_the_schema_file() -> None:
    """Needs no Kubernetes source: the CRD's blocks against the committed schema file."""
    gen = _generator()
    generated = json.loads(SCHEMA_PATH.read_text())
    assert CRD_PATH.read_text() == gen.crd_text(generated)


def _pod_spec_node(template: dict[str, Any]) -> dict[str, Any]:
    node: dict[str, Any] = template["properties"]["spec"]
    return node


def test_both_templates_carry_the_pod_spec_with_phaseds_rules() -> None:
    spec = crd_root_schema()["properties"]["spec"]
    job = _pod_spec_node(spec["properties"]["template"])
    phase = _pod_spec_node(spec["properties"]["phases"]["items"]["properties"]["template"])
    assert job == phase
    rules = [(r["rule"], r["message"]) for r in job["x-kubernetes-validations"]]
    assert rules == list(CEL_RULES)
    assert {"volumes", "containers", "initContainers", "tolerations", "affinity"} <= set(
        job["properties"]
    )
    assert "ephemeralContainers" not in job["properties"]


def test_the_short_env_lists_refuse_the_same_names_as_the_pod_spec() -> None:
    spec = crd_root_schema()["properties"]["spec"]
    for template in (
        spec["properties"]["template"],
        spec["properties"]["phases"]["items"]["properties"]["template"],
    ):
        (rule,) = template["properties"]["env"]["x-kubernetes-validations"]
        assert rule == {
            "rule": f"self.all(e, {RESERVED_ENV_RULE})",
            "message": RESERVED_ENV_MESSAGE,
        }


def test_the_merge_keys_come_from_the_api_server() -> None:
    props = pod_spec_schema()["properties"]
    container = props["containers"]["items"]["properties"]
    assert props["containers"]["x-kubernetes-patch-merge-key"] == "name"
    assert props["volumes"]["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    assert container["volumeMounts"]["x-kubernetes-patch-merge-key"] == "mountPath"
    assert container["ports"]["x-kubernetes-patch-merge-key"] == "containerPort"
    assert "x-kubernetes-patch-merge-key" not in props["tolerations"]
    assert "x-kubernetes-patch-merge-key" not in str(crd_root_schema())


def test_the_crd_fits_the_last_applied_annotation_of_kubectl_apply() -> None:
    (crd,) = [d for d in yaml.safe_load_all(CRD_PATH.read_text()) if d]
    size = len(json.dumps(crd, separators=(",", ":")))
    assert size < LAST_APPLIED_LIMIT - 32 * 1024, size
