"""The Helm chart on the real API server, and the operator running with the chart's identity.

`helm install` puts the chart into a fresh namespace (its Deployment's pod is simulated by
kwok: it is "Running" without running anything). The real operator then runs here, as a
process, logged in with a token of the chart's ServiceAccount and reading the settings file
the chart rendered into its ConfigMap, so it has exactly the permissions the chart grants: a
missing one shows up as a Forbidden in its log and a job that does not finish, an excess one
in `kubectl auth can-i`. Under that identity a four-phase job with a NotReady node runs to
Succeeded. `helm upgrade` with a new price and currency changes the ConfigMap and the pod
template's checksum, and the operator restarted on the new settings prices a new job with
them. `helm uninstall` removes the operator's objects and identity, and leaves the CRD (shared
with every other test: never deleted here) and no node claimed by these jobs.

Other operators (other test modules, run at the same time) watch every namespace too and may
act on these jobs; the identity checks therefore also read this operator's own log.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import lib
from e2e.harness import REPO, Operator, dump
from e2e.operator_fixtures import JOB_UID, LOGS, apply, get_job, nodes_of, status, wait_state

CHART = REPO / "helm" / "phased"
CRD_NAME = "trainingjobs.phased.dev"
OLD_PRICE = 2.5  # the chart's default for H100 (and e2e/settings.yaml's)
NEW_PRICE = 7.5
NEW_CURRENCY = "EUR"


def helm_binary() -> str:
    sys.path.insert(0, str(REPO))
    from tests.helm.chart import helm_binary as find
    from tests.tools import missing_tool

    found = find()
    if found is None:
        missing_tool("no helm binary (bash e2e/cluster/build.sh helm builds one)")
    return found


@dataclass
class Release:
    """One installed release and the operator running with its identity."""

    name: str
    namespace: str  # the release's
    jobs_namespace: str
    admin_kubeconfig: str
    workdir: Path
    helm: str
    operator: Operator | None = None
    uninstalled: bool = False
    jobs: dict[str, str] = field(default_factory=dict)  # name -> uid

    @property
    def account(self) -> str:  # the chart's full name: the release name contains "phased"
        return self.name

    @property
    def subject(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.account}"

    def run_helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        home = self.workdir / "helm"
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        proc = subprocess.run(
            [self.helm, *args, "--kubeconfig", self.admin_kubeconfig, "-n", self.namespace],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}: {proc.returncode}\n{proc.stderr}")
        return proc

    @property
    def sa_kubeconfig(self) -> str:
        return str(self.workdir / "chart-identity.kubeconfig")

    @property
    def settings_file(self) -> Path:
        return self.workdir / "settings.yaml"


def _values_file(workdir: Path) -> Path:
    """The image is irrelevant (kwok runs no container); keep the pod off the GPU nodes and
    resync faster than the default, as the other e2e tests do."""
    values = {
        "image": {"repository": "registry.k8s.io/pause", "tag": "3.10"},
        "nodeSelector": {"phased.dev/sim-node-kind": "cpu"},
        "settings": {"resyncInterval": "10s", "nodeRelistInterval": "1m"},
    }
    path = workdir / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def _write_identity_kubeconfig(release: Release, kubectl: lib.Kubectl) -> None:
    """A kubeconfig holding only a token of the chart's ServiceAccount and the cluster's CA."""
    token = kubectl(
        "create", "token", release.account, "-n", release.namespace, "--duration=1h"
    ).strip()
    admin = yaml.safe_load(Path(release.admin_kubeconfig).read_text())
    context = next(c["context"] for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c["cluster"] for c in admin["clusters"] if c["name"] == context["cluster"])
    ca_data = cluster.get("certificate-authority-data")
    if not ca_data:
        ca_path = Path(cluster["certificate-authority"])
        if not ca_path.is_absolute():
            ca_path = Path(release.admin_kubeconfig).parent / ca_path
        ca_data = base64.b64encode(ca_path.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "test",
                "cluster": {"server": cluster["server"], "certificate-authority-data": ca_data},
            }
        ],
        "users": [{"name": release.account, "user": {"token": token}}],
        "contexts": [{"name": "chart", "context": {"cluster": "test", "user": release.account}}],
        "current-context": "chart",
    }
    path = Path(release.sa_kubeconfig)
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)


def _rendered_settings(release: Release, kubectl: lib.Kubectl) -> str:
    cm = json.loads(
        kubectl(
            "get", "configmap", f"{release.name}-settings", "-n", release.namespace, "-o", "json"
        )
    )
    text: str = cm["data"]["settings.yaml"]
    return text


def _start_operator(release: Release, kubectl: lib.Kubectl) -> Operator:
    release.settings_file.write_text(_rendered_settings(release, kubectl))
    # The report key the chart generated, where the pod would have it mounted (here a file).
    secret = json.loads(
        kubectl(
            "get", "secret", f"{release.name}-report-key", "-n", release.namespace, "-o", "json"
        )
    )
    key_file = release.workdir / "report-key"
    key_file.write_bytes(base64.b64decode(secret["data"]["key"]))
    log = LOGS / "test_the_chart_installs_and_runs_with_least_privilege.log"
    env = {"PHASED_REPORT_KEY_FILE": str(key_file)}
    return Operator(release.sa_kubeconfig, log, settings=release.settings_file, env=env).start()


def _checksum(release: Release, kubectl: lib.Kubectl) -> str:
    deploy = json.loads(
        kubectl("get", "deployment", release.name, "-n", release.namespace, "-o", "json")
    )
    value: str = deploy["spec"]["template"]["metadata"]["annotations"]["checksum/settings"]
    return value


def _forbidden_lines(op: Operator) -> list[str]:
    text = op.log_path.read_text(errors="replace") if op.log_path.exists() else ""
    return [line for line in text.splitlines() if "forbidden" in line.lower() or " 403" in line]


@pytest.fixture(scope="module")
def release(
    kubeconfig: str, kubectl: lib.Kubectl, core: Any, tmp_path_factory: Any
) -> Iterator[Release]:
    helm = helm_binary()
    name = lib.unique_name("phased-lp")
    namespace = lib.create_namespace(core, prefix="phased-lp")
    jobs_namespace = lib.create_namespace(core, prefix="e2e-lp")
    rel = Release(
        name, namespace, jobs_namespace, kubeconfig, tmp_path_factory.mktemp("chart"), helm
    )
    log = LOGS / "test_the_chart_installs_and_runs_with_least_privilege.log"
    if log.exists():
        log.unlink()
    try:
        # The CRD is in the chart's crds/: helm creates it when missing and skips it when
        # present (the other tests share it); uninstall never deletes it.
        rel.run_helm("install", name, str(CHART), "--values", str(_values_file(rel.workdir)))
        kubectl("rollout", "status", f"deployment/{name}", "-n", namespace, "--timeout=120s")
        kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
        _write_identity_kubeconfig(rel, kubectl)
        rel.operator = _start_operator(rel, kubectl)
        yield rel
    finally:
        _tear_down(rel, kubectl, core)


def _tear_down(rel: Release, kubectl: lib.Kubectl, core: Any) -> None:
    """Jobs go while an operator still runs (it releases their nodes), then the release.
    Every step runs even when an earlier one fails (say, the API server restarted)."""

    def jobs_left() -> list[dict[str, Any]]:
        listed = kubectl("get", "trainingjobs", "-n", rel.jobs_namespace, "-o", "json")
        items: list[dict[str, Any]] = json.loads(listed)["items"]
        return items

    def delete_jobs() -> None:
        kubectl.run(
            "delete", "trainingjobs", "--all", "-n", rel.jobs_namespace, "--wait=false", check=False
        )
        try:
            lib.wait_until(lambda: not jobs_left(), 90, message="the test's TrainingJobs gone")
        finally:
            for item in jobs_left():  # no operator took them: drop the finalizer ourselves
                kubectl.run(
                    "patch",
                    "trainingjob",
                    item["metadata"]["name"],
                    "-n",
                    rel.jobs_namespace,
                    "--type=merge",
                    "-p",
                    '{"metadata":{"finalizers":null}}',
                    check=False,
                )

    steps = [
        delete_jobs,
        *([rel.operator.stop] if rel.operator is not None else []),
        *[(lambda uid=uid: _release_nodes(rel, core, uid)) for uid in rel.jobs.values()],
        *([] if rel.uninstalled else [lambda: rel.run_helm("uninstall", rel.name, check=False)]),
        lambda: lib.delete_namespace(core, rel.jobs_namespace),
        lambda: lib.delete_namespace(core, rel.namespace),
    ]
    errors = []
    for step in steps:
        try:
            step()
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def _release_nodes(rel: Release, core: Any, uid: str) -> None:
    """Give back this test's quarantined nodes only (others' tests may hold some too)."""
    quarantined = [n for n, role in nodes_of(core, uid).items() if role == "quarantined"]
    for node in quarantined:
        lib.reset_node(core, node)
    if quarantined:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "phased",
                "release-node",
                "--kubeconfig",
                rel.admin_kubeconfig,
                *quarantined,
            ],
            check=True,
            capture_output=True,
        )


def _phase(name: str, seconds: int) -> dict[str, Any]:
    return {
        "name": name,
        "nodes": {"min": 2, "max": 2},
        "gpuTypes": ["H100"],  # one type, so cost / GPU-hours is exactly its price
        "gpusPerNode": 8,
        "expectedDuration": f"{seconds}s",
        "template": {"annotations": {lib.SUCCEED_AFTER: f"{seconds}s"}},
    }


def _job(name: str, phases: list[dict[str, Any]]) -> dict[str, Any]:
    """The shape of examples/small.yaml, with 2-node phases and short durations."""
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"]},
            "phases": phases,
            "spares": {"count": 1},
            "failurePolicy": {"notReadyGrace": "5s"},
            "checkpoint": {"interval": "1m"},
        },
    }


def _can_i(release: Release, kubectl: lib.Kubectl, verb: str, resource: str) -> bool:
    """Asked as the chart's identity itself (a SelfSubjectAccessReview with its token)."""
    what, _, sub = resource.partition("/")
    args = ["--kubeconfig", release.sa_kubeconfig, "auth", "can-i", verb, what, "-A"]
    if sub:
        args.append(f"--subresource={sub}")
    proc = subprocess.run(
        [kubectl.binary, *args], capture_output=True, text=True, timeout=30, check=False
    )
    answer = proc.stdout.strip()
    assert answer in ("yes", "no"), f"can-i {verb} {resource}: {answer} {proc.stderr}"
    return answer == "yes"


# --- the tests -------------------------------------------------------------------------------


def test_the_chart_identity_may_do_what_its_cluster_role_says_and_nothing_else(
    release: Release, kubectl: lib.Kubectl
) -> None:
    role = json.loads(kubectl("get", "clusterrole", release.name, "-o", "json"))
    granted = []
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                what, _, sub = resource.partition("/")
                full = f"{what}.{group}" if group else what
                for verb in rule["verbs"]:
                    granted.append((verb, f"{full}/{sub}" if sub else full))
    assert granted
    refused = [g for g in granted if not _can_i(release, kubectl, *g)]
    assert not refused, f"granted by the ClusterRole but refused to {release.subject}: {refused}"

    for verb, resource in [
        ("get", "secrets"),
        ("list", "secrets"),
        ("get", "configmaps"),
        ("get", "pods"),  # listed and watched, never read one by one
        ("get", "trainingjobs.phased.dev/status"),
        ("create", "nodes"),
        ("delete", "nodes"),
        ("update", "nodes"),
        ("delete", "trainingjobs.phased.dev"),
        ("create", "trainingjobs.phased.dev"),
        ("create", "pods/exec"),
        ("delete", "services"),
        ("patch", "events"),
        ("create", "events.events.k8s.io"),
        ("list", "namespaces"),
        ("create", "customresourcedefinitions.apiextensions.k8s.io"),
        ("get", "leases.coordination.k8s.io"),  # leaderElection is off
        ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
        ("impersonate", "serviceaccounts"),
    ]:
        allowed = _can_i(release, kubectl, verb, resource)
        assert not allowed, f"{release.subject} may {verb} {resource}"

    # And a real request, not just the review: reading Secrets is refused.
    proc = subprocess.run(
        [
            kubectl.binary,
            "--kubeconfig",
            release.sa_kubeconfig,
            "get",
            "secrets",
            "-n",
            release.namespace,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode != 0 and "forbidden" in proc.stderr.lower(), proc.stderr


def test_a_four_phase_job_with_a_failed_node_succeeds_under_the_chart_identity(
    release: Release, kubectl: lib.Kubectl, core: Any, sim_node: Any
) -> None:
    op = release.operator
    assert op is not None and op.alive
    ns = release.jobs_namespace
    name = "least-privilege"
    job = _job(
        name,
        [
            _phase("preprocess", 10),
            _phase("initialize", 10),
            _phase("train", 30),
            _phase("validate", 10),
        ],
    )
    apply(kubectl, ns, job)
    uid = get_job(kubectl, ns, name)["metadata"]["uid"]
    release.jobs[name] = uid

    failed_node = ""
    cordoned_seen = False  # the node as the operator left it (checked while the job runs:
    # other tests on the cluster give back every quarantined node when they finish)
    deadline = time.monotonic() + 420
    st: dict[str, Any] = {}
    while time.monotonic() < deadline:
        st = status(kubectl, ns, name)
        if not failed_node and st.get("phase") == "train" and st.get("state") == "Running":
            active = sorted(n for n, r in nodes_of(core, uid).items() if r == "active")
            if active:
                failed_node = sim_node(active[0])
                lib.make_node_not_ready(core, failed_node, wait=None)
        if failed_node and not cordoned_seen:
            node = core.read_node(failed_node)
            cordoned_seen = (
                node.spec.unschedulable is True
                and (node.metadata.labels or {}).get("phased.dev/role") == "quarantined"
            )
        if st.get("state") in ("Succeeded", "Failed"):
            break
        time.sleep(1)
    assert st.get("state") == "Succeeded", f"{dump(st)}\n{op.tail(60)}"
    assert not _forbidden_lines(op), "\n".join(_forbidden_lines(op)[:20])

    assert [p["name"] for p in st["phases"]] == ["preprocess", "initialize", "train", "validate"]
    assert [p["state"] for p in st["phases"]] == ["Succeeded"] * 4
    assert all(p["maxNodesSeen"] == 2 for p in st["phases"]), st["phases"]
    assert failed_node, "the train phase was never seen Running"
    ledger = [f for f in st["failures"] if f["node"] == failed_node]
    assert len(ledger) == 1, st["failures"]
    entry = ledger[0]
    assert entry["reason"] == "NodeNotReady"
    for key in ("detected", "cordoned", "replaced", "resumed"):
        assert entry.get(key), f"ledger entry lacks {key}: {entry}"
    assert entry["detected"] <= entry["cordoned"] <= entry["replaced"] <= entry["resumed"]
    assert entry.get("replacedBy") and entry["replacedBy"] != failed_node
    assert cordoned_seen, f"{failed_node} was never seen cordoned and quarantined"

    # Priced with the chart's settings: H100 at the default 2.5 per GPU-hour, in USD.
    acc = st["accounting"]
    assert acc["currency"] == "USD"
    assert acc["cost"] == pytest.approx(OLD_PRICE * acc["gpuHours"], rel=1e-6), acc

    lib.wait_until(lambda: set(nodes_of(core, uid)) <= {failed_node}, 60, message="nodes released")
    _release_nodes(release, core, uid)


def test_helm_upgrade_with_a_new_price_reaches_the_operator(
    release: Release, kubectl: lib.Kubectl, core: Any
) -> None:
    before_checksum = _checksum(release, kubectl)
    before = yaml.safe_load(_rendered_settings(release, kubectl))
    assert before["gpuTypes"]["H100"]["pricePerGpuHour"] == OLD_PRICE

    release.run_helm(
        "upgrade",
        release.name,
        str(CHART),
        "--reuse-values",
        # --set-json: plain --set turns 7.5 into a string, which the schema refuses.
        "--set-json",
        f"settings.gpuTypes.H100.pricePerGpuHour={NEW_PRICE}",
        "--set",
        f"settings.currency={NEW_CURRENCY}",
    )
    after = yaml.safe_load(_rendered_settings(release, kubectl))
    assert after["gpuTypes"]["H100"]["pricePerGpuHour"] == NEW_PRICE
    assert after["currency"] == NEW_CURRENCY
    assert after["resyncInterval"] == "10s"  # --reuse-values kept the install's values
    assert _checksum(release, kubectl) != before_checksum, "the pod template did not change"
    kubectl(
        "rollout", "status", f"deployment/{release.name}", "-n", release.namespace, "--timeout=120s"
    )

    # The chart's pod would now restart on the new settings; the operator here does the same.
    assert release.operator is not None
    release.operator.stop()
    release.operator = _start_operator(release, kubectl)
    ns, name = release.jobs_namespace, "repriced"
    apply(kubectl, ns, _job(name, [_phase("train", 20)]))
    release.jobs[name] = get_job(kubectl, ns, name)["metadata"]["uid"]
    st = wait_state(kubectl, ns, name, {"Succeeded", "Failed"}, 180, release.operator)
    assert st["state"] == "Succeeded", dump(st)
    acc = st["accounting"]
    assert acc["gpuHours"] > 0
    # Alone, this operator prices every GPU-hour at the new price. Operators of other test
    # modules running at the same time act on this job too, with the old H100 price (2.5):
    # then the figure is a mix. Only the new settings can price above the old price.
    price = acc["cost"] / acc["gpuHours"]
    assert OLD_PRICE + 0.1 < price <= NEW_PRICE * (1 + 1e-6), acc
    assert not _forbidden_lines(release.operator), "\n".join(_forbidden_lines(release.operator))


def test_helm_uninstall_leaves_the_crd_and_no_claimed_node(
    release: Release, kubectl: lib.Kubectl, core: Any
) -> None:
    # As docs/install.md says: delete the jobs while the operator runs, then uninstall.
    ns = release.jobs_namespace
    kubectl("delete", "trainingjobs", "--all", "-n", ns, "--timeout=90s")
    assert release.operator is not None
    release.operator.stop()
    for uid in release.jobs.values():
        _release_nodes(release, core, uid)

    release.run_helm("uninstall", release.name, "--wait")
    release.uninstalled = True

    kubectl("get", "crd", CRD_NAME)  # still there
    for kind in ("clusterrole", "clusterrolebinding"):
        gone = kubectl.run("get", kind, release.name, check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr, (kind, gone.stdout)
    for kind in ("deployment", "serviceaccount", "configmap"):
        name = release.name if kind != "configmap" else f"{release.name}-settings"
        gone = kubectl.run("get", kind, name, "-n", release.namespace, check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr, (kind, gone.stdout)
    assert release.jobs
    for name, uid in release.jobs.items():
        held = core.list_node(label_selector=f"{JOB_UID}={uid}").items
        assert not held, f"{name} still holds {[n.metadata.name for n in held]}"

    # The identity went with the release: its token no longer opens anything.
    proc = subprocess.run(
        [kubectl.binary, "--kubeconfig", release.sa_kubeconfig, "get", "nodes"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode != 0, proc.stdout
