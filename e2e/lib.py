"""Helpers for end-to-end tests on the local test cluster (or a kind cluster).

Everything here works with a plain ``CoreV1Api`` (or the cached kubectl), so tests, the
demo and benchmarks can share it. The simulated reality is driven through annotations the
cluster's kwok stages understand (see ``e2e/README.md``):

    pods:  sim.phased.dev/succeed-after, sim.phased.dev/fail-after   ("30s", "2m", ...)
    nodes: sim.phased.dev/not-ready ("true"), sim.phased.dev/gpu-fault (a condition type),
           sim.phased.dev/silent ("true", with the node's Lease taken from kwok: silence_node)

On kind (real kubelets) the annotations do nothing; the node helpers that patch status
still work but the kubelet overwrites them on its next status update.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
E2E = REPO / "e2e"
VERSIONS_SH = E2E / "cluster" / "versions.sh"

MARKER_NAMESPACE = "kube-system"
MARKER_NAME = "phased-test-cluster"

SUCCEED_AFTER = "sim.phased.dev/succeed-after"
FAIL_AFTER = "sim.phased.dev/fail-after"
NOT_READY = "sim.phased.dev/not-ready"
GPU_FAULT = "sim.phased.dev/gpu-fault"
SILENT = "sim.phased.dev/silent"
# The holder a silent node's Lease is given: kwok renews only leases it holds (or that expired).
SILENT_HOLDER = "sim.phased.dev/silent"
NODE_LEASE_NAMESPACE = "kube-node-lease"
GPU_FAULT_REASON = "XidError"

NVIDIA_GPU = "nvidia.com/gpu"
ASCEND_NPU = "huawei.com/Ascend910"

T = TypeVar("T")


# --- where things are ----------------------------------------------------------------------


@functools.cache
def cluster_settings() -> dict[str, str]:
    """The variables of ``e2e/cluster/versions.sh`` (paths, versions, ports), as bash sees them."""
    out = subprocess.run(
        ["bash", "-c", f'set -a; source "{VERSIONS_SH}"; env -0'],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pairs = (item.split("=", 1) for item in out.split("\0") if "=" in item)
    return {k: v for k, v in pairs if k.startswith(("PHASED_", "KUBERNETES_", "ETCD_", "KWOK_"))}


def kubeconfig_path() -> str:
    """PHASED_KUBECONFIG, else KUBECONFIG, else the path versions.sh gives."""
    for var in ("PHASED_KUBECONFIG", "KUBECONFIG"):
        value = os.environ.get(var, "")
        if value:
            return value.split(os.pathsep)[0]
    return cluster_settings()["PHASED_KUBECONFIG"]


def kubectl_binary() -> str:
    """The kubectl build.sh cached, else the one on PATH (for kind)."""
    cached = Path(cluster_settings()["PHASED_BIN_K8S"]) / "kubectl"
    return str(cached) if cached.is_file() else "kubectl"


# --- clients ---------------------------------------------------------------------------------


def api_client(kubeconfig: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` for ``kubeconfig`` (default: :func:`kubeconfig_path`)."""
    from kubernetes import config

    return config.new_client_from_config(config_file=kubeconfig or kubeconfig_path())


def core_v1(kubeconfig: str | None = None) -> Any:
    from kubernetes import client

    return client.CoreV1Api(api_client(kubeconfig))


class KubectlError(RuntimeError):
    pass


class Kubectl:
    """``kubectl(*args)`` with the test kubeconfig; returns stdout, raises KubectlError."""

    def __init__(self, kubeconfig: str | None = None, binary: str | None = None) -> None:
        self.kubeconfig = kubeconfig or kubeconfig_path()
        self.binary = binary or kubectl_binary()

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self.binary, "--kubeconfig", self.kubeconfig, *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise KubectlError(
                f"kubectl {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}"
            )
        return proc

    def __call__(self, *args: str, input: str | None = None, timeout: float = 60) -> str:
        return self.run(*args, input=input, timeout=timeout).stdout


# --- the safety marker -----------------------------------------------------------------------


class NotATestCluster(RuntimeError):
    """The kubeconfig does not point at a cluster made by e2e/cluster/up.sh or e2e/kind/up.sh."""


def check_test_cluster(core: Any) -> dict[str, str]:
    """Return the marker ConfigMap's data, or raise NotATestCluster saying why not."""
    from kubernetes.client.exceptions import ApiException

    try:
        cm = core.read_namespaced_config_map(MARKER_NAME, MARKER_NAMESPACE, _request_timeout=10)
    except ApiException as exc:
        if exc.status == 404:
            raise NotATestCluster(
                f"the cluster has no ConfigMap {MARKER_NAMESPACE}/{MARKER_NAME}: it was not "
                "started by e2e/cluster/up.sh (or e2e/kind/up.sh), so it is not a test cluster"
            ) from None
        raise NotATestCluster(
            f"cannot read the marker ConfigMap: {exc.status} {exc.reason}"
        ) from None
    except Exception as exc:  # connection refused, bad kubeconfig, ...
        raise NotATestCluster(f"cannot reach the cluster: {exc}") from None
    return dict(cm.data or {})


# --- waiting ---------------------------------------------------------------------------------


class WaitTimeout(AssertionError):
    pass


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float = 60,
    interval: float = 0.5,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Call ``predicate`` until it returns something truthy; return that. Raise WaitTimeout
    (an AssertionError, so pytest shows it as a failure) after ``timeout`` seconds. Exceptions
    from ``predicate`` propagate. ``message`` may be a callable for a description of the
    state at the time of the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {text}")
        time.sleep(interval)


# --- nodes -----------------------------------------------------------------------------------


def node_condition(core: Any, node: str, type_: str) -> Any | None:
    """The node's condition of ``type_`` (a V1NodeCondition) or None."""
    for c in core.read_node_status(node).status.conditions or []:
        if c.type == type_:
            return c
    return None


def node_ready(core: Any, node: str) -> str | None:
    """The status of the Ready condition: "True", "False", "Unknown" or None."""
    c = node_condition(core, node, "Ready")
    return c.status if c else None


def node_taint_keys(core: Any, node: str) -> set[str]:
    return {t.key for t in core.read_node(node).spec.taints or []}


def _annotate(core: Any, node: str, annotations: Mapping[str, str | None]) -> None:
    core.patch_node(node, {"metadata": {"annotations": dict(annotations)}})


def make_node_not_ready(core: Any, node: str, wait: float | None = 30) -> None:
    """The node reports Ready=False (kwok stops its heartbeat) until :func:`make_node_ready`.
    The node lifecycle controller then taints it ``node.kubernetes.io/not-ready``."""
    _annotate(core, node, {NOT_READY: "true"})
    if wait:
        wait_until(lambda: node_ready(core, node) == "False", wait, message=f"{node} NotReady")


def make_node_ready(core: Any, node: str, wait: float | None = 30) -> None:
    _annotate(core, node, {NOT_READY: None})
    if wait:
        wait_until(lambda: node_ready(core, node) == "True", wait, message=f"{node} Ready")


def _coordination(core: Any) -> Any:
    from kubernetes import client

    return client.CoordinationV1Api(core.api_client)


def _silenced_events(core: Any, node: str) -> int:
    """How many times kwok reported the node silenced (its NodeSilenced event's count)."""
    events = core.list_namespaced_event(
        "default",
        field_selector=f"involvedObject.kind=Node,involvedObject.name={node},reason=NodeSilenced",
    ).items
    return sum(e.count or 1 for e in events)


def _pods_on(core: Any, node: str) -> list[Any]:
    return list(core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items)


def silence_node(core: Any, node: str, wait: float | None = 30) -> None:
    """The node goes silent, as when its kubelet dies or the network cuts it off: no more
    status, no more Lease renewals. kwok first drops whatever it had queued for the node
    (stage ``phased-node-silent``, on the annotation), then the node's Lease is given to
    another holder without a renewal, so kwok stops renewing it. The pods bound to the node
    get the annotation too, so that kwok no longer plays them (a pod being deleted stays
    Terminating); a pod bound to it later still is. The node
    lifecycle controller marks it Ready=Unknown ``--node-monitor-grace-period`` after the
    last renewal and taints it ``node.kubernetes.io/unreachable``. Undo with
    :func:`unsilence_node`. ``wait``: seconds to wait for kwok to see the annotation before
    the Lease is taken (it proceeds anyway after that)."""
    from kubernetes.client.exceptions import ApiException

    # The kubelet is gone: its pods are frozen as they are (kwok would go on playing them).
    for pod in _pods_on(core, node):
        with contextlib.suppress(ApiException):
            core.patch_namespaced_pod(
                pod.metadata.name,
                pod.metadata.namespace,
                {"metadata": {"annotations": {SILENT: "true"}}},
            )
    before = _silenced_events(core, node)
    _annotate(core, node, {SILENT: "true"})
    if wait:
        with contextlib.suppress(WaitTimeout):
            wait_until(
                lambda: _silenced_events(core, node) > before,
                wait,
                interval=0.1,
                message=f"kwok to see {node} silenced",
            )
    # Same renewTime: the node lifecycle controller sees no renewal. A day's duration: kwok
    # sees someone else holding it and leaves it alone.
    _coordination(core).patch_namespaced_lease(
        node,
        NODE_LEASE_NAMESPACE,
        {"spec": {"holderIdentity": SILENT_HOLDER, "leaseDurationSeconds": 86400}},
    )


def unsilence_node(core: Any, node: str, wait: float | None = 60) -> None:
    """Undo :func:`silence_node`: the Lease goes (kwok makes a new one within its renewal
    interval, ~10 s, and manages the node again), then the annotations of the node and its
    pods; the node is Ready."""
    from kubernetes.client.exceptions import ApiException

    leases = _coordination(core)
    try:
        lease = leases.read_namespaced_lease(node, NODE_LEASE_NAMESPACE)
    except ApiException as exc:
        if exc.status != 404:
            raise
        lease = None
    if lease is not None and lease.spec.holder_identity == SILENT_HOLDER:
        with contextlib.suppress(ApiException):
            leases.delete_namespaced_lease(node, NODE_LEASE_NAMESPACE)

    def held_by_kwok() -> bool:
        try:
            got = leases.read_namespaced_lease(node, NODE_LEASE_NAMESPACE)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return got.spec.holder_identity not in (None, SILENT_HOLDER)

    # kwok plays the node again only once it holds the Lease: remove the annotation after.
    wait_until(held_by_kwok, max(wait or 0, 30), message=f"kwok holding {node}'s Lease again")
    _annotate(core, node, {SILENT: None})
    for pod in _pods_on(core, node):
        if (pod.metadata.annotations or {}).get(SILENT):
            with contextlib.suppress(ApiException):
                core.patch_namespaced_pod(
                    pod.metadata.name,
                    pod.metadata.namespace,
                    {"metadata": {"annotations": {SILENT: None}}},
                )
    if wait:
        wait_until(lambda: node_ready(core, node) == "True", wait, message=f"{node} Ready")


def is_silent(core: Any, node: str) -> bool:
    return (core.read_node(node).metadata.annotations or {}).get(SILENT) == "true"


def set_gpu_fault(
    core: Any, node: str, condition: str = "GPUXidError", wait: float | None = 30
) -> None:
    """Give the node condition ``condition``=True (reason XidError); the node stays Ready."""
    _annotate(core, node, {GPU_FAULT: condition})
    if wait:

        def done() -> bool:
            c = node_condition(core, node, condition)
            return bool(c and c.status == "True" and c.reason == GPU_FAULT_REASON)

        wait_until(done, wait, message=f"condition {condition}=True on {node}")


def clear_gpu_fault(core: Any, node: str, wait: float | None = 30) -> None:
    """Remove the simulated GPU-fault condition(s) of the node."""
    _annotate(core, node, {GPU_FAULT: None})
    if wait:

        def done() -> bool:
            conds = core.read_node_status(node).status.conditions or []
            return not any(c.reason == GPU_FAULT_REASON for c in conds)

        wait_until(done, wait, message=f"GPU-fault condition gone from {node}")


def set_allocatable(core: Any, node: str, resources: Mapping[str, str | int]) -> None:
    """Patch the node's status.allocatable (as a device plugin would on a lost GPU)."""
    body = {"status": {"allocatable": {k: str(v) for k, v in resources.items()}}}
    core.patch_node_status(node, body)


def drop_allocatable_gpus(core: Any, node: str, count: int, resource: str = NVIDIA_GPU) -> None:
    """Make the node advertise ``count`` allocatable GPUs (capacity is unchanged)."""
    set_allocatable(core, node, {resource: count})


def restore_allocatable(core: Any, node: str) -> None:
    """Set allocatable back to capacity for every resource."""
    cap = core.read_node_status(node).status.capacity or {}
    set_allocatable(core, node, dict(cap))


def allocatable(core: Any, node: str, resource: str = NVIDIA_GPU) -> int:
    return int((core.read_node_status(node).status.allocatable or {}).get(resource, "0"))


def reset_node(core: Any, node: str, wait: float | None = 60) -> None:
    """Undo every simulation on a node: Ready, not silent, no GPU fault, allocatable =
    capacity."""
    if is_silent(core, node):
        unsilence_node(core, node, wait=None)
    _annotate(core, node, {NOT_READY: None, GPU_FAULT: None})
    restore_allocatable(core, node)
    if wait:
        wait_until(
            lambda: (
                node_ready(core, node) == "True"
                and not any(
                    c.reason == GPU_FAULT_REASON
                    for c in core.read_node_status(node).status.conditions or []
                )
            ),
            wait,
            message=f"{node} back to Ready without faults",
        )


def nodes(core: Any, label_selector: str = "") -> list[Any]:
    return list(core.list_node(label_selector=label_selector).items)


def gpu_nodes(
    core: Any, product: str | None = None, resource: str = NVIDIA_GPU, real: bool = False
) -> list[Any]:
    """Nodes with ``resource`` capacity, optionally of one ``nvidia.com/gpu.product``: the
    simulated ones the suite's operator manages (its ``nodeSelector`` is ``type!=real``), or
    with ``real`` the real nodes."""
    selectors = [f"nvidia.com/gpu.product={product}"] if product else []
    selectors.append(REAL_NODE_LABEL if real else REAL_NODE_LABEL.replace("=", "!="))
    return [
        n
        for n in nodes(core, ",".join(selectors))
        if int((n.status.capacity or {}).get(resource, "0")) > 0
    ]


def wait_for_taint(core: Any, node: str, keys: Iterable[str], timeout: float = 60) -> str:
    """Wait until the node has one of the taint ``keys``; return the one found."""
    wanted = set(keys)
    return wait_until(
        lambda: next(iter(node_taint_keys(core, node) & wanted), None),
        timeout,
        message=lambda: (
            f"one of taints {sorted(wanted)} on {node} (has {sorted(node_taint_keys(core, node))})"
        ),
    )


def wait_for_no_taint(core: Any, node: str, keys: Iterable[str], timeout: float = 60) -> None:
    wanted = set(keys)
    wait_until(
        lambda: not (node_taint_keys(core, node) & wanted),
        timeout,
        message=lambda: (
            f"taints {sorted(wanted)} gone from {node} (has {sorted(node_taint_keys(core, node))})"
        ),
    )


# --- namespaces and pods --------------------------------------------------------------------


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create_namespace(
    core: Any, prefix: str = "e2e", labels: Mapping[str, str] | None = None
) -> str:
    name = unique_name(prefix)
    body = {"metadata": {"name": name, "labels": {"phased.dev/e2e": "true", **(labels or {})}}}
    core.create_namespace(body)
    return name


def delete_namespace(core: Any, name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def sim_pod(
    name: str,
    *,
    gpus: int = 0,
    resource: str = NVIDIA_GPU,
    succeed_after: str | None = None,
    fail_after: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    node_name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    image: str = "registry.k8s.io/pause:3.10",
    command: list[str] | None = None,
    restart_policy: str = "Never",
) -> dict[str, Any]:
    """A pod manifest. On the local cluster ``succeed_after``/``fail_after`` (Go durations)
    end it with exit code 0/1 that long after it started running. On kind, pass a real
    ``image``/``command`` instead."""
    ann = dict(annotations or {})
    if succeed_after:
        ann[SUCCEED_AFTER] = succeed_after
    if fail_after:
        ann[FAIL_AFTER] = fail_after
    container: dict[str, Any] = {"name": "main", "image": image}
    if command:
        container["command"] = command
    if gpus:
        container["resources"] = {
            "limits": {resource: str(gpus)},
            "requests": {resource: str(gpus)},
        }
    spec: dict[str, Any] = {
        "restartPolicy": restart_policy,
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": ann},
        "spec": spec,
    }


def pod_phase(core: Any, namespace: str, name: str) -> str | None:
    from kubernetes.client.exceptions import ApiException

    try:
        return core.read_namespaced_pod_status(name, namespace).status.phase
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def wait_pod_phase(
    core: Any, namespace: str, name: str, phases: str | Iterable[str], timeout: float = 60
) -> Any:
    """Wait until the pod is in one of ``phases``; return the V1Pod."""
    wanted = {phases} if isinstance(phases, str) else set(phases)

    def check() -> Any:
        pod = core.read_namespaced_pod(name, namespace)
        return pod if pod.status.phase in wanted else None

    return wait_until(
        check,
        timeout,
        message=lambda: (
            f"pod {namespace}/{name} in {sorted(wanted)} ({pod_story(core, namespace, name)})"
        ),
    )


def pod_story(core: Any, namespace: str, name: str, last: int = 8) -> str:
    """What a pod says of where it is, for a wait that timed out: its phase and node, why
    its containers wait or ended, its conditions that are not True, and its ``last`` events
    (a pod a kubelet never started says why in them: the sandbox, the image, admission)."""
    from kubernetes.client.exceptions import ApiException

    try:
        pod = core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        return "gone" if exc.status == 404 else f"unreadable: {exc.status} {exc.reason}"
    parts = [f"is {pod.status.phase} on {pod.spec.node_name or 'no node'}"]
    for c in pod.status.container_statuses or []:
        state = c.state.waiting or c.state.terminated
        if state is not None:
            parts.append(f"container {c.name}: {state.reason} {state.message or ''}".rstrip())
    for cond in pod.status.conditions or []:
        if cond.status != "True":
            parts.append(
                f"{cond.type}={cond.status} {cond.reason or ''} {cond.message or ''}".rstrip()
            )
    events = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}"
    ).items
    events.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    for e in events[-last:]:
        parts.append(f"event {e.reason}: {e.message}")
    return "; ".join(parts)


def wait_pod_gone(core: Any, namespace: str, name: str, timeout: float = 60) -> None:
    wait_until(
        lambda: pod_phase(core, namespace, name) is None,
        timeout,
        message=f"pod {namespace}/{name} to be deleted",
    )


def container_exit_code(pod: Any, container: str | None = None) -> int | None:
    for cs in pod.status.container_statuses or []:
        if container and cs.name != container:
            continue
        if cs.state and cs.state.terminated:
            return int(cs.state.terminated.exit_code)
    return None


# --- real nodes (kubelet + containerd + runc beside the kwok nodes) ---------------------------
#
# ``make cluster`` starts PHASED_REAL_NODES (3) real nodes, labelled ``type=real`` and tainted
# ``e2e.phased.dev/real-node=true:NoSchedule`` (see e2e/cluster/nodes-up.sh). Their failures
# are injected as a user meets them: the kubelet stopped or frozen, the node's containers
# killed, the node's network cut. Everything here acts on this cluster's own processes only,
# found through the pid files and cgroups under PHASED_NODES_DIR.

REAL_NODE_LABEL = "type=real"
REAL_NODE_TAINT = "e2e.phased.dev/real-node"
NODES_ENV_SH = E2E / "cluster" / "nodes-env.sh"


@functools.cache
def real_node_settings() -> dict[str, str]:
    """The variables of versions.sh and nodes-env.sh (real-node paths, images, addresses)."""
    out = subprocess.run(
        ["bash", "-c", f'set -a; source "{VERSIONS_SH}"; source "{NODES_ENV_SH}"; env -0'],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    pairs = (item.split("=", 1) for item in out.split("\0") if "=" in item)
    return {k: v for k, v in pairs if k.startswith(("PHASED_", "CONTAINERD_", "COREDNS_"))}


def real_nodes(core: Any) -> list[str]:
    """Names of the cluster's real nodes (sorted)."""
    return sorted(n.metadata.name for n in nodes(core, REAL_NODE_LABEL))


def _node_dir(node: str) -> Path:
    return Path(real_node_settings()["PHASED_NODES_DIR"]) / node


def _pid(kind: str, node: str) -> int | None:
    """The pid of the node's ``kind`` process (kubelet, containerd, apiproxy) if it runs."""
    path = Path(real_node_settings()["PHASED_NODES_DIR"]) / "pids" / f"{kind}-{node}.pid"
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def kubelet_pid(node: str) -> int | None:
    return _pid("kubelet", node)


def _signal(kind: str, node: str, sig: int) -> int:
    pid = _pid(kind, node)
    if pid is None:
        raise RuntimeError(f"no {kind} of {node} runs (pid file under {_node_dir(node).parent})")
    os.kill(pid, sig)
    return pid


def stop_kubelet(node: str) -> None:
    """Stop the node's kubelet at once (SIGKILL): its containers keep running, nothing tells
    the API server; the node turns NotReady only when the node monitor grace has passed."""
    import signal

    pid = _signal("kubelet", node, signal.SIGKILL)
    wait_until(lambda: not _running(pid), 30, message=f"kubelet {pid} gone")


def _running(pid: int) -> bool:
    """The process runs: it exists and is not a zombie. A kubelet that :func:`start_kubelet`
    started is this process's child, so once killed it is reaped here (else its /proc entry
    stays until this process exits)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def start_kubelet(core: Any, node: str, timeout: float = 120) -> None:
    """Start the node's kubelet again (the same command line), wait until it is Ready, and
    advertise its GPUs again (a kubelet that registers again zeroes extended resources no
    device plugin reports, as after a reboot)."""
    if kubelet_pid(node) is None:
        subprocess.Popen(
            ["bash", str(_node_dir(node) / "start-kubelet.sh")],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    wait_until(lambda: node_ready(core, node) == "True", timeout, message=f"{node} Ready again")
    advertise_gpus(core, node)


def advertise_gpus(core: Any, node: str) -> None:
    """Patch the real node's status with the accelerators of its kind (``nodes.py``), as
    ``nodes-up.sh`` does: the documented way to advertise an extended resource."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_phased_nodes", E2E / "cluster" / "nodes.py")
    assert spec is not None and spec.loader is not None
    kinds = sys.modules.get(spec.name) or importlib.util.module_from_spec(spec)
    if spec.name not in sys.modules:
        sys.modules[spec.name] = kinds  # its dataclasses look themselves up there
        spec.loader.exec_module(kinds)
    kind = (core.read_node(node).metadata.labels or {}).get("phased.dev/sim-node-kind", "")
    gpus = {k: str(v) for k, v in kinds.KINDS[kind].accelerators.items()} if kind else {}
    if gpus:
        core.patch_node_status(node, {"status": {"capacity": gpus, "allocatable": gpus}})


def freeze_kubelet(node: str) -> None:
    """SIGSTOP the kubelet: a hung kubelet, alive but silent."""
    import signal

    _signal("kubelet", node, signal.SIGSTOP)


def thaw_kubelet(node: str) -> None:
    import signal

    _signal("kubelet", node, signal.SIGCONT)


def _cgroup_pids(node: str) -> set[int]:
    """Processes of the node's pods (its containers and sandboxes), from its cgroup tree."""
    root = Path("/sys/fs/cgroup/pids") / (
        f"phased.{real_node_settings()['PHASED_CLUSTER_NAME']}.{node}"
    )
    out: set[int] = set()
    for procs in root.glob("kubepods*/**/cgroup.procs"):
        try:
            out.update(int(p) for p in procs.read_text().split())
        except OSError:
            continue
    return out


def node_images(node: str, *args: str, check: bool = True) -> str:
    """Run ``ctr images ARGS`` against the real node's containerd (namespace k8s.io, where
    the kubelet's images are): ``tag``, ``rm``, ``ls``, as a registry mirror or a disk that
    lost an image leaves one node without it."""
    settings = real_node_settings()
    ctr = Path(settings["PHASED_BIN_CONTAINERD"]) / "ctr"
    sock = _node_dir(node) / "containerd.sock"
    done = subprocess.run(
        [str(ctr), "--address", str(sock), "-n", "k8s.io", "images", *args],
        check=check,
        capture_output=True,
        text=True,
    )
    return done.stdout


def node_container_pids(node: str) -> set[int]:
    """Pids of every container process (and pod sandbox) on the real node."""
    return _cgroup_pids(node)


def kill_node_containers(node: str) -> int:
    """SIGKILL every process in the node's pods (as an OOM storm or a crashed runtime would);
    the kubelet sees its containers exit. Returns how many processes were killed."""
    import signal

    pids = _cgroup_pids(node)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def _pod_links(node: str) -> list[str]:
    """Host-side veth names of the node's pods: the peers of their sandboxes' eth0, and only
    links enslaved to this cluster's bridge (nothing else on the host is ever touched)."""
    import re

    bridge = real_node_settings()["PHASED_NODES_BRIDGE"]
    listed = subprocess.run(
        ["ip", "-o", "link", "show", "master", bridge], capture_output=True, text=True
    ).stdout
    on_bridge: dict[str, str] = {}
    for line in listed.splitlines():
        index, _, rest = line.partition(": ")
        on_bridge[index.strip()] = rest.split("@")[0].split(":")[0]
    names: list[str] = []
    for ns in (_node_dir(node) / "containerd" / "state").rglob("cni-*"):
        if not ns.is_file():
            continue
        # Read through netlink in the pod's namespace ("3: eth0@if12: ..."): /sys would show
        # the host's own links.
        res = subprocess.run(
            ["nsenter", f"--net={ns}", "ip", "-o", "link", "show", "eth0"],
            capture_output=True,
            text=True,
        )
        peer = re.search(r"eth0@if(\d+):", res.stdout)
        if peer and peer.group(1) in on_bridge:
            names.append(on_bridge[peer.group(1)])
    return names


def cut_node_network(node: str) -> None:
    """Cut the node off: its link to the control plane stops carrying bytes (its relay is
    frozen: connections hang, nothing is reset) and its pods drop off the pod network."""
    import signal

    _signal("apiproxy", node, signal.SIGSTOP)
    for link in _pod_links(node):
        subprocess.run(["ip", "link", "set", link, "down"], check=True)


def heal_node_network(node: str) -> None:
    import signal

    for link in _pod_links(node):
        subprocess.run(["ip", "link", "set", link, "up"], check=True)
    _signal("apiproxy", node, signal.SIGCONT)


def restore_real_node(core: Any, node: str, timeout: float = 120) -> None:
    """Undo any failure injected on the node (thaw, heal, start the kubelet, uncordon) and
    wait until it is Ready."""
    import signal

    for kind in ("kubelet", "apiproxy"):
        pid = _pid(kind, node)
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
    for link in _pod_links(node):
        subprocess.run(["ip", "link", "set", link, "up"], check=False)
    start_kubelet(core, node, timeout)
    core.patch_node(node, {"spec": {"unschedulable": None}})
