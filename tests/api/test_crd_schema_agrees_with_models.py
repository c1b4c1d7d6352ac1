"""The CRD and the pydantic models describe the same TrainingJob, field by field.

Both directions are checked: a field, bound, enum, pattern, default or required flag that is
in one and not the other fails here, with the field path and both values in the message.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from phased.api.podtemplate import crd_form, env_source_schema, pod_spec_schema
from phased.api.v1alpha1 import TrainingJobSpec, TrainingJobStatus
from tests.api.schema_walk import (
    apply_crd_defaults,
    compare,
    crd_root_schema,
    load_crd,
    model_schema,
    walk,
)


# The one exception to a field-by-field comparison: the Kubernetes pod spec (and an env
# var's valueFrom, part of it). The models hold it as a dict that phased.api.podtemplate
# checks against the generated schema, and the CRD must carry exactly that schema
# (tests/api/test_pod_schema_is_generated.py checks it against the Kubernetes source).
@cache
def generated_parts() -> dict[str, Any]:
    pod, env = crd_form(pod_spec_schema()), crd_form(env_source_schema())
    return {
        "spec.template.spec": pod,
        "spec.phases[].template.spec": pod,
        "spec.template.env[].valueFrom": env,
        "spec.phases[].template.env[].valueFrom": env,
    }


def test_spec_fields_agree_with_the_models() -> None:
    problems = compare(
        model_schema(TrainingJobSpec),
        crd_root_schema()["properties"]["spec"],
        "spec",
        require_defaults=True,
        opaque=generated_parts(),
    )
    assert problems == [], "\n".join(problems)


def test_the_comparison_notices_a_pod_spec_that_is_not_the_generated_one() -> None:
    crd_spec = crd_root_schema()["properties"]["spec"]
    template = crd_spec["properties"]["template"]
    pod = template["properties"]["spec"]
    crippled_pod = {
        **pod,
        "properties": {k: v for k, v in pod["properties"].items() if k != "volumes"},
    }
    crippled = {
        **crd_spec,
        "properties": {
            **crd_spec["properties"],
            "template": {
                **template,
                "properties": {**template["properties"], "spec": crippled_pod},
            },
        },
    }
    problems = compare(
        model_schema(TrainingJobSpec),
        crippled,
        "spec",
        require_defaults=True,
        opaque=generated_parts(),
    )
    assert problems == ["spec.template.spec: not the generated schema"]


def test_status_fields_agree_with_the_models() -> None:
    problems = compare(
        model_schema(TrainingJobStatus),
        crd_root_schema()["properties"]["status"],
        "status",
        require_defaults=False,
    )
    assert problems == [], "\n".join(problems)


def test_the_comparison_notices_a_field_missing_from_the_crd() -> None:
    crd_spec = crd_root_schema()["properties"]["spec"]
    crippled = {**crd_spec, "properties": dict(crd_spec["properties"])}
    del crippled["properties"]["priority"]
    problems = compare(
        model_schema(TrainingJobSpec),
        crippled,
        "spec",
        require_defaults=True,
        opaque=generated_parts(),
    )
    assert problems == ["spec.priority: in the models, missing from the CRD"]


def test_the_comparison_notices_a_changed_bound() -> None:
    crd_spec = crd_root_schema()["properties"]["spec"]
    changed = {**crd_spec, "properties": {**crd_spec["properties"]}}
    changed["properties"]["priority"] = {**changed["properties"]["priority"], "maximum": 7}
    problems = compare(
        model_schema(TrainingJobSpec),
        changed,
        "spec",
        require_defaults=True,
        opaque=generated_parts(),
    )
    assert problems == ["spec.priority: maximum is 1000 in the models but 7 in the CRD"]


def _generated(path: str) -> bool:
    """Inside the generated pod spec (or valueFrom), whose depth limits are its own."""
    return any(path.startswith(p + ".") or path.startswith(p + "[]") for p in generated_parts())


def test_every_field_has_a_description() -> None:
    undocumented = [
        path
        for path, node in walk(crd_root_schema(), "")
        # The API server forbids describing metadata: it documents it itself. The generated
        # pod spec describes fields three levels deep (hack/gen-pod-schema.py says why).
        if path != ".metadata"
        and not _generated(path[1:])
        and not str(node.get("description", "")).strip()
    ]
    assert undocumented == []


def test_the_pod_spec_describes_its_fields_three_levels_deep() -> None:
    pod = crd_root_schema()["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
    undocumented = [
        path
        for path, node in walk(pod, "spec")
        if path.count(".") <= 3
        and not path.endswith(("[]", "{}"))
        and not str(node.get("description", "")).strip()
    ]
    assert undocumented == []
    for field in ("volumes", "containers.[].volumeMounts", "containers.[].env.[].valueFrom"):
        node = pod
        for step in field.split("."):
            node = node["items"] if step == "[]" else node["properties"][step]
        assert node["description"], field


def test_every_spec_list_string_and_map_is_bounded_for_the_cel_cost_estimator() -> None:
    # The generated pod spec is bounded as Kubernetes bounds it, plus what its CEL rules walk
    # (podtemplate.EXTRA_BOUNDS); the API server's cost estimate for it is checked end to end.
    unbounded = []
    for path, node in walk(crd_root_schema()["properties"]["spec"], "spec"):
        if _generated(path):
            continue
        kind = node.get("type")
        if kind == "array" and "maxItems" not in node:
            unbounded.append(f"{path}: no maxItems")
        if kind == "string" and "maxLength" not in node and "enum" not in node:
            unbounded.append(f"{path}: no maxLength")
        if kind == "object" and "additionalProperties" in node and "maxProperties" not in node:
            unbounded.append(f"{path}: no maxProperties")
    assert unbounded == []


def test_no_field_preserves_unknown_fields() -> None:
    assert "x-kubernetes-preserve-unknown-fields" not in str(load_crd())


@pytest.mark.parametrize(
    "spec",
    [
        {
            "phases": [{"name": "train", "nodes": {"min": 1, "max": 2}}],
            "template": {"image": "busybox:1.36"},
        },
        {
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 1, "max": 2},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "template": {"image": "x"},
                }
            ],
            "spares": {},
            "failurePolicy": {"massFailure": {}},
            "checkpoint": {},
        },
    ],
    ids=["minimal", "empty-nested-objects"],
)
def test_crd_defaulting_gives_what_the_models_default_to(spec: dict[str, Any]) -> None:
    crd_spec = crd_root_schema()["properties"]["spec"]
    defaulted = apply_crd_defaults(spec, crd_spec)
    assert TrainingJobSpec.model_validate(defaulted) == TrainingJobSpec.model_validate(spec)
    # And the API server's defaults spell out every default the models have.
    dumped = TrainingJobSpec.model_validate(spec).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    assert _nested_defaults_missing(defaulted, dumped) == []


def _nested_defaults_missing(crd: Any, model: Any, path: str = "spec") -> list[str]:
    """Paths the models fill in with a default and the CRD leaves absent."""
    if isinstance(model, dict):
        missing = []
        for key, value in model.items():
            if not isinstance(crd, dict) or key not in crd:
                if value not in ({}, [], None):
                    missing.append(f"{path}.{key}")
                continue
            missing += _nested_defaults_missing(crd[key], value, f"{path}.{key}")
        return missing
    if isinstance(model, list) and isinstance(crd, list):
        return [
            m
            for c, v in zip(crd, model, strict=False)
            for m in _nested_defaults_missing(c, v, f"{path}[]")
        ]
    return []


def test_the_resource_is_named_and_served_as_documented() -> None:
    crd = load_crd()
    names = crd["spec"]["names"]
    assert crd["metadata"]["name"] == "trainingjobs.phased.dev"
    assert crd["spec"]["scope"] == "Namespaced"
    assert (names["kind"], names["plural"], names["singular"]) == (
        "TrainingJob",
        "trainingjobs",
        "trainingjob",
    )
    assert names["shortNames"] == ["tj"]
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Phase": ".status.phase",
        "State": ".status.state",
        "Active": ".status.activeNodes",
        "Spares": ".status.spareNodes",
        "Util%": ".status.utilizationPercent",
        "Interruption": ".status.interruption.used",
        "Age": ".metadata.creationTimestamp",
    }
