"""An in-memory stand-in for the API server, behind the same ``request`` the kube verbs call.

It keeps Nodes, Pods and TrainingJobs as raw dicts and answers the requests the verbs make:
GET/LIST (honouring a ``labelSelector``)/merge-PATCH (with the resourceVersion
precondition)/JSON-PATCH (its ``test`` ops as the API server runs them, and the validation
of unique taints) on Nodes, LIST of pods by
``spec.nodeName``, evictions (refused with 429 for pods a disruption budget protects),
deletes, and GET and merge-PATCH (with the precondition) of a TrainingJob. Anything else
fails the test.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from phased.core.selector import selects
from phased.kube.client import JSON, JSON_PATCH, Conflict, Invalid, KubeError, NotFound
from phased.kube.nodes import NodeVerbs
from phased.kube.nodeview import NodeView

_NODE = re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)$")
_POD = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)(?P<sub>/eviction)?$")
_JOB = re.compile(r"^/apis/phased\.dev/v1alpha1/namespaces/(?P<ns>[^/]+)/trainingjobs/(?P<n>.+)$")


def merge(target: JSON, patch: JSON) -> None:
    """RFC 7386 merge patch, in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            if not isinstance(target.get(key), dict):
                target[key] = {}
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _step(at: Any, part: str) -> Any:
    if isinstance(at, list):
        return at[int(part)] if part.isdigit() and int(part) < len(at) else None
    return at.get(part) if isinstance(at, dict) else None


def json_patch(target: JSON, ops: list[JSON]) -> JSON:
    """RFC 6902 (add, remove, test) on a copy of ``target``, as the API server's JSON patch
    runs it: a ``test`` of ``null`` passes on a missing field; a path whose parent is
    missing fails. Raises ``Invalid`` (422) as the API server answers."""
    doc = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent: Any = doc
        for part in parts[:-1]:
            parent = _step(parent, part)
        last = parts[-1]
        if not isinstance(parent, dict | list):
            raise Invalid(422, "", f"{op['op']}: missing path {op['path']}", "patch", "nodes")
        if op["op"] == "test":
            found = _step(parent, last)
            if found == {} or found == []:  # the API omits an empty map or list; the fake keeps one
                found = None
            if found != op["value"]:
                raise Invalid(422, "", f"testing value {op['path']} failed", "patch", "nodes")
        elif op["op"] == "add":
            value = copy.deepcopy(op["value"])
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), value)
            else:
                parent[last] = value
        elif op["op"] == "remove":
            if _step(parent, last) is None:
                raise Invalid(422, "", f"remove: missing {op['path']}", "patch", "nodes")
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise AssertionError(f"the fake API does not run the JSON patch op {op['op']}")
    return doc


def _validate_node(node: JSON) -> None:
    """The API server's validation that a fake node could break: taints unique by key and
    effect."""
    taints = [(t["key"], t["effect"]) for t in (node.get("spec") or {}).get("taints") or []]
    if len(set(taints)) != len(taints):
        raise Invalid(422, "Invalid", "taints must be unique by key and effect", "patch", "nodes")


class FakeCluster:
    def __init__(self) -> None:
        self.nodes: dict[str, JSON] = {}
        self.pods: list[JSON] = []
        self.jobs: dict[tuple[str, str], JSON] = {}
        self.protected: set[tuple[str, str]] = set()  # pods a disruption budget holds
        self.calls: list[tuple[str, str]] = []  # (method, path)
        self.after_patch: Callable[[str], None] | None = None
        self.busy: dict[str, int] = {}  # node -> patches that lose to another writer first
        # told the node's name as a node patch answers 409 (a watch bringing the winning write)
        self.on_conflict: Callable[[str], None] | None = None
        # writes of another client (the operator's status) that land just before each of the
        # next job patches, one each, in order
        self.job_writers: list[Callable[[JSON], None]] = []
        self._rv = 100

    # -- building the cluster -----------------------------------------------------------------

    def add_node(self, name: str, labels: dict[str, str] | None = None, **extra: Any) -> JSON:
        self._rv += 1
        raw: JSON = {
            "metadata": {
                "name": name,
                "resourceVersion": str(self._rv),
                "labels": dict(labels or {}),
                "annotations": dict(extra.pop("annotations", {})),
            },
            "spec": dict(extra.pop("spec", {})),
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        self.nodes[name] = raw
        return raw

    def add_pod(self, namespace: str, name: str, node: str, **meta: Any) -> JSON:
        raw: JSON = {
            "metadata": {"namespace": namespace, "name": name, **meta},
            "spec": {"nodeName": node},
            "status": {"phase": "Running"},
        }
        self.pods.append(raw)
        return raw

    def pod(self, namespace: str, name: str) -> JSON | None:
        for raw in self.pods:
            meta = raw["metadata"]
            if (meta["namespace"], meta["name"]) == (namespace, name):
                return raw
        return None

    def patches(self) -> list[str]:
        return [path for method, path in self.calls if method == "PATCH"]

    # -- the API ------------------------------------------------------------------------------

    async def request(
        self,
        verb: str,
        method: str,
        path: str,
        *,
        resource: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        retry: bool = True,
    ) -> JSON:
        self.calls.append((method, path))
        if path == "/api/v1/nodes" and method == "GET":
            wanted = str((query or {}).get("labelSelector", ""))
            chosen = [
                n for n in self.nodes.values() if selects(wanted, n["metadata"].get("labels") or {})
            ]
            return {"items": copy.deepcopy(chosen)}
        if match := _NODE.match(path):
            return self._node(method, match["name"], body, resource, content_type)
        if path == "/api/v1/pods" and method == "GET":
            wanted = str((query or {}).get("fieldSelector", "")).removeprefix("spec.nodeName=")
            return {
                "items": copy.deepcopy([p for p in self.pods if p["spec"]["nodeName"] == wanted])
            }
        if match := _POD.match(path):
            return self._pod(method, match["ns"], match["name"], bool(match["sub"]), resource)
        if path == "/apis/phased.dev/v1alpha1/trainingjobs" and method == "GET":
            return {"items": copy.deepcopy(list(self.jobs.values()))}
        if match := _JOB.match(path):
            return self._job(method, (match["ns"], match["n"]), body, verb, resource)
        raise AssertionError(f"the fake API does not serve {method} {path}")

    def _node(
        self, method: str, name: str, body: Any, resource: str, content_type: str | None
    ) -> JSON:
        node = self.nodes.get(name)
        if node is None:
            raise NotFound(404, "NotFound", name, method, resource)
        if method == "GET":
            return copy.deepcopy(node)
        assert method == "PATCH"
        if self.busy.get(name, 0) > 0:  # someone else wrote the node just before
            self.busy[name] -= 1
            self._rv += 1
            node["metadata"]["resourceVersion"] = str(self._rv)
        if content_type == JSON_PATCH:  # no precondition but its tests
            patched = json_patch(node, body)
            _validate_node(patched)
            self.nodes[name] = node = patched
            self._rv += 1
            node["metadata"]["resourceVersion"] = str(self._rv)
            if self.after_patch is not None:
                self.after_patch(name)
            return copy.deepcopy(node)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != node["metadata"]["resourceVersion"]:
            if self.on_conflict is not None:
                self.on_conflict(name)
            raise Conflict(409, "Conflict", "the object has been modified", "patch", resource)
        patch = copy.deepcopy(body)
        patch["metadata"].pop("resourceVersion", None)
        merge(node, patch)
        self._rv += 1
        node["metadata"]["resourceVersion"] = str(self._rv)
        if self.after_patch is not None:
            self.after_patch(name)
        return copy.deepcopy(node)

    def _job(self, method: str, key: tuple[str, str], body: Any, verb: str, resource: str) -> JSON:
        job = self.jobs.get(key)
        if job is None:
            raise NotFound(404, "NotFound", "no such job", verb, resource)
        if method == "GET":
            return copy.deepcopy(job)
        assert method == "PATCH"
        if self.job_writers:
            self.job_writers.pop(0)(job)
            self._bump(job)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != job["metadata"].get("resourceVersion"):
            raise Conflict(409, "Conflict", "the object has been modified", "patch", resource)
        patch = copy.deepcopy(body)
        patch["metadata"].pop("resourceVersion", None)
        merge(job, patch)
        self._bump(job)
        return copy.deepcopy(job)

    def _bump(self, raw: JSON) -> None:
        self._rv += 1
        raw["metadata"]["resourceVersion"] = str(self._rv)

    def _pod(self, method: str, ns: str, name: str, eviction: bool, resource: str) -> JSON:
        raw = self.pod(ns, name)
        if raw is None:
            raise NotFound(404, "NotFound", name, method, resource)
        if eviction:
            assert method == "POST"
            if (ns, name) in self.protected:
                raise KubeError(429, "TooManyRequests", "disruption budget", "create", resource)
        else:
            assert method == "DELETE"
        raw["metadata"]["deletionTimestamp"] = "2026-03-01T12:00:00Z"
        return {}


def verbs_on_a_view(cluster: FakeCluster, installation: str) -> tuple[NodeView, NodeVerbs]:
    """A node view of every node of ``cluster`` now, and node verbs that make their changes
    from it and put what they see into it, as the operator wires them."""
    view = NodeView()
    view.replace_all(copy.deepcopy(list(cluster.nodes.values())))
    verbs = NodeVerbs(
        cluster,  # type: ignore[arg-type]
        installation,
        on_seen=lambda name, fresh: view.refresh(name, fresh),
        known=view.get,
    )
    return view, verbs
