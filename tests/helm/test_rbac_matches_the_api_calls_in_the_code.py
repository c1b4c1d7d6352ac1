"""The chart's ClusterRole grants exactly the API calls the code makes: nothing missing, nothing
the operator never uses.

The calls are read from the source, not from a list kept by hand:

* every ``request("<verb>", "<METHOD>", <path>, resource=<resource>)`` in
  ``operator/phased/kube/*.py`` (the only code that sends requests, see kube/client.py and the
  import-linter contracts), and every ``stream(...)`` of the same form (a watch: a GET of a
  collection, which the API server authorizes as "watch"). The path is rendered (f-strings
  with the API constants, helper functions called with placeholders) and checked against
  the verb and resource the call claims, so a mislabelled call fails here rather than in production;
* what the API server demands besides: with blockOwnerDeletion on the ownerReferences of
  workers and Services, "update" on ``trainingjobs/finalizers`` (see rbac.yaml);
* what kopf needs for the handlers in ``operator/phased/handlers``: list and watch on every
  resource an ``@kopf.on.event`` handler names, and list and watch on CRDs (kopf's resource
  observer, ``kopf._cogs.structs.references.CRDS``). ``phased run`` starts kopf standalone
  (no peering objects) and cluster-wide (no Namespaces scan), with its event poster off;
  the test checks those settings too, since each would need more rules.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helm.chart import ROOT, find, needs_helm, one, render

PACKAGE = ROOT / "operator" / "phased"
KUBE = PACKAGE / "kube"
HANDLERS = PACKAGE / "handlers" / "__init__.py"
RUN = PACKAGE / "cli" / "run.py"
PERSON_READS = KUBE / "inspect.py"

Rule = tuple[str, str]  # (apiGroup, resource)
# Leader election's Lease: granted by a Role in the release namespace, not the ClusterRole.
LEASES: Rule = ("coordination.k8s.io", "leases")


@dataclass(frozen=True)
class Call:
    where: str  # file:line
    verb: str
    method: str
    path: str
    resource: str
    streaming: bool = False  # KubeClient.stream: a watch


# --- reading the source ----------------------------------------------------------------------


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT / "operator").with_suffix("").parts)


def _self_attributes(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """``self.<name> = <expr>`` assignments (paths kept on the instance, e.g. lease.py's)."""
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                found.setdefault(target.attr, []).append(node.value)
    return found


def _render(node: ast.expr, module: Any, attrs: dict[str, list[ast.expr]] | None = None) -> str:
    """The string an expression builds, with unknown values as ``{placeholders}``."""
    attrs = attrs or {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_render(v, module, attrs) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        return _render(node.value, module, attrs)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _render(node.left, module, attrs) + _render(node.right, module, attrs)
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr in attrs
    ):
        assigned = attrs[node.attr]
        assert len(assigned) == 1, f"self.{node.attr} is assigned {len(assigned)} times"
        return _render(assigned[0], module, attrs)
    if isinstance(node, ast.Name):
        value = getattr(module, node.id, None)
        # Module-level string constants (GROUP, VERSION, PLURAL); anything else is a value
        # known only at run time (a namespace, a name).
        if isinstance(value, str) and node.id.isupper():
            return value
        return "{" + node.id + "}"
    if isinstance(node, ast.Subscript | ast.Attribute):
        return "{" + ast.unparse(node) + "}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        helper = getattr(module, node.func.id, None)
        if callable(helper):  # a path helper such as jobs._path: call it with placeholders
            args = ["{" + ast.unparse(a) + "}" for a in node.args]
            result = helper(*args)
            assert isinstance(result, str), ast.unparse(node)
            return result
    raise AssertionError(f"cannot read a path or resource from {ast.unparse(node)!r}")


def _request_calls(path: Path) -> Iterator[Call]:
    module = importlib.import_module(_module_name(path))
    tree = ast.parse(path.read_text(encoding="utf-8"))
    attrs = _self_attributes(tree)
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("request", "stream")
            and (node.func.attr == "request" or ast.unparse(node.func.value) == "self._kube")
        ):
            continue
        where = f"{path.relative_to(ROOT)}:{node.lineno}"
        assert len(node.args) == 3, f"{where}: request(verb, METHOD, path, resource=...)"
        verb, method = (a.value if isinstance(a, ast.Constant) else None for a in node.args[:2])
        assert isinstance(verb, str) and isinstance(method, str), f"{where}: literal verb/method"
        keywords = {k.arg: k.value for k in node.keywords}
        assert "resource" in keywords, f"{where}: no resource="
        yield Call(
            where,
            verb,
            method,
            _render(node.args[2], module, attrs),
            _render(keywords["resource"], module, attrs),
            streaming=node.func.attr == "stream",
        )


def code_calls() -> list[Call]:
    """The operator's calls: every kube module but the reads `kubectl phased` makes."""
    files = [f for f in sorted(KUBE.glob("*.py")) if f != PERSON_READS]
    calls = [c for f in files for c in _request_calls(f)]
    assert calls, "no request() calls found in operator/phased/kube"
    return calls


def person_calls() -> list[Call]:
    """`kubectl phased`'s calls, made with a person's credentials (the operator never imports
    the module: an import-linter contract in pyproject.toml)."""
    return list(_request_calls(PERSON_READS))


_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/{}]+)/(?P<version>[^/{}]+))"
    r"(?:/namespaces/(?P<ns>\{[^/]+\}))?"
    r"/(?P<resource>[a-z0-9.]+)(?:/(?P<name>\{[^/]+\}))?(?:/(?P<sub>[a-z]+))?$"
)


def _rule_and_verb(call: Call) -> tuple[Rule, str]:
    """What the API server authorizes this request as, from its method and path alone."""
    match = _PATH.match(call.path)
    assert match, f"{call.where}: unrecognised API path {call.path!r}"
    group = "" if match["core"] else match["group"]
    resource = match["resource"] + (f"/{match['sub']}" if match["sub"] else "")
    named = bool(match["name"])
    if match["sub"] and call.method == "POST" and named:
        return (group, resource), "create"  # e.g. pods/eviction: a POST creates it
    if call.streaming:
        assert call.method == "GET" and not named, f"{call.where}: a stream is a collection GET"
        return (group, resource), "watch"
    verb = {
        ("GET", True): "get",
        ("GET", False): "list",
        ("POST", False): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }.get((call.method, named))
    assert verb, f"{call.where}: {call.method} {call.path} is no verb this test knows"
    return (group, resource), verb


def _kopf_decorators() -> list[ast.Call]:
    tree = ast.parse(HANDLERS.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and ast.unparse(deco.func).startswith("kopf.on."):
                    found.append(deco)
    return found


def kopf_watches() -> dict[Rule, set[str]]:
    """kopf lists and watches each resource an on.event handler names, and the CRDs."""
    from kopf._cogs.structs import references

    module = importlib.import_module("phased.handlers")
    table: dict[Rule, set[str]] = {}
    for deco in _kopf_decorators():
        kind = ast.unparse(deco.func).removeprefix("kopf.on.")
        if kind in {"startup", "login", "cleanup"}:
            continue
        # Other handlers (create/update/delete/resume, daemons, timers) make kopf patch the
        # object (finalizers, progress annotations): they would need "patch" on it.
        assert kind == "event", f"kopf.on.{kind} handlers write to objects: extend the RBAC"
        group, _version, plural = (_render(a, module) for a in deco.args[:3])
        table.setdefault((group, plural), set()).update({"list", "watch"})
    crds = references.CRDS  # a selector by group and "any name" (its plural, here)
    name = crds.plural or crds.any_name
    assert name == "customresourcedefinitions", crds
    table[(crds.group or "", name)] = {"list", "watch"}
    return table


def implied_by_owner_references() -> dict[Rule, set[str]]:
    """Objects the operator creates point at their TrainingJob; with blockOwnerDeletion the
    OwnerReferencesPermissionEnforcement admission plugin (OpenShift, hardened clusters)
    demands "update" on the owner's finalizers subresource of whoever creates them."""
    from phased.api.v1alpha1 import API_VERSION, GROUP, PLURAL
    from phased.core.model import JobRef
    from phased.core.workers import owner_reference

    ref = owner_reference(JobRef(namespace="ns", name="job", uid="uid"))
    assert ref["apiVersion"] == API_VERSION
    if not ref.get("blockOwnerDeletion"):
        return {}
    return {(GROUP, f"{PLURAL}/finalizers"): {"update"}}


def expected_rules() -> dict[Rule, set[str]]:
    """Every (apiGroup, resource) -> verbs the code and kopf use, whatever the namespace."""
    table: dict[Rule, set[str]] = {}
    for call in code_calls():
        rule, verb = _rule_and_verb(call)
        table.setdefault(rule, set()).add(verb)
    for source in (kopf_watches(), implied_by_owner_references()):
        for rule, verbs in source.items():
            table.setdefault(rule, set()).update(verbs)
    return table


def cluster_rules() -> dict[Rule, set[str]]:
    """What the ClusterRole must grant: everything but the leader-election Lease."""
    return {r: v for r, v in expected_rules().items() if r != LEASES}


def lease_rules() -> dict[Rule, set[str]]:
    """What the leader-election Role (release namespace only) must grant."""
    return {r: v for r, v in expected_rules().items() if r == LEASES}


def _granted(role: dict[str, Any]) -> dict[Rule, set[str]]:
    table: dict[Rule, set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                table.setdefault((group, resource), set()).update(rule["verbs"])
    return table


def _diff(granted: dict[Rule, set[str]], wanted: dict[Rule, set[str]]) -> str:
    lines = []
    for rule in sorted(set(granted) | set(wanted)):
        extra = granted.get(rule, set()) - wanted.get(rule, set())
        missing = wanted.get(rule, set()) - granted.get(rule, set())
        if extra:
            lines.append(f"  {rule}: granted but never used: {sorted(extra)}")
        if missing:
            lines.append(f"  {rule}: used but not granted: {sorted(missing)}")
    return "\n".join(lines)


# --- the source says what it says ------------------------------------------------------------


def test_kubectl_phased_only_reads() -> None:
    calls = person_calls()
    assert {_rule_and_verb(c) for c in calls} == {
        (("phased.dev", "trainingjobs"), "get"),
        (("", "events"), "list"),
        (("", "nodes"), "list"),
    }
    assert all(c.method == "GET" for c in calls)


def test_every_request_is_labelled_with_the_verb_and_resource_it_really_is() -> None:
    for call in code_calls() + person_calls():
        (_group, resource), verb = _rule_and_verb(call)
        assert call.verb == verb, f"{call.where}: labelled {call.verb!r}, the API sees {verb!r}"
        assert call.resource == resource, (
            f"{call.where}: labelled {call.resource!r}, the path {call.path} is {resource!r}"
        )


def test_only_the_kube_package_sends_requests() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        if KUBE in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                assert node.func.attr != "request", (
                    f"{path.relative_to(ROOT)}:{node.lineno} sends a request outside kube/; "
                    "this test (and the RBAC) only know kube/*.py"
                )


def test_kopf_runs_standalone_cluster_wide_without_its_event_poster() -> None:
    """Peering would need kopf's peering resources, namespace patterns a Namespaces list and
    watch, kopf's own poster Events that kopf decides on: none is granted, so none is used."""
    run = ast.unparse(ast.parse(RUN.read_text(encoding="utf-8")))
    assert "standalone=True" in run
    assert "clusterwide=not namespaces" in run
    handlers = HANDLERS.read_text(encoding="utf-8")
    assert "settings.posting.enabled = False" in handlers
    assert "peering" not in handlers


def test_the_calls_found_are_the_ones_known() -> None:
    """A guard for the parser itself: it must find the verbs everyone knows are there."""
    found = {(_rule_and_verb(c)[0], _rule_and_verb(c)[1]) for c in code_calls()}
    for known in [
        (("", "nodes"), "patch"),
        (("", "pods"), "create"),
        (("", "pods"), "delete"),
        (("", "events"), "create"),
        (("", "pods/eviction"), "create"),
        (("phased.dev", "trainingjobs/status"), "patch"),
        (("", "nodes"), "watch"),  # the operator's own Node watch (kube/nodewatch.py)
    ]:
        assert known in found, known
    assert kopf_watches()[("apiextensions.k8s.io", "customresourcedefinitions")] == {
        "list",
        "watch",
    }


# --- and the chart grants exactly that ---------------------------------------------------------


@needs_helm
def test_the_cluster_role_grants_exactly_the_calls_the_code_makes() -> None:
    granted = _granted(one(render(), "ClusterRole"))
    wanted = cluster_rules()
    assert granted == wanted, "ClusterRole vs the code:\n" + _diff(granted, wanted)


@needs_helm
def test_the_leader_election_role_grants_exactly_the_lease_calls() -> None:
    """The Lease is the one namespaced grant: a Role in the release namespace, only with
    leaderElection.enabled, holding the verbs kube/lease.py uses (none if there is no such
    code, in which case the toggle must grant nothing)."""
    assert not find(render(), "Role")
    docs = render("leaderElection.enabled=true")
    assert _granted(one(docs, "ClusterRole")) == cluster_rules()
    granted: dict[Rule, set[str]] = {}
    for role in find(docs, "Role"):
        for rule, verbs in _granted(role).items():
            granted.setdefault(rule, set()).update(verbs)
    wanted = lease_rules()
    assert granted == wanted, "leader-election Role vs the code:\n" + _diff(granted, wanted)
