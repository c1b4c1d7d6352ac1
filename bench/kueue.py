"""Kueue as a peer system of the recovery benchmark: its controller as a local process against
a bench cluster instance, with topology-aware scheduling (TAS) and failed-node replacement.

Nothing of Kueue is kept in this repository. ``e2e/cluster/build.sh kueue`` builds the
``kueue`` binary from its Go module (``KUEUE_VERSION`` in ``e2e/cluster/versions.sh``) and
records where the module was downloaded; the CRDs and the webhook configurations are read
from that module's ``config/components`` at run time and rewritten for a local process:

- webhooks: served on 127.0.0.1 with a CA and serving certificate made here (openssl), the
  ``clientConfig.service`` of each webhook rewritten to ``clientConfig.url`` with that CA;
  only the webhooks of what runs (Kueue's own kinds and ``batch/v1`` Jobs, the one
  integration on) are installed, so no other kind waits on a path nobody serves;
- the CRDs Kueue's kustomization patches for conversion get the same URL (``/convert``);
- internal certificate management is off. Kueue then reads its metrics certificate from the
  fixed path ``/etc/kueue/metrics/certs``; the process runs in a mount namespace of its own
  (``unshare``) where an overlay adds that folder to ``/etc``, so the host's ``/etc`` is
  never written.

The pure parts (the Configuration document, the webhook and CRD rewrites, the queue objects)
take and return plain dicts; ``KueueProcess`` does the I/O.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from common import E2E

API = "kueue.x-k8s.io/v1beta2"
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
NAME_PREFIX = "kueue-"  # Kueue's config/default kustomization: namePrefix
NAMESPACE = "kueue-system"
HOSTNAME_LABEL = "kubernetes.io/hostname"

# The failed-node replacement ("node hot swap") of TAS, as Kueue v0.17 names its gates. All
# are on by default in v0.17 (beta); they are set explicitly so that the run says what it
# measured, and a version that renamed or dropped one refuses to start (Kueue rejects an
# unknown gate).
FEATURE_GATES: dict[str, bool] = {
    # Placement by topology (Topology, ResourceFlavor.topologyName, the podset annotations).
    "TopologyAwareScheduling": True,
    # A failed node of an admitted workload is marked in status.unhealthyNodes and Kueue's
    # scheduler finds a replacement node for the pods that ran there.
    "TASFailedNodeReplacement": True,
    # When no replacement is found at the first attempt, evict the workload (it is queued
    # again and admitted afresh) instead of retrying the replacement.
    "TASFailedNodeReplacementFailFast": True,
    # A NotReady node counts as failed once the workload's pods on it have terminated, rather
    # than after a fixed 30 s (NodeFailureDelay) of NotReady.
    "TASReplaceNodeOnPodTermination": True,
    # A node with an untolerated NoExecute taint (or NoSchedule with its pods gone) counts as
    # failed too.
    "TASReplaceNodeOnNodeTaints": True,
    # The on-demand visibility API is an aggregated API server of its own: not needed here.
    "VisibilityOnDemand": False,
}
# Kueue's fixed delay before a NotReady node counts as failed when pods still run on it
# (pkg/controller/tas: NodeFailureDelay); not configurable.
NODE_FAILURE_DELAY_S = 30
# The groups whose webhooks the local process serves: Kueue's own kinds and the Job
# integration. Every other webhook in Kueue's manifests belongs to an integration left off.
SERVED_GROUPS = frozenset({"kueue.x-k8s.io", "batch"})


# --- pure: documents -------------------------------------------------------------------------


def configuration(
    *,
    webhook_port: int,
    metrics_port: int,
    health_port: int,
    cert_dir: str,
    feature_gates: Mapping[str, bool] = FEATURE_GATES,
    frameworks: Sequence[str] = ("batch/job",),
) -> dict[str, Any]:
    """Kueue's Configuration for a local process: webhooks, metrics and health on 127.0.0.1
    ports of the bench's own, leader election and internal certificate management off, the
    given integrations and feature gates; everything else as Kueue's own manifest ships it
    (``config/components/manager/controller_manager_config.yaml``)."""
    return {
        "apiVersion": CONFIG_API,
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": cert_dir},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": list(frameworks)},
        "featureGates": dict(feature_gates),
    }


def _groups_of(webhook: Mapping[str, Any]) -> set[str]:
    return {g for rule in webhook.get("rules") or [] for g in rule.get("apiGroups") or []}


def local_webhooks(
    documents: Iterable[Mapping[str, Any]],
    base_url: str,
    ca_bundle: bytes,
    served_groups: Iterable[str] = SERVED_GROUPS,
) -> list[dict[str, Any]]:
    """Kueue's Mutating/ValidatingWebhookConfigurations (``config/components/webhook/
    manifests.yaml``) for a process at ``base_url``: each kept webhook's service reference
    becomes ``url: base_url + path`` with ``caBundle`` (PEM, base64 as the API wants);
    webhooks whose rules name a group outside ``served_groups`` are dropped (nothing would
    answer them, and their failurePolicy is Fail); names get Kueue's ``kueue-`` prefix."""
    served = set(served_groups)
    bundle = base64.b64encode(ca_bundle).decode()
    out: list[dict[str, Any]] = []
    for doc in documents:
        if doc.get("kind") not in (
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ):
            continue
        new = copy.deepcopy(dict(doc))
        new["metadata"] = {"name": NAME_PREFIX + doc["metadata"]["name"]}
        kept = []
        for hook in new.get("webhooks") or []:
            groups = _groups_of(hook)
            if not groups or not groups <= served:
                continue
            path = (hook.get("clientConfig") or {}).get("service", {}).get("path", "")
            if not path.startswith("/"):
                raise ValueError(f"webhook {hook.get('name')} has no service path")
            hook["clientConfig"] = {"url": base_url.rstrip("/") + path, "caBundle": bundle}
            kept.append(hook)
        if kept:
            new["webhooks"] = kept
            out.append(new)
    return out


def conversion_crds(kustomization: Mapping[str, Any], patches: Mapping[str, Any]) -> set[str]:
    """The CRDs Kueue's ``config/components/crd/kustomization.yaml`` patches with a
    conversion webhook: the names in the (uncommented) patch files it lists that set
    ``spec.conversion.strategy: Webhook``. ``patches`` maps a patch path to its document."""
    names: set[str] = set()
    for entry in kustomization.get("patches") or []:
        doc = patches.get(entry.get("path", ""))
        conversion = ((doc or {}).get("spec") or {}).get("conversion") or {}
        if doc and conversion.get("strategy") == "Webhook":
            names.add(doc["metadata"]["name"])
    return names


def local_crds(
    crds: Iterable[Mapping[str, Any]], converted: set[str], base_url: str, ca_bundle: bytes
) -> list[dict[str, Any]]:
    """The CRDs as they are applied: those in ``converted`` call ``base_url/convert``."""
    bundle = base64.b64encode(ca_bundle).decode()
    out = []
    for crd in crds:
        new = copy.deepcopy(dict(crd))
        if new["metadata"]["name"] in converted:
            new["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": base_url.rstrip("/") + "/convert", "caBundle": bundle},
                    "conversionReviewVersions": ["v1"],
                },
            }
        out.append(new)
    return out


def queue_objects(
    *,
    node_labels: Mapping[str, str],
    levels: Sequence[str],
    gpu_quota: int,
    resource: str = "nvidia.com/gpu",
    name: str = "gpu",
) -> list[dict[str, Any]]:
    """The cluster-scoped objects of a TAS queue: a Topology with ``levels`` (the last one
    ``kubernetes.io/hostname``, which failed-node replacement needs), a ResourceFlavor of the
    nodes with ``node_labels`` bound to it, and a ClusterQueue open to every namespace with
    ``gpu_quota`` of ``resource``."""
    if not levels or levels[-1] != HOSTNAME_LABEL:
        raise ValueError(f"the lowest topology level must be {HOSTNAME_LABEL}")
    return [
        {
            "apiVersion": API,
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]},
        },
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {"nodeLabels": dict(node_labels), "topologyName": name},
        },
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [resource],
                        "flavors": [
                            {
                                "name": name,
                                "resources": [{"name": resource, "nominalQuota": str(gpu_quota)}],
                            }
                        ],
                    }
                ],
            },
        },
    ]


def local_queue(namespace: str, cluster_queue: str = "gpu", name: str = "gpu") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def queued(
    job: dict[str, Any],
    queue: str = "gpu",
    preferred: str | None = None,
    required: str | None = None,
) -> dict[str, Any]:
    """``job`` (a batch/v1 Job) sent through the LocalQueue ``queue``, its pods placed by
    topology: ``preferred`` or ``required`` names the level (a node label) to pack them in."""
    if (preferred is None) == (required is None):
        raise ValueError("name exactly one of preferred and required")
    new = copy.deepcopy(job)
    new["metadata"].setdefault("labels", {})[QUEUE_LABEL] = queue
    template = new["spec"]["template"].setdefault("metadata", {})
    annotations = template.setdefault("annotations", {})
    if preferred is not None:
        annotations[PREFERRED_TOPOLOGY] = preferred
    else:
        annotations[REQUIRED_TOPOLOGY] = required
    return new


def workload_outcome(workloads: Iterable[Mapping[str, Any]], job: str) -> str:
    """What Kueue did for the Job ``job``, from its Workload (owned by the Job): the
    evictions its ``status.schedulingStats`` counts (reason, underlying cause), or "no
    eviction"; "no workload" when none is found."""
    for wl in workloads:
        owners = (wl.get("metadata") or {}).get("ownerReferences") or []
        if not any(o.get("kind") == "Job" and o.get("name") == job for o in owners):
            continue
        stats = (wl.get("status") or {}).get("schedulingStats") or {}
        evictions = [
            f"{e.get('reason', '?')}"
            + (f"/{e['underlyingCause']}" if e.get("underlyingCause") else "")
            + (f" x{e['count']}" if int(e.get("count") or 1) > 1 else "")
            for e in stats.get("evictions") or []
        ]
        return "evicted: " + ", ".join(evictions) if evictions else "no eviction"
    return "no workload"


# --- I/O: the module, certificates, the process ----------------------------------------------


def bin_dir() -> Path:
    """Where ``build.sh kueue`` puts the binary (``PHASED_BIN_KUEUE`` of versions.sh)."""
    out = subprocess.run(
        ["bash", "-c", f'source "{E2E / "cluster" / "versions.sh"}"; echo "$PHASED_BIN_KUEUE"'],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def ensure_built() -> Path:
    """Build Kueue if it is not cached (one build at a time, as up.sh builds); its folder."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "phased"
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["flock", str(cache / "build.lock"), "bash", str(E2E / "cluster" / "build.sh"), "kueue"],
        check=True,
    )
    return bin_dir()


def module_dir(bins: Path) -> Path:
    return Path((bins / "module-dir").read_text().strip())


def read_yaml_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def make_certificates(folder: Path, host: str = "127.0.0.1") -> tuple[Path, bytes]:
    """A CA and a serving certificate for ``host`` (an IP SAN), made with openssl: writes
    ``tls.crt``/``tls.key`` into ``folder``; returns the folder and the CA's PEM."""
    folder.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "7",
        "-subj",
        "/CN=phased-bench-kueue-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        f"/CN={host}",
        "-keyout",
        "tls.key",
        "-out",
        "tls.csr",
    )
    (folder / "san.ext").write_text(
        f"subjectAltName=IP:{host}\nextendedKeyUsage=serverAuth\n"
        "keyUsage=digitalSignature,keyEncipherment\n"
    )
    run(
        "x509",
        "-req",
        "-in",
        "tls.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "7",
        "-extfile",
        "san.ext",
        "-out",
        "tls.crt",
    )
    return folder, (folder / "ca.crt").read_bytes()


def unshare_prefix(etc_overlay: Path) -> list[str]:
    """The command prefix that runs a program in a mount namespace of its own where an
    overlay puts ``etc_overlay``'s files over ``/etc`` (root: a mount namespace; otherwise
    a user namespace too, where the user is root)."""
    upper, work = etc_overlay / "upper", etc_overlay / "work"
    work.mkdir(parents=True, exist_ok=True)
    mount = (
        f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={work} /etc"
        ' && exec "$0" "$@"'
    )
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--mount", "--propagation", "private", "sh", "-c", mount]


class KueueProcess:
    """Kueue's controller as a local process against the cluster of ``kubeconfig``: installs
    its CRDs, starts it (the pid is recorded in ``folder/kueue.pid``; ``stop`` signals that
    pid only), waits for its readiness and its webhooks, installs the webhook
    configurations."""

    def __init__(self, kubeconfig: str, folder: Path, ports: tuple[int, int, int]) -> None:
        self.kubeconfig = kubeconfig
        self.folder = folder
        self.webhook_port, self.metrics_port, self.health_port = ports
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = folder / "kueue.log"
        self.webhook_names: list[tuple[str, str]] = []
        self._custom: Any = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def base_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    def _api(self) -> Any:
        from kubernetes import config

        # kubernetes.config is unannotated (phased/kube/inspect.py makes the same call).
        return config.new_client_from_config(config_file=self.kubeconfig)  # type: ignore[no-untyped-call]

    def _apply(self, docs: Sequence[Mapping[str, Any]]) -> None:
        """Server-side apply through kubectl (the Workload CRD is too large for the
        annotation client-side apply keeps)."""
        kubectl = self._kubectl()
        out = subprocess.run(
            [
                kubectl,
                "--kubeconfig",
                self.kubeconfig,
                "apply",
                "--server-side",
                "--force-conflicts",
                "--field-manager=phased-bench",
                "-f",
                "-",
            ],
            input="\n---\n".join(json.dumps(d) for d in docs).encode(),
            capture_output=True,
        )
        if out.returncode != 0:
            raise RuntimeError(f"kubectl apply failed: {out.stderr.decode(errors='replace')}")

    @staticmethod
    def _kubectl() -> str:
        out = subprocess.run(
            ["bash", "-c", f'source "{E2E / "cluster" / "versions.sh"}"; echo "$PHASED_BIN_K8S"'],
            capture_output=True,
            text=True,
            check=True,
        )
        return str(Path(out.stdout.strip()) / "kubectl")

    def start(self, timeout: float = 120) -> KueueProcess:
        bins = ensure_built()
        module = module_dir(bins)
        components = module / "config" / "components"
        self.folder.mkdir(parents=True, exist_ok=True)
        for port in (self.webhook_port, self.metrics_port, self.health_port):
            if port_busy(port):
                raise RuntimeError(f"port {port} for Kueue is in use; choose another port base")
        certs, ca = make_certificates(self.folder / "certs")
        # The metrics certificate at Kueue's fixed path, in the process's own view of /etc.
        overlay = self.folder / "etc"
        metrics = overlay / "upper" / "kueue" / "metrics" / "certs"
        metrics.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            (metrics / name).write_bytes((certs / name).read_bytes())

        crd_dir = components / "crd"
        kustomization = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
        patches = {
            p["path"]: yaml.safe_load((crd_dir / p["path"]).read_text())
            for p in kustomization.get("patches") or []
            if (crd_dir / p.get("path", "")).is_file()
        }
        crds = [d for f in sorted((crd_dir / "bases").glob("*.yaml")) for d in read_yaml_all(f)]
        self._apply(local_crds(crds, conversion_crds(kustomization, patches), self.base_url, ca))
        self._apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        self._wait_established([c["metadata"]["name"] for c in crds], timeout)

        config_path = self.folder / "config.yaml"
        config_path.write_text(
            yaml.safe_dump(
                configuration(
                    webhook_port=self.webhook_port,
                    metrics_port=self.metrics_port,
                    health_port=self.health_port,
                    cert_dir=str(certs),
                )
            )
        )
        env = {**os.environ, "KUBECONFIG": self.kubeconfig}
        env.pop("POD_NAMESPACE", None)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                *unshare_prefix(overlay),
                str(bins / "kueue"),
                f"--config={config_path}",
                "--zap-log-level=2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        (self.folder / "kueue.pid").write_text(str(self.proc.pid))
        try:
            self._wait_ready(ca, timeout)
            hooks = local_webhooks(
                read_yaml_all(components / "webhook" / "manifests.yaml"), self.base_url, ca
            )
            self._apply(hooks)
            self.webhook_names = [(h["kind"], h["metadata"]["name"]) for h in hooks]
        except Exception:
            self.stop()
            raise
        return self

    def _wait_established(self, names: Sequence[str], timeout: float) -> None:
        from kubernetes import client

        ext = client.ApiextensionsV1Api(self._api())
        deadline = time.monotonic() + timeout
        for name in names:
            while True:
                crd = ext.read_custom_resource_definition(name)
                status = crd.status
                conds = {c.type: c.status for c in (status.conditions if status else None) or []}
                if conds.get("Established") == "True":
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CRD {name} not Established within {timeout:.0f} s")
                time.sleep(0.5)

    def _wait_ready(self, ca: bytes, timeout: float) -> None:
        """Kueue's readiness probe (its caches and webhook server), then a TLS handshake with
        the webhook server checked against the CA the API server is given."""
        deadline = time.monotonic() + timeout
        context = ssl.create_default_context(cadata=ca.decode())
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"Kueue exited ({self.proc.returncode}):\n{tail}")
            try:
                url = f"http://127.0.0.1:{self.health_port}/readyz"
                with urllib.request.urlopen(url, timeout=2) as ready:
                    if ready.status == 200:
                        with (
                            socket.create_connection(("127.0.0.1", self.webhook_port), 2) as raw,
                            context.wrap_socket(raw, server_hostname="127.0.0.1"),
                        ):
                            return
            except OSError:  # not listening yet, 500 from readyz, or no handshake yet
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kueue not ready within {timeout:.0f} s ({self.log_path})")
            time.sleep(0.5)

    def stop(self) -> None:
        """Remove the webhook configurations (a Job created later must not wait on a dead
        webhook), then stop the recorded pid: SIGTERM, SIGKILL after 15 s."""
        if self.webhook_names:
            from kubernetes import client

            admission = client.AdmissionregistrationV1Api(self._api())
            for kind, name in self.webhook_names:
                try:
                    if kind == "MutatingWebhookConfiguration":
                        admission.delete_mutating_webhook_configuration(name)
                    else:
                        admission.delete_validating_webhook_configuration(name)
                except Exception as exc:
                    print(f"  (could not delete {kind} {name}: {exc})", file=sys.stderr)
            self.webhook_names = []
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
        (self.folder / "kueue.pid").unlink(missing_ok=True)

    def install(self, objects: Sequence[Mapping[str, Any]]) -> None:
        self._apply(objects)

    def outcome(self, namespace: str, job: str) -> str:
        """What Kueue did for ``job`` so far (``workload_outcome``)."""
        from kubernetes import client

        if self._custom is None:
            self._custom = client.CustomObjectsApi(self._api())
        listed = self._custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", namespace, "workloads"
        )
        return workload_outcome(listed.get("items") or [], job)


def port_busy(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
