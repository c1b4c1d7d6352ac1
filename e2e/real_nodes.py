"""Fixtures and readers shared by the tests (and the demo) on the real nodes (kubelet,
containerd, runc): the nodes themselves (skipped without them, failed without them under CI),
an operator that watches only them, the JSON lines their workers print, a generation's
running workers, and the JAX example (examples/jax-data-parallel) as the local cluster runs
it: its program from a ConfigMap, its checkpoint volume a host directory every node mounts."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import lib
from e2e.harness import REPO, TEST_SETTINGS, Operator
from e2e.operator_fixtures import LOGS, live_workers, release_quarantined
from kubernetes import client, watch

DNS_IP = lib.real_node_settings()["PHASED_NODES_DNS_IP"]


@pytest.fixture(scope="module")
def real(core: Any) -> list[str]:
    names = lib.real_nodes(core)
    if len(names) < 3:
        why = (
            f"needs 3 real nodes, the cluster has {len(names)}: start it with `make cluster` "
            "as root (PHASED_REAL_NODES=3, the default)"
        )
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    not_ready = [n for n in names if lib.node_ready(core, n) != "True"]
    assert not not_ready, f"real nodes not Ready: {not_ready}"
    return names


@pytest.fixture(scope="module")
def real_operator(
    kubeconfig: str,
    crd: None,
    core: Any,
    real: list[str],
    tmp_path_factory: Any,
    request: pytest.FixtureRequest,
) -> Iterator[Operator]:
    """The operator watching only the real nodes, for this module (see :func:`operator_on`)."""
    log = LOGS / f"{request.module.__name__.rpartition('.')[2]}.log"
    if log.exists():
        log.unlink()
    work = Path(tmp_path_factory.mktemp("real"))
    with operator_on(kubeconfig, core, real, work, log) as op:
        yield op


@contextlib.contextmanager
def operator_on(
    kubeconfig: str, core: Any, real: list[str], work: Path, log: Path
) -> Iterator[Operator]:
    """An operator watching only the real nodes (nodeSelector type=real), which are opened to
    it meanwhile (their NoSchedule taint lifted), then restored (any injected failure undone)
    and closed again. Its checkpoint report endpoint listens on every address of the host;
    the pods reach it at the host's address on the nodes' bridge."""
    settings = yaml.safe_load(TEST_SETTINGS.read_text())
    settings["nodeSelector"] = lib.REAL_NODE_LABEL
    # An installation of its own, as any two operators that split a cluster's nodes need:
    # each keeps in sight every node marked with its installation's name, whatever the
    # selector, and the suite's other operator must not take the real nodes' marks for its.
    settings["installation"] = "real-nodes"
    path = work / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    key = work / "report-key"
    key.write_text(secrets.token_urlsafe(48), encoding="utf-8")
    for node in real:
        _set_real_taint(core, node, present=False)
    op = Operator(kubeconfig, log, settings=path, env={"PHASED_REPORT_KEY_FILE": str(key)})
    op.env["PHASED_REPORT_URL"] = f"http://{DNS_IP}:{op.report_port}"
    try:
        yield op.start()
    finally:
        op.stop()
        for node in real:
            lib.restore_real_node(core, node)
        release_quarantined(kubeconfig)
        for node in real:
            _set_real_taint(core, node, present=True)


def _set_real_taint(core: Any, node: str, *, present: bool) -> None:
    taints = [t for t in core.read_node(node).spec.taints or [] if t.key != lib.REAL_NODE_TAINT]
    body = [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]
    if present:
        body.append({"key": lib.REAL_NODE_TAINT, "value": "true", "effect": "NoSchedule"})
    core.patch_node(node, {"spec": {"taints": body}})


def events(core: Any, namespace: str, pod: str) -> list[dict[str, Any]]:
    """The JSON lines the worker printed (its container log, read through the kubelet)."""
    text = core.read_namespaced_pod_log(pod, namespace, container="worker")
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


class ExitCodes:
    """The last exit code each pod's worker container was seen ending with, from a watch of
    the namespace's pods: a deleted pod's final state reaches a watch (its last update and
    its DELETED event) but no later read."""

    def __init__(self, core: Any, namespace: str) -> None:
        self.codes: dict[str, int] = {}
        self._core, self._namespace = core, namespace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ExitCodes:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            watcher = watch.Watch()
            try:
                for event in watcher.stream(
                    self._core.list_namespaced_pod, self._namespace, timeout_seconds=5
                ):
                    pod = event["object"]
                    for cs in pod.status.container_statuses or []:
                        ended = cs.state.terminated if cs.state else None
                        if cs.name == "worker" and ended is not None:
                            self.codes[pod.metadata.name] = int(ended.exit_code)
                    if self._stop.is_set():
                        break
            except Exception:  # a cut watch: watch again
                time.sleep(0.5)
            finally:
                watcher.stop()


def generation_running(
    core: Any,
    namespace: str,
    uid: str,
    phase: str,
    generation: int,
    nodes: set[str],
    *,
    printed: str = "rendezvous",
) -> list[Any] | None:
    """The phase's two workers of ``generation``, by rank, once both run on ``nodes`` and
    have printed the event ``printed`` (by default: they have met)."""
    pods = [
        p
        for p in live_workers(core, namespace, uid)
        if p.metadata.labels.get("phased.dev/phase") == phase
        and p.metadata.labels.get("phased.dev/restart-generation") == str(generation)
        and p.status.phase == "Running"
        and p.spec.node_name in nodes
    ]
    if len(pods) != 2:
        return None
    for pod in pods:
        if not any(e["event"] == printed for e in events(core, namespace, pod.metadata.name)):
            return None
    return sorted(pods, key=lambda p: int(p.metadata.labels["phased.dev/rank"]))


# -- the JAX example on the real nodes ----------------------------------------------------------

JAX_EXAMPLE = REPO / "examples" / "jax-data-parallel"
JAX_IMAGE = lib.real_node_settings()["PHASED_JAX_IMAGE"]
JAX_PROGRAM = "jax-program"


def create_jax_program(core: Any, namespace: str) -> None:
    """The training program and its report helper, as the ConfigMap the pods mount."""
    files = {
        "train.py": JAX_EXAMPLE / "train.py",
        "phased_worker.py": REPO / "operator" / "phased_worker.py",
    }
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=JAX_PROGRAM),
            data={k: v.read_text(encoding="utf-8") for k, v in files.items()},
        ),
    )


@contextlib.contextmanager
def host_checkpoint_volume(core: Any, namespace: str) -> Iterator[tuple[str, Path]]:
    """A storage class name whose only volume is a host directory (every real node runs on
    this host, so they share it as they would an NFS share): the claim Phased creates for
    the job binds to it. Yields the class and the directory; removes both afterwards."""
    name = f"ckpt-{namespace}"
    directory = Path(f"/var/tmp/phased-e2e-{name}")
    directory.mkdir(parents=True, exist_ok=True)
    core.create_persistent_volume(
        client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=name),
            spec=client.V1PersistentVolumeSpec(
                capacity={"storage": "1Gi"},
                access_modes=["ReadWriteMany"],
                storage_class_name=name,
                host_path=client.V1HostPathVolumeSource(path=str(directory), type="Directory"),
                persistent_volume_reclaim_policy="Retain",
            ),
        )
    )
    try:
        yield name, directory
    finally:
        with contextlib.suppress(client.ApiException):
            core.delete_persistent_volume(name)
        shutil.rmtree(directory, ignore_errors=True)


def jax_training_job(
    name: str, storage_class: str, *, steps: int, every: int, pace: float
) -> dict[str, Any]:
    """examples/jax-data-parallel/trainingjob.yaml as the local cluster runs it: on two of the
    real nodes (they pretend to be H100 nodes) with one spare, the program from the
    ConfigMap, ``steps`` steps of ``pace`` seconds, a checkpoint every ``every`` steps."""
    env = {
        "PYTHONPATH": "/opt/train",
        "TRAIN_STEPS": str(steps),
        "TRAIN_CHECKPOINT_EVERY": str(every),
        "TRAIN_STEP_SECONDS": str(pace),
    }
    mount = {"name": "program", "mountPath": "/opt/train", "readOnly": True}
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "image": JAX_IMAGE,
                "command": ["python3", "-u", "/opt/train/train.py"],
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "spec": {
                    "volumes": [{"name": "program", "configMap": {"name": JAX_PROGRAM}}],
                    "containers": [{"name": "worker", "volumeMounts": [mount]}],
                },
            },
            "spares": {"count": 1},
            "failurePolicy": {"notReadyGrace": "3s", "survivorGracePeriod": "5s"},
            "checkpoint": {
                "interval": "10m",
                "path": "/checkpoints",
                "report": True,
                "volume": {
                    "size": "1Gi",
                    "storageClassName": storage_class,
                    "accessMode": "ReadWriteMany",
                },
            },
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 2, "max": 2},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                }
            ],
        },
    }
