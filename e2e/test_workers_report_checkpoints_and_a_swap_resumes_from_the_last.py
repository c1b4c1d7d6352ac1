"""The checkpoint contract on the real cluster: a job with a checkpoint volume whose workers
report through the operator's endpoint with the token from the Secret Phased created; the
report survives an operator crash; CheckpointStale fires on a short interval; a node failure
restarts the gang from the last checkpoint, and the ledger's resumed waits for the new
generation's first report."""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import LOGS, apply, get_job, live_workers, nodes_of, release_quarantined
from e2e.operator_fixtures import status as job_status

import phased_worker


@pytest.fixture(scope="module")
def reporting_operator(
    kubeconfig: str, crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    """The operator with its report endpoint on a local port and a fresh key."""
    key_file = tmp_path_factory.mktemp("report-key") / "key"
    key_file.write_text(secrets.token_urlsafe(48), encoding="utf-8")
    log = LOGS / "test_workers_report_checkpoints.log"
    if log.exists():
        log.unlink()
    op = Operator(kubeconfig, log, env={"PHASED_REPORT_KEY_FILE": str(key_file)})
    op.env["PHASED_REPORT_URL"] = f"http://127.0.0.1:{op.report_port}"
    op.start()
    yield op
    op.stop()


def _claim(core: Any, namespace: str) -> str:
    """A bound claim to name as the job's checkpoint volume (the cluster has no provisioner)."""
    from kubernetes import client

    pv_name = f"ckpt-{namespace}"
    core.create_persistent_volume(
        client.V1PersistentVolume(
            metadata=client.V1ObjectMeta(name=pv_name),
            spec=client.V1PersistentVolumeSpec(
                capacity={"storage": "1Gi"},
                access_modes=["ReadWriteMany"],
                storage_class_name="phased-e2e-manual",
                host_path=client.V1HostPathVolumeSource(path=f"/tmp/{pv_name}"),
                persistent_volume_reclaim_policy="Delete",
            ),
        )
    )
    core.create_namespaced_persistent_volume_claim(
        namespace,
        client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name="checkpoints"),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteMany"],
                storage_class_name="phased-e2e-manual",
                volume_name=pv_name,
                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
            ),
        ),
    )
    lib.wait_until(
        lambda: (
            core.read_namespaced_persistent_volume_claim("checkpoints", namespace).status.phase
            == "Bound"
        ),
        60,
        message="the checkpoint claim bound",
    )
    return pv_name


def _job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "spares": {"count": 1},
            "failurePolicy": {"notReadyGrace": "3s", "survivorGracePeriod": "5s"},
            "checkpoint": {
                "report": True,
                "interval": "1m",
                "volume": {"claimName": "checkpoints"},
            },
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 2, "max": 2},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "template": {"annotations": {"sim.phased.dev/succeed-after": "30m"}},
                }
            ],
        },
    }


def _delete_and_give_back(
    kubectl: lib.Kubectl, core: Any, kubeconfig: str, namespace: str, name: str, uid: str
) -> None:
    """Delete the job, wait for its nodes to be released, give back the quarantined ones."""
    kubectl("delete", "trainingjob", name, "-n", namespace, "--wait=false")
    lib.wait_until(
        lambda: set(nodes_of(core, uid).values()) <= {"quarantined"},
        60,
        message="nodes released",
    )
    release_quarantined(kubeconfig)


def _env_of(pod: Any) -> dict[str, str]:
    return {e.name: e.value for e in pod.spec.containers[0].env or [] if e.value is not None}


def _as_worker(pod: Any, token_file: Path) -> dict[str, str]:
    """The environment the worker in ``pod`` runs with, its token file copied out."""
    env = _env_of(pod)
    env["PHASED_REPORT_TOKEN_FILE"] = str(token_file)
    return env


def test_reports_feed_the_status_survive_a_crash_and_time_a_swap(
    reporting_operator: Operator,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
    kubeconfig: str,
    tmp_path: Path,
    simulated: bool,
) -> None:
    pv = _claim(core, namespace)
    name = "ckpt"
    apply(kubectl, namespace, _job(name))
    uid = get_job(kubectl, namespace, name)["metadata"]["uid"]
    try:
        _run(reporting_operator, kubectl, core, namespace, sim_node, tmp_path, name, uid)
    finally:
        _delete_and_give_back(kubectl, core, kubeconfig, namespace, name, uid)
        core.delete_persistent_volume(pv)


def _instant(text: str) -> float:
    """An instant of the status (``…Z``), in seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _running_workers(core: Any, namespace: str, uid: str, generation: int) -> list[Any] | None:
    pods = [
        p
        for p in live_workers(core, namespace, uid)
        if p.metadata.labels.get("phased.dev/restart-generation") == str(generation)
        and p.status.phase == "Running"
    ]
    return pods if len(pods) == 2 else None


def _run(
    op: Operator,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
    tmp_path: Path,
    name: str,
    uid: str,
) -> None:
    workers = lib.wait_until(
        lambda: _running_workers(core, namespace, uid, 0), 120, message="generation 0 running"
    )
    worker = sorted(workers, key=lambda p: p.metadata.name)[0]

    # The worker pod: the claim at checkpoint.path, the token mounted, no account token.
    volumes = {v.name: v for v in worker.spec.volumes}
    assert volumes["phased-checkpoints"].persistent_volume_claim.claim_name == "checkpoints"
    assert volumes["phased-report"].secret.secret_name == f"{name}-report"
    assert worker.spec.automount_service_account_token is False
    env = _env_of(worker)
    assert env["PHASED_REPORT_TOKEN_FILE"] == "/var/run/phased/report/token"
    assert "PHASED_RESUME_FROM" not in env

    # The token, from the Secret Phased created (owned by the job), as the worker mounts it.
    secret = core.read_namespaced_secret(f"{name}-report", namespace)
    assert secret.metadata.owner_references[0].uid == uid
    token_file = tmp_path / "token"
    token_file.write_bytes(base64.b64decode(secret.data["token"]))

    wrong = tmp_path / "wrong"
    wrong.write_text("0" * 64, encoding="utf-8")
    assert not phased_worker.report_progress(1, environ=_as_worker(worker, wrong))

    # A checkpoint report is in the job before the operator acknowledges it...
    path = f"{env['PHASED_CHECKPOINT_DIR']}/step-100"
    assert phased_worker.report_checkpoint(100, path, environ=_as_worker(worker, token_file))
    annotations = get_job(kubectl, namespace, name)["metadata"]["annotations"]
    assert '"step":100' in annotations["phased.dev/reports"]
    # ... so an operator killed right after loses nothing: its successor shows it.
    op.kill()
    op.start()

    def checkpoint_shown() -> dict[str, Any] | None:
        st = job_status(kubectl, namespace, name)
        last = (st.get("phases") or [{}])[0].get("lastCheckpoint") or {}
        return st if last.get("step") == 100 and last.get("path") == path else None

    shown = lib.wait_until(checkpoint_shown, 60, message="the checkpoint in the status")
    checkpointed = _instant(shown["phases"][0]["lastCheckpoint"]["time"])

    # No checkpoint for more than checkpoint.interval (1m): CheckpointStale and its event.
    def stale() -> dict[str, Any] | None:
        st = job_status(kubectl, namespace, name)
        cond = next((c for c in st.get("conditions", []) if c["type"] == "CheckpointStale"), {})
        return cond if cond.get("status") == "True" else None

    cond = lib.wait_until(stale, 120, interval=2, message="CheckpointStale")
    assert "step 100" in cond["message"]
    events = kubectl(
        "get", "events", "-n", namespace, "--field-selector", "reason=CheckpointStale", "-o", "name"
    )
    assert events.strip()

    # A node fails: the gang restarts from the last checkpoint.
    victim = sim_node(worker.spec.node_name)
    lib.make_node_not_ready(core, victim, wait=None)
    new = lib.wait_until(
        lambda: _running_workers(core, namespace, uid, 1), 120, message="generation 1 running"
    )
    new_env = _env_of(new[0])
    assert new_env["PHASED_RESUME_FROM"] == path
    assert new_env["PHASED_RESUME_STEP"] == "100"

    st = job_status(kubectl, namespace, name)
    (entry,) = [f for f in st["failures"] if f["node"] == victim]
    assert entry["resumeStep"] == 100
    # The work lost runs from the checkpoint to detection: the node's Ready transition, which
    # Kubernetes writes in whole seconds, so up to a second before the failure was made.
    lost = entry["lostWorkSeconds"]
    assert lost == pytest.approx(_instant(entry["detected"]) - checkpointed, abs=0.002)
    # the failure was made once CheckpointStale said no checkpoint for over 60 s
    assert lost > 59
    # Pods Running is not training resumed: the entry stays open until a report comes.
    time.sleep(3)
    st = job_status(kubectl, namespace, name)
    (entry,) = [f for f in st["failures"] if f["node"] == victim]
    assert entry.get("resumed") is None
    assert st["state"] == "Recovering"

    # The worker on the failed node is left behind (a silent node's container runs on): its
    # generation was replaced, so its checkpoint is refused and the helper tells it to stop.
    with pytest.raises(phased_worker.Superseded, match="replaced by generation 1"):
        phased_worker.report_checkpoint(
            130, f"{env['PHASED_CHECKPOINT_DIR']}/step-130", environ=_as_worker(worker, token_file)
        )
    annotations = get_job(kubectl, namespace, name)["metadata"]["annotations"]
    assert '"step":130' not in annotations["phased.dev/reports"]

    reported = time.time()
    assert phased_worker.report_progress(101, environ=_as_worker(new[0], token_file))

    def resumed() -> dict[str, Any] | None:
        s = job_status(kubectl, namespace, name)
        e = next(f for f in s["failures"] if f["node"] == victim)
        return e if e.get("resumed") else None

    entry = lib.wait_until(resumed, 60, message="the failure resumed by the report")
    resumed_at = _instant(entry["resumed"])
    assert resumed_at >= reported - 1  # the report's arrival, not the pods starting
    assert entry["interruptionSeconds"] > 3
    st = job_status(kubectl, namespace, name)
    assert st["state"] == "Running"
    assert st["phases"][0]["lastProgress"]["step"] == 101
    # The lost work is a metric too.
    series = f'phased_job_lost_work_seconds_total{{namespace="{namespace}",trainingjob="{name}"}}'
    assert series in op.scrape()


def test_a_rank_replaced_on_its_own_leaves_its_old_worker_refused(
    reporting_operator: Operator,
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    sim_node: Any,
    kubeconfig: str,
    tmp_path: Path,
    simulated: bool,
) -> None:
    """restartScope Worker: the lost rank starts again as the next attempt of the same
    generation; the worker it replaced (on the failed node) is refused through the real pod
    list, the replacement and the untouched rank report as usual."""
    name = "ckpt-worker"
    job = _job(name)
    job["spec"]["launcher"] = {"type": "Torchrun", "rendezvous": "C10d"}
    job["spec"]["failurePolicy"]["restartScope"] = "Worker"
    del job["spec"]["checkpoint"]["volume"]
    apply(kubectl, namespace, job)
    uid = get_job(kubectl, namespace, name)["metadata"]["uid"]
    try:
        workers = lib.wait_until(
            lambda: _running_workers(core, namespace, uid, 0), 120, message="workers running"
        )
        token_file = tmp_path / "token"
        secret = core.read_namespaced_secret(f"{name}-report", namespace)
        token_file.write_bytes(base64.b64decode(secret.data["token"]))
        # Rank 1 is lost: rank 0's agent hosts the c10d rendezvous store, and its loss
        # restarts the gang (a new generation) instead of replacing it alone.
        kept, lost = sorted(workers, key=lambda p: p.metadata.labels["phased.dev/rank"])
        assert phased_worker.report_progress(10, environ=_as_worker(lost, token_file))

        lib.make_node_not_ready(core, sim_node(lost.spec.node_name), wait=None)
        rank = lost.metadata.labels["phased.dev/rank"]

        def replacement() -> Any:
            return next(
                (
                    p
                    for p in live_workers(core, namespace, uid)
                    if p.metadata.labels.get("phased.dev/rank") == rank
                    and p.metadata.labels.get("phased.dev/attempt") == "1"
                    and p.status.phase == "Running"
                ),
                None,
            )

        new = lib.wait_until(replacement, 120, message="the rank's attempt 1 running")
        assert new.metadata.labels["phased.dev/restart-generation"] == "0"  # no gang restart
        with pytest.raises(phased_worker.Superseded, match=f"rank {rank} attempt 0"):
            phased_worker.report_checkpoint(
                20, "/checkpoints/step-20", environ=_as_worker(lost, token_file)
            )
        assert phased_worker.report_checkpoint(
            15, "/checkpoints/step-15", environ=_as_worker(new, token_file)
        )
        assert phased_worker.report_progress(16, environ=_as_worker(kept, token_file))
        reports = get_job(kubectl, namespace, name)["metadata"]["annotations"]["phased.dev/reports"]
        assert '"step":20' not in reports and '"path":"/checkpoints/step-15"' in reports
    finally:
        _delete_and_give_back(kubectl, core, kubeconfig, namespace, name, uid)
