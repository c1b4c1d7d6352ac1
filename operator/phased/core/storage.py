"""The checkpoint claim and the report-token Secret of a job, as plain manifests.

* the claim Phased creates (``checkpoint.volume.size``) is ``<job>-checkpoints``, owner-
  referenced to the job (deleting the job deletes it, and with it the checkpoints: name an
  existing claim with ``claimName`` to keep them beyond the job); an existing claim is only
  mounted, never created, changed or deleted;
* the Secret ``<job>-report`` holds the job's report token (key ``token``), owner-referenced
  to the job. Phased creates it and never reads it back (the token is recomputed from the
  operator's key), so the operator needs ``create`` on Secrets and nothing more.

Workers mount the claim at ``checkpoint.path`` and the Secret at ``REPORT_MOUNT`` (read-only).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from phased.api.v1alpha1 import CheckpointVolume, TrainingJobSpec
from phased.core import labels
from phased.core.model import JobRef, PodInfo
from phased.core.workers import TOKEN_KEY, owner_reference
from phased.core.workers import _shorten as shorten


def claim_name(job: JobRef, volume: CheckpointVolume) -> str:
    """The claim the workers mount: the user's, or the one Phased creates."""
    return volume.claim_name or shorten(job.name, "-checkpoints")


def checkpoint_place(job: JobRef, spec: TrainingJobSpec) -> tuple[str, str]:
    """Where ``spec`` has the workers write checkpoints and resume from: the claim they mount
    ("" when none) and ``checkpoint.path``."""
    volume = spec.checkpoint.volume
    return (claim_name(job, volume) if volume is not None else "", spec.checkpoint.path)


def claim_created(spec: TrainingJobSpec) -> bool | None:
    """Whether ``spec``'s checkpoint claim is one Phased creates (``size``) rather than an
    existing one it names (``claimName``); None when it has no volume. A switch between the
    two moves the checkpoints even when the names agree (``claimName: <job>-checkpoints``):
    the CRD refuses it, and so does the edit re-check."""
    volume = spec.checkpoint.volume
    return None if volume is None else volume.claim_name is None


def made_place(
    job: JobRef, spec: TrainingJobSpec, pods: Iterable[PodInfo]
) -> tuple[str, str] | None:
    """Where the newest made of ``pods`` (one phase's workers) keeps its checkpoints, as its
    pod says (:func:`phased.kube.convert.checkpoint_fields`): the claim it mounts ("" when
    none) and the path — the mount's, or, with no volume, ``PHASED_CHECKPOINT_ROOT`` less
    its ``/<job>`` (``checkpoint.path`` itself when it names the same directory: the root
    drops a trailing ``/``). None when no pod says it (none made by Phased as it is)."""
    newest = sorted(
        pods,
        key=lambda p: (p.created is not None, p.created.timestamp() if p.created else 0.0, p.name),
        reverse=True,
    )
    suffix = f"/{job.name}"
    for pod in newest:
        if pod.checkpoint_claim is None:
            continue
        if pod.checkpoint_mount is not None:
            return pod.checkpoint_claim, pod.checkpoint_mount
        root = pod.checkpoint_root
        if root is None or not root.endswith(suffix):
            continue
        base = root[: -len(suffix)]
        return pod.checkpoint_claim, (
            spec.checkpoint.path if spec.checkpoint.path.rstrip("/") == base else base or "/"
        )
    return None


def report_secret_name(job: JobRef) -> str:
    return shorten(job.name, "-report")


def _metadata(job: JobRef, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": {
            labels.LABEL_JOB_UID: job.uid,
            labels.LABEL_JOB: job.name,
            labels.LABEL_MANAGED_BY: labels.MANAGED_BY,
        },
        "ownerReferences": [owner_reference(job)],
    }


def claim_manifest(job: JobRef, volume: CheckpointVolume) -> dict[str, Any] | None:
    """The claim Phased creates; None when the user names an existing one."""
    if volume.claim_name is not None or volume.size is None:
        return None
    spec: dict[str, Any] = {
        "accessModes": [volume.access_mode.value],
        "resources": {"requests": {"storage": volume.size}},
    }
    if volume.storage_class_name is not None:
        spec["storageClassName"] = volume.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(job, claim_name(job, volume)),
        "spec": spec,
    }


def report_secret_manifest(job: JobRef, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(job, report_secret_name(job)),
        "type": "Opaque",
        "stringData": {TOKEN_KEY: token},
    }
