"""The ClusterRole holds exactly the rules the operator uses: no wildcards, and no Secret it
could read (it creates each job's report-token Secret and never reads one back)."""

from __future__ import annotations

from typing import Any

from tests.helm.chart import NAMESPACE, find, needs_helm, one, render

pytestmark = needs_helm

# (apiGroup, resource) -> the exact verbs; see the comments in templates/rbac.yaml.
CLUSTER_RULES = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    ("", "events"): {"create"},
    ("phased.dev", "trainingjobs"): {"get", "list", "watch", "patch"},
    ("phased.dev", "trainingjobs/status"): {"patch"},
    ("phased.dev", "trainingjobs/finalizers"): {"update"},
    ("", "nodes"): {"get", "list", "watch", "patch"},
    ("", "pods"): {"list", "watch", "create", "delete"},
    ("", "pods/eviction"): {"create"},
    ("", "services"): {"create"},
    ("", "secrets"): {"create"},
    ("", "persistentvolumeclaims"): {"create"},
}
# The Lease: get and update on the one Lease by name; create cannot be limited by name.
LEASE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "resourceNames": ["phased-operator"], "verbs": ["get", "update"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
]  # fmt: skip


def _rules(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    table: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule
        assert "resourceNames" not in rule or role["kind"] == "Role"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                key = (group, resource)
                assert key not in table, f"{key} granted twice"
                table[key] = set(rule["verbs"])
    return table


def test_the_cluster_role_grants_exactly_the_documented_verbs() -> None:
    assert _rules(one(render(), "ClusterRole")) == CLUSTER_RULES


def test_nothing_is_granted_by_wildcard_and_no_secret_can_be_read() -> None:
    docs = render("leaderElection.enabled=true")
    for role in find(docs, "ClusterRole") + find(docs, "Role"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (role["metadata"]["name"], rule)
            assert not {"configmaps", "namespaces"} & set(rule["resources"])
            if "secrets" in rule["resources"]:
                assert rule["verbs"] == ["create"], rule
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])


def test_the_binding_names_the_operator_service_account() -> None:
    docs = render()
    binding = one(docs, "ClusterRoleBinding")
    account = one(docs, "ServiceAccount")
    assert binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    assert (
        one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
        == (account["metadata"]["name"])
    )


def test_leader_election_adds_one_lease_role_in_the_release_namespace_only() -> None:
    assert not find(render(), "Role")
    docs = render("leaderElection.enabled=true")
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == LEASE_RULES
    renamed = one(render("leaderElection.enabled=true", "leaderElection.leaseName=ha"), "Role")
    assert renamed["rules"][0]["resourceNames"] == ["ha"]
    binding = one(docs, "RoleBinding")
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert _rules(one(docs, "ClusterRole")) == CLUSTER_RULES


def test_rbac_and_the_account_can_be_left_to_someone_else() -> None:
    docs = render("rbac.create=false", "serviceAccount.create=false", "serviceAccount.name=ops")
    assert not find(docs, "ClusterRole") and not find(docs, "ServiceAccount")
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "ops"
