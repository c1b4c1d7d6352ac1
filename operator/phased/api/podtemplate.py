"""The worker pod spec a template may carry: schema, Phased's refusals, and the merge.

The schema is the Kubernetes API server's own ``PodSpec`` (v1.36), generated into
``podspec.schema.json`` and into the CRD by ``hack/gen-pod-schema.py``. The same file serves
three purposes here:

* :func:`structural_problems` re-checks a template's pod spec against it (types, unknown
  fields, required fields, enums, bounds, unique list-map keys) for the operator and
  ``phased plan``; the API server checks the same at ``kubectl apply``;
* :data:`OWNED` are the fields Phased owns and refuses, each with its CEL rule (the CRD
  carries it) and the same check in Python, with one message for both layers;
* :func:`merge` lays a phase's pod spec over the job's the way Kubernetes' strategic merge
  patch does, reading the merge keys the API server publishes (``x-kubernetes-patch-merge-key``):
  containers, volumes, env, volumeMounts, ports, imagePullSecrets... merge item by item by
  their key; other lists (tolerations, args, envFrom) are replaced; maps merge by key;
  volumes (``retainKeys``) take the phase's source whole.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

KUBERNETES_VERSION = "v1.36.3"
SCHEMA_PATH = Path(__file__).with_name("podspec.schema.json")

# The container Phased builds the worker from (the template's image, command, args, env,
# resources apply to it; a container of this name in the pod spec is merged into it).
WORKER_CONTAINER = "worker"
LABEL_PREFIX = "phased.dev/"

# Environment Phased sets on the worker container (per rank, per launcher); a template may
# not set these names nor any name under these prefixes.
RESERVED_ENV_PREFIXES = ("PHASED_", "PET_")
RESERVED_ENV_NAMES = (
    "RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK_SIZE",
    "MS_SCHED_HOST",
    "MS_SCHED_PORT",
    "MS_WORKER_NUM",
)
RESERVED_ENV_RULE = (
    "!e.name.startsWith('PHASED_') && !e.name.startsWith('PET_') && !(e.name in ["
    + ", ".join(f"'{n}'" for n in RESERVED_ENV_NAMES)
    + "])"
)
RESERVED_ENV_MESSAGE = (
    "the worker's env may not set PHASED_*, PET_* nor "
    + ", ".join(RESERVED_ENV_NAMES)
    + ": Phased sets them per rank"
)

# Volumes Phased adds to every worker pod (the checkpoint claim, the report token) and where
# the token is mounted: a template may not use these volume names nor this mount path.
CHECKPOINT_VOLUME = "phased-checkpoints"
REPORT_VOLUME = "phased-report"
RESERVED_VOLUME_NAMES = (CHECKPOINT_VOLUME, REPORT_VOLUME)
REPORT_MOUNT = "/var/run/phased/report"
RESERVED_MOUNT_PATHS = (REPORT_MOUNT,)
_RESERVED_VOLUMES_CEL = "[" + ", ".join(f"'{n}'" for n in RESERVED_VOLUME_NAMES) + "]"
_RESERVED_MOUNTS_CEL = "[" + ", ".join(f"'{p}'" for p in RESERVED_MOUNT_PATHS) + "]"
RESERVED_VOLUME_MESSAGE = (
    "volumes named "
    + " or ".join(RESERVED_VOLUME_NAMES)
    + " cannot be set: Phased mounts the checkpoint claim and the report token under them"
)
RESERVED_MOUNT_MESSAGE = (
    "the worker may not mount anything at "
    + ", ".join(RESERVED_MOUNT_PATHS)
    + " nor mount the volumes "
    + ", ".join(RESERVED_VOLUME_NAMES)
    + ": Phased mounts the report token there"
)

# Bounds added to the generated schema so that the CEL rules below stay within the API
# server's cost budget (Kubernetes itself validates these lists in Go, without bounds).
EXTRA_BOUNDS: dict[str, dict[str, int]] = {
    "containers": {"maxItems": 32},
    "containers.[].name": {"maxLength": 63},
    "containers.[].env": {"maxItems": 512},
    "containers.[].env.[].name": {"maxLength": 256},
    "containers.[].volumeMounts": {"maxItems": 128},
    "containers.[].volumeMounts.[].name": {"maxLength": 63},
    "containers.[].volumeMounts.[].mountPath": {"maxLength": 1024},
    "volumes": {"maxItems": 256},
    "volumes.[].name": {"maxLength": 63},
}

Spec = dict[str, Any]


def reserved_env(name: str) -> bool:
    return name.startswith(RESERVED_ENV_PREFIXES) or name in RESERVED_ENV_NAMES


def _worker_env_names(spec: Spec) -> Iterator[str]:
    for container in spec.get("containers") or []:
        if container.get("name") == WORKER_CONTAINER:
            yield from (e.get("name", "") for e in container.get("env") or [])


def _worker_mounts(spec: Spec) -> Iterator[dict[str, Any]]:
    for container in spec.get("containers") or []:
        if container.get("name") == WORKER_CONTAINER:
            yield from container.get("volumeMounts") or []


def _required_node_affinity(spec: Spec) -> bool:
    node = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    return "requiredDuringSchedulingIgnoredDuringExecution" in node


_POOL = "Phased places each worker on a node of the job's pool"
# (CEL rule on the pod spec, message, the same check in Python: True when the spec is fine).
OWNED: tuple[tuple[str, str, Callable[[Spec], bool]], ...] = (
    (
        "!has(self.nodeName)",
        f"nodeName cannot be set: {_POOL}",
        lambda s: "nodeName" not in s,
    ),
    (
        "!has(self.nodeSelector)",
        f"nodeSelector cannot be set: {_POOL} (choose nodes with gpuTypes and the operator's "
        "settings)",
        lambda s: "nodeSelector" not in s,
    ),
    (
        "!has(self.affinity) || !has(self.affinity.nodeAffinity) || "
        "!has(self.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution)",
        f"required node affinity cannot be set: {_POOL} (preferred terms, pod affinity and "
        "anti-affinity are added to Phased's)",
        lambda s: not _required_node_affinity(s),
    ),
    (
        "!has(self.restartPolicy)",
        "restartPolicy cannot be set: workers run with Never and Phased restarts them",
        lambda s: "restartPolicy" not in s,
    ),
    (
        "!has(self.hostname) && !has(self.hostnameOverride) && !has(self.subdomain)",
        "hostname, hostnameOverride and subdomain cannot be set: Phased names workers for the "
        "rendezvous",
        lambda s: not {"hostname", "hostnameOverride", "subdomain"} & s.keys(),
    ),
    (
        f"!has(self.containers) || self.containers.all(c, c.name != '{WORKER_CONTAINER}' || "
        f"!has(c.env) || c.env.all(e, {RESERVED_ENV_RULE}))",
        RESERVED_ENV_MESSAGE,
        lambda s: not any(reserved_env(n) for n in _worker_env_names(s)),
    ),
    (
        f"!has(self.volumes) || self.volumes.all(v, !(v.name in {_RESERVED_VOLUMES_CEL}))",
        RESERVED_VOLUME_MESSAGE,
        lambda s: not any(v.get("name") in RESERVED_VOLUME_NAMES for v in s.get("volumes") or []),
    ),
    (
        f"!has(self.containers) || self.containers.all(c, c.name != '{WORKER_CONTAINER}' || "
        f"!has(c.volumeMounts) || c.volumeMounts.all(m, !(m.mountPath in "
        f"{_RESERVED_MOUNTS_CEL}) && !(m.name in {_RESERVED_VOLUMES_CEL})))",
        RESERVED_MOUNT_MESSAGE,
        lambda s: (
            not any(
                m.get("mountPath") in RESERVED_MOUNT_PATHS or m.get("name") in RESERVED_VOLUME_NAMES
                for m in _worker_mounts(s)
            )
        ),
    ),
)
CEL_RULES: tuple[tuple[str, str], ...] = tuple((rule, message) for rule, message, _ in OWNED)


@cache
def pod_spec_schema() -> dict[str, Any]:
    """The generated PodSpec schema (with merge keys); see ``hack/gen-pod-schema.py``."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())["schema"]
    return schema


def env_source_schema() -> dict[str, Any]:
    """The schema of an env var's ``valueFrom`` (an EnvVarSource)."""
    container = pod_spec_schema()["properties"]["containers"]["items"]
    source: dict[str, Any] = container["properties"]["env"]["items"]["properties"]["valueFrom"]
    return source


def crd_form(schema: Any) -> Any:
    """``schema`` as a CRD takes it: without the strategic-merge keys."""
    if isinstance(schema, dict):
        return {
            k: crd_form(v) for k, v in schema.items() if not k.startswith("x-kubernetes-patch-")
        }
    if isinstance(schema, list):
        return [crd_form(v) for v in schema]
    return schema


def owned_problems(spec: Spec) -> list[str]:
    """Phased's refusals (the CEL rules' messages) that ``spec`` runs into."""
    return [message for _, message, fine in OWNED if not fine(spec)]


MAX_REPORTED = 5


def structural_problems(value: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """What the API server's schema finds wrong with ``value`` (a pod spec), as sentences."""
    found: list[str] = []
    _check(value, pod_spec_schema() if schema is None else schema, "", found)
    return found[:MAX_REPORTED]


_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def _check(value: Any, schema: dict[str, Any], path: str, found: list[str]) -> None:
    if len(found) >= MAX_REPORTED:
        return
    where = path.lstrip(".") or "spec"
    if schema.get("x-kubernetes-int-or-string"):
        if not (_TYPES["integer"](value) or isinstance(value, str)):
            found.append(f"{where}: must be an integer or a string")
        return
    kind = schema.get("type")
    if kind and not _TYPES[kind](value):
        found.append(f"{where}: must be of type {kind}")
        return
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: must be one of {', '.join(map(str, schema['enum']))}")
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        found.append(f"{where}: may have at most {schema['maxLength']} characters")
    if isinstance(value, dict):
        properties = schema.get("properties")
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{where}.{key}: required")
        for key, item in value.items():
            if properties is not None:
                if key not in properties:
                    found.append(f"{where}: unknown field {str(key)[:64]!r}")
                    continue
                _check(item, properties[key], f"{path}.{key}", found)
            elif isinstance(schema.get("additionalProperties"), dict):
                _check(item, schema["additionalProperties"], f"{path}.{key}", found)
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            found.append(f"{where}: may have at most {schema['maxItems']} items")
        for index, item in enumerate(value):
            _check(item, schema.get("items", {}), f"{path}[{index}]", found)
        if schema.get("x-kubernetes-list-type") == "map" and all(
            isinstance(v, dict) for v in value
        ):
            keys = schema.get("x-kubernetes-list-map-keys", [])
            defaults = {k: schema["items"]["properties"][k].get("default") for k in keys}
            seen = [tuple(repr(v.get(k, defaults[k])) for k in keys) for v in value]
            repeated = sorted({s for s in seen if seen.count(s) > 1})
            if repeated:
                found.append(f"{where}: repeated {'/'.join(keys)}: {', '.join(repeated[0])}")


def merge(base: Any, patch: Any, schema: dict[str, Any] | None = None) -> Any:
    """``patch`` laid over ``base`` like a strategic merge patch (see the module docstring).

    Both are valid pod specs (or parts of one); neither is modified.
    """
    schema = pod_spec_schema() if schema is None else schema
    if isinstance(base, dict) and isinstance(patch, dict):
        properties = schema.get("properties")
        out = copy.deepcopy(base)
        for key, value in patch.items():
            if key in out:
                child = (
                    properties.get(key, {})
                    if properties is not None
                    else schema.get("additionalProperties") or {}
                )
                out[key] = merge(out[key], value, child if isinstance(child, dict) else {})
            else:
                out[key] = copy.deepcopy(value)
        return out
    key = schema.get("x-kubernetes-patch-merge-key")
    strategy = str(schema.get("x-kubernetes-patch-strategy", "")).split(",")
    if isinstance(base, list) and isinstance(patch, list) and key and "merge" in strategy:
        items = schema.get("items", {})
        out_list = [copy.deepcopy(v) for v in base]
        for item in patch:
            match = next(
                (
                    i
                    for i, old in enumerate(out_list)
                    if isinstance(old, dict)
                    and isinstance(item, dict)
                    and old.get(key) == item.get(key)
                ),
                None,
            )
            if match is None:
                out_list.append(copy.deepcopy(item))
            elif "retainKeys" in strategy:
                out_list[match] = copy.deepcopy(item)
            else:
                out_list[match] = merge(out_list[match], item, items)
        return out_list
    return copy.deepcopy(patch)
