"""Helpers that read the CRD and the models' JSON schemas as comparable trees."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "crds" / "trainingjobs.phased.dev.yaml"

# Keywords whose values must be the same in the CRD and in the models' JSON schema.
COMPARED = (
    "type",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "maxProperties",
)

Schema = dict[str, Any]


def load_crd() -> Schema:
    """The CustomResourceDefinition as a mapping (a fresh copy: callers may change it)."""
    return copy.deepcopy(_parsed_crd())


@cache
def _parsed_crd() -> Schema:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser: the CRD is large
    docs = [d for d in yaml.load_all(CRD_PATH.read_text(), Loader=loader) if d]
    assert len(docs) == 1, "the CRD file holds exactly one document"
    crd: Schema = docs[0]
    return crd


def crd_root_schema() -> Schema:
    """The openAPIV3Schema of the only version, v1alpha1."""
    (version,) = load_crd()["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


def model_schema(model: type[BaseModel]) -> Schema:
    """The model's validation JSON schema with every ``$ref`` and ``Optional`` resolved."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Schema] = raw.get("$defs", {})

    def resolve(node: Schema) -> Schema:
        if "$ref" in node:
            target = defs[node["$ref"].rsplit("/", 1)[-1]]
            extra = {k: v for k, v in node.items() if k != "$ref"}
            return resolve({**target, **extra})
        if "anyOf" in node:
            branches = [b for b in node["anyOf"] if b.get("type") != "null"]
            assert len(branches) == 1, f"unexpected union {node}"
            extra = {k: v for k, v in node.items() if k != "anyOf"}
            if extra.get("default", "x") is None:
                del extra["default"]
            return resolve({**branches[0], **extra})
        out = dict(node)
        if "properties" in out:
            out["properties"] = {k: resolve(v) for k, v in out["properties"].items()}
        for key in ("items", "additionalProperties"):
            if isinstance(out.get(key), dict):
                out[key] = resolve(out[key])
        return out

    return resolve({k: v for k, v in raw.items() if k != "$defs"})


def walk(node: Schema, path: str) -> Iterator[tuple[str, Schema]]:
    """Every schema node under ``node`` (itself included) with its field path."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def compare(
    model: Schema,
    crd: Schema,
    path: str,
    *,
    require_defaults: bool,
    opaque: dict[str, Schema] | None = None,
) -> list[str]:
    """Every disagreement between a model schema node and a CRD node, as sentences.

    ``opaque`` maps the paths where the models hold a dict validated against a schema of its
    own (the Kubernetes pod spec) to the CRD node expected there: the CRD must carry exactly
    that schema, and the model an object.
    """
    opaque = opaque or {}
    if path in opaque:
        problems = [] if crd == opaque[path] else [f"{path}: not the generated schema"]
        if model.get("type") != "object":
            problems.append(f"{path}: the models hold {model.get('type')!r}, not an object")
        return problems
    problems: list[str] = []
    for key in COMPARED:
        if model.get(key) != crd.get(key):
            problems.append(
                f"{path}: {key} is {model.get(key)!r} in the models but {crd.get(key)!r} in the CRD"
            )
    if set(model.get("required", [])) != set(crd.get("required", [])):
        problems.append(
            f"{path}: required is {sorted(model.get('required', []))} in the "
            f"models but {sorted(crd.get('required', []))} in the CRD"
        )
    if "default" in crd and not isinstance(crd["default"], dict | list):
        if model.get("default") != crd["default"]:
            problems.append(
                f"{path}: default is {model.get('default')!r} in the models "
                f"but {crd['default']!r} in the CRD"
            )
    elif require_defaults and "default" in model and "default" not in crd:
        problems.append(
            f"{path}: the models default to {model['default']!r}; the CRD sets no default"
        )
    m_props, c_props = model.get("properties", {}), crd.get("properties", {})
    for name in sorted(set(m_props) - set(c_props)):
        problems.append(f"{path}.{name}: in the models, missing from the CRD")
    for name in sorted(set(c_props) - set(m_props)):
        problems.append(f"{path}.{name}: in the CRD, missing from the models")
    for name in sorted(set(m_props) & set(c_props)):
        problems += compare(
            m_props[name],
            c_props[name],
            f"{path}.{name}",
            require_defaults=require_defaults,
            opaque=opaque,
        )
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        m_child, c_child = model.get(key), crd.get(key)
        if isinstance(m_child, dict) or isinstance(c_child, dict):
            if not (isinstance(m_child, dict) and isinstance(c_child, dict)):
                problems.append(f"{path}: {key} differs: {m_child!r} vs {c_child!r}")
            else:
                problems += compare(
                    m_child,
                    c_child,
                    path + suffix,
                    require_defaults=require_defaults,
                    opaque=opaque,
                )
    return problems


def apply_crd_defaults(value: Any, schema: Schema) -> Any:
    """``value`` defaulted the way the API server defaults it from a structural schema."""
    if isinstance(value, dict) and "properties" in schema:
        out = dict(value)
        for name, child in schema["properties"].items():
            if name not in out and "default" in child:
                out[name] = child["default"]
            if name in out:
                out[name] = apply_crd_defaults(out[name], child)
        return out
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: apply_crd_defaults(v, schema["additionalProperties"]) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_crd_defaults(v, schema["items"]) for v in value]
    return value
