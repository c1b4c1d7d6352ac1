"""The CRD rejects every invalid TrainingJob: by its OpenAPI schema, or by a CEL rule.

The OpenAPI part is checked here with a JSON-schema validator (bounds, enums, patterns,
required fields, list uniqueness and, as with kubectl's strict field validation, unknown
fields mean the same there); a case the schema lets through must
expect one of the CRD's CEL messages, which the end-to-end suite sees a real API server give.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from tests.api.invalid_cases import (
    EDIT_CASES,
    INVALID_CASES,
    VALID_CASES,
    InvalidCase,
    ValidCase,
)
from tests.api.schema_walk import crd_root_schema, walk


def _duplicate_problems(value: Any, schema: dict[str, Any], path: str) -> Iterator[str]:
    """What ``x-kubernetes-list-type: set|map`` adds to plain JSON schema: no duplicates."""
    if isinstance(value, list):
        kind = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen = [tuple(v.get(k) for k in keys) if kind == "map" else v for v in value]
        if kind in ("set", "map") and len({repr(s) for s in seen}) != len(seen):
            yield f"{path}: Duplicate value"
        for index, item in enumerate(value):
            yield from _duplicate_problems(item, schema.get("items", {}), f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            child = schema.get("properties", {}).get(key)
            if child is not None:
                yield from _duplicate_problems(item, child, f"{path}.{key}")


def _unknown_fields(value: Any, schema: dict[str, Any], path: str) -> Iterator[str]:
    """What the API server's strict field validation (kubectl's default) adds: no made-up keys."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unknown_fields(item, schema.get("items", {}), f"{path}[{index}]")
    elif isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            if key not in schema["properties"]:
                if path != ".metadata":
                    yield f'unknown field "{path[1:]}.{key}"'
            else:
                yield from _unknown_fields(item, schema["properties"][key], f"{path}.{key}")


def schema_problems(manifest: dict[str, Any]) -> list[str]:
    """What the CRD's OpenAPI schema (without CEL) finds wrong with ``manifest``."""
    root = crd_root_schema()
    validator = jsonschema.Draft7Validator(root)
    found = [e.message for e in validator.iter_errors(manifest)]
    return (
        found
        + list(_duplicate_problems(manifest, root, ""))
        + list(_unknown_fields(manifest, root, ""))
    )


def cel_messages() -> set[str]:
    """The static message of every CEL rule in the CRD."""
    return {
        rule["message"]
        for _, node in walk(crd_root_schema(), "")
        for rule in node.get("x-kubernetes-validations", [])
    }


@pytest.mark.parametrize("case", INVALID_CASES, ids=[c.id for c in INVALID_CASES])
def test_the_crd_rejects_it(case: InvalidCase) -> None:
    if schema_problems(case.manifest):
        return
    # Only a CEL rule can catch it: the case must expect that rule's message.
    expected = re.sub(r" \(\d+\)", "", case.api_error)
    assert any(expected in m for m in cel_messages()), f"nothing in the CRD rejects {case.id!r}"


@pytest.mark.parametrize("case", VALID_CASES, ids=[c.id for c in VALID_CASES])
def test_the_crd_schema_accepts_the_edge_case(case: ValidCase) -> None:
    assert schema_problems(case.manifest) == []


def test_every_cel_message_is_expected_by_some_case() -> None:
    expected = {re.sub(r" \(\d+\)", "", c.api_error) for c in INVALID_CASES}
    expected |= {c.api_error for c in EDIT_CASES if c.api_error}  # the transition rules
    untested = {m for m in cel_messages() if not any(m in e or e in m for e in expected)}
    # gpuFaultGrace shares its rule with the other graces, tested through them.
    assert untested <= {"failurePolicy.gpuFaultGrace must be at most 1d"}
