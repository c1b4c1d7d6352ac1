#!/usr/bin/env python3
"""Generate the worker pod spec schema from the Kubernetes API server's own OpenAPI document.

    python hack/gen-pod-schema.py           # write the schema and the CRD's pod spec block
    python hack/gen-pod-schema.py --check   # exit 1, naming what is stale, if anything drifted

Source: ``api/openapi-spec/v3/api__v1_openapi.json`` of the ``k8s.io/kubernetes`` Go module
(``go mod download k8s.io/kubernetes@v1.36.3`` puts it in the module cache), or ``--openapi
FILE`` (e.g. a running API server's ``/openapi/v3/api/v1``). The ``PodSpec`` definition is
inlined ($refs resolved) and made a structural CRD schema:

* descriptions cut to their first sentence (at most ~80 characters), and kept for fields up
  to three levels deep (``containers[].env[].valueFrom``), so the CRD stays small (the
  last-applied annotation of `kubectl apply` holds at most 256 KiB);
* ``Quantity`` and ``IntOrString`` become ``x-kubernetes-int-or-string``; ``format`` and
  defaults are dropped (the API server defaults the pod, not the TrainingJob), except defaults
  of list-map keys, which a CRD requires;
* ``ephemeralContainers`` is left out (a pod cannot be created with them), and so is every
  field Kubernetes marks deprecated (the in-tree volume plugins, ``serviceAccount``); ``containers``
  is not required (a phase template may add only a volume);
* the lists that Phased's CEL rules walk get bounds (``EXTRA_BOUNDS``) so that the API
  server's CEL cost estimate stays within its budget;
* Phased's rules (``phased.api.podtemplate.CEL_RULES``) are attached to the root.

Outputs: ``operator/phased/api/podspec.schema.json`` (with the strategic-merge keys
``x-kubernetes-patch-merge-key`` / ``-strategy``, which the operator's merge reads), and the
blocks under ``spec: &podspec`` and ``valueFrom: &envsource`` in
``crds/trainingjobs.phased.dev.yaml`` (without those keys: a CRD does not accept them); the
other places that hold them refer to these YAML anchors (``*podspec``).
``tests/api/test_pod_schema_is_generated.py`` fails on drift.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))

from phased.api.podtemplate import (  # noqa: E402
    CEL_RULES,
    EXTRA_BOUNDS,
    KUBERNETES_VERSION,
    SCHEMA_PATH,
    crd_form,
)

CRD = ROOT / "crds" / "trainingjobs.phased.dev.yaml"
ANCHOR = re.compile(r"^(?P<indent> *)[A-Za-z]+: &(?P<anchor>[a-z]+)$")
# Anchored blocks of the CRD and the part of the generated schema each holds ("" = all).
ANCHORS = {"podspec": "", "envsource": "containers.[].env.[].valueFrom"}
OPENAPI_IN_MODULE = "api/openapi-spec/v3/api__v1_openapi.json"
ROOT_DESCRIPTION = (
    "The worker pod's spec, as in a Pod (kubectl explain pod.spec). Merged over the job's "
    "template the way kubectl's strategic merge does: lists of named things by name, "
    "other lists replaced. Phased owns and refuses nodeName, nodeSelector, required node "
    "affinity, restartPolicy, hostname and subdomain, the volume names phased-checkpoints "
    "and phased-report and the mount path /var/run/phased/report; it adds its own "
    "tolerations, affinity terms, GPU resources, rank environment and checkpoint volumes."
)
INT_OR_STRING = (
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
)
DROPPED = {"ephemeralContainers"}
KEPT_EXTENSIONS = {
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-patch-strategy",
}
MAX_DESCRIPTION = 80
# Fields deeper than this (e.g. containers[].env[].valueFrom.secretKeyRef.key) go undescribed:
# both templates carry the pod spec, and a CRD applied with `kubectl apply` must stay under
# the 256 KiB of its last-applied annotation. `kubectl explain pod.spec...` describes them.
DESCRIBED_DEPTH = 3


def openapi_path(given: str | None) -> Path:
    if given:
        return Path(given)
    modcache = (
        os.environ.get("GOMODCACHE")
        or subprocess.run(
            ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    return Path(modcache) / f"k8s.io/kubernetes@{KUBERNETES_VERSION}" / OPENAPI_IN_MODULE


def short(text: str) -> str:
    """The first sentence, cut at a word boundary within MAX_DESCRIPTION characters."""
    text = " ".join(text.split())
    first = re.split(r"(?<=[a-z0-9)])\. ", text, maxsplit=1)[0].rstrip(".")
    if len(first) > MAX_DESCRIPTION:
        first = first[:MAX_DESCRIPTION].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return first + ("" if first.endswith("...") else ".")


def inline(node: Any, schemas: dict[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every $ref resolved, in CRD form (see the module docstring)."""
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref") or (
        node["allOf"][0].get("$ref") if len(node.get("allOf", [])) == 1 else None
    )
    if ref:
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            raise SystemExit(f"recursive type {name} cannot be inlined")
        description = node.get("description")
        if name in INT_OR_STRING:
            out: dict[str, Any] = {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
            }
            target_description = schemas[name].get("description", "")
        else:
            out = inline(schemas[name], schemas, (*seen, name))
            target_description = out.get("description", "")
        out["description"] = short(description or target_description or name.rsplit(".", 1)[-1])
        return out
    out = {}
    for key, value in node.items():
        if key == "description":
            out[key] = short(value)
        elif key == "properties":
            out[key] = {
                k: inline(v, schemas, seen)
                for k, v in sorted(value.items())
                if k not in DROPPED and "Deprecated" not in v.get("description", "")
            }
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = inline(value, schemas, seen)
        elif key in ("type", "required", "enum") or key in KEPT_EXTENSIONS:
            out[key] = value
        elif key == "default":
            out["_default"] = value  # kept only where a list-map key needs it (below)
    if out.get("type") == "array" and out.get("x-kubernetes-list-type") == "map":
        item = out["items"]
        for key in out["x-kubernetes-list-map-keys"]:
            prop = item["properties"][key]
            if key not in item.get("required", []) and "_default" in prop:
                prop["default"] = prop["_default"]
    return out


def strip_private(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: strip_private(v) for k, v in node.items() if k != "_default"}
    if isinstance(node, list):
        return [strip_private(v) for v in node]
    return node


def trim_descriptions(node: Any, depth: int = 0) -> Any:
    """``node`` without descriptions on fields nested deeper than DESCRIBED_DEPTH."""
    if isinstance(node, list):
        return [trim_descriptions(v, depth) for v in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "description" and depth > DESCRIBED_DEPTH:
            continue
        if key == "properties":
            out[key] = {k: trim_descriptions(v, depth + 1) for k, v in value.items()}
        else:
            out[key] = trim_descriptions(value, depth)
    return out


def add_bounds(schema: dict[str, Any]) -> None:
    for path, bounds in EXTRA_BOUNDS.items():
        node = schema
        for step in path.split("."):
            node = node["items"] if step == "[]" else node["properties"][step]
        node.update(bounds)


def generate(openapi: Path) -> dict[str, Any]:
    document = json.loads(openapi.read_text())
    schemas = document["components"]["schemas"]
    schema = trim_descriptions(
        strip_private(inline(schemas["io.k8s.api.core.v1.PodSpec"], schemas))
    )
    schema.pop("required", None)
    schema["description"] = ROOT_DESCRIPTION
    add_bounds(schema)
    schema["x-kubernetes-validations"] = [{"rule": r, "message": m} for r, m in CEL_RULES]
    result: dict[str, Any] = {"kubernetesVersion": KUBERNETES_VERSION, "schema": schema}
    return result


def schema_text(generated: dict[str, Any]) -> str:
    return json.dumps(generated, indent=1, sort_keys=True) + "\n"


def part(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for step in path.split(".") if path else []:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


def crd_text(generated: dict[str, Any]) -> str:
    """The CRD file with each anchored block (``ANCHORS``) replaced by its generated schema."""
    import yaml

    lines = CRD.read_text().splitlines(keepends=True)
    found: set[str] = set()
    index = 0
    while index < len(lines):
        match = ANCHOR.match(lines[index].rstrip("\n"))
        if not match or match["anchor"] not in ANCHORS:
            index += 1
            continue
        found.add(match["anchor"])
        indent = len(match["indent"]) + 2
        end = index + 1
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip(" ")) >= indent
        ):
            end += 1
        schema = crd_form(part(generated["schema"], ANCHORS[match["anchor"]]))
        block = yaml.safe_dump(schema, sort_keys=True, width=100, allow_unicode=True)
        body = [" " * indent + b + "\n" if b else "\n" for b in block.splitlines()]
        lines[index + 1 : end] = body
        index += 1 + len(body)
    if found != set(ANCHORS):
        raise SystemExit(f"{CRD}: no anchored block for {', '.join(sorted(set(ANCHORS) - found))}")
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report drift, write nothing")
    parser.add_argument("--openapi", help="the Kubernetes OpenAPI v3 document for api/v1")
    args = parser.parse_args()
    source = openapi_path(args.openapi)
    if not source.is_file():
        print(f"{source} not found: run `go mod download k8s.io/kubernetes@{KUBERNETES_VERSION}`")
        return 2
    generated = generate(source)
    want = {SCHEMA_PATH: schema_text(generated)}
    want[CRD] = crd_text(generated)  # after the schema: crd_form reads only its argument
    stale = [p for p, text in want.items() if not p.is_file() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run python hack/gen-pod-schema.py)")
        return 1 if stale else 0
    for path in stale:
        path.write_text(want[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
