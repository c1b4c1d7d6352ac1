"""Turn raw API objects into the core's frozen snapshot values."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from phased.api.podtemplate import CHECKPOINT_VOLUME, WORKER_CONTAINER
from phased.core import labels
from phased.core.model import (
    JobRef,
    NodeCondition,
    NodeInfo,
    NodePod,
    PodInfo,
    PodPhase,
    Taint,
)
from phased.core.times import parse_time as _parse_time

_QUANTITY = re.compile(r"^([0-9]+)(\.[0-9]+)?([a-zA-Z]*)$")

# The kubelet's mark on a pod it would not admit (``rejectPod``): phase Failed, the reason of
# the check that refused it (UnexpectedAdmissionError, OutOf<resource>, NodeAffinity, ...).
_REJECTED = "Pod was rejected:"
# The pod reasons a kubelet that writes no ``DisruptionTarget`` condition (before 1.26) gives a
# pod it stopped for its node's sake: node-pressure eviction, a critical pod's preemption, the
# node's graceful shutdown (``Shutdown`` before 1.24, ``Terminated`` since).
_STOPPED_BY_KUBELET = ("Evicted", "Preempting", "Shutdown", "Terminated")


def parse_time(value: Any) -> datetime | None:
    return _parse_time(value) if isinstance(value, str) else None


def _stop_by(deletion: Any) -> datetime | None:
    """A pod's ``deletionTimestamp``; one that is set but unreadable reads as long past (the
    pod is being deleted all the same, its grace is not waited for)."""
    if deletion is None:
        return None
    return parse_time(deletion) or datetime.fromtimestamp(0, UTC)


def whole_units(value: Any) -> int:
    """An extended-resource quantity as a whole number (``"8"`` → 8); 0 when unreadable."""
    match = _QUANTITY.match(str(value))
    if match is None or match.group(3) not in ("", "k"):
        return 0
    number = int(match.group(1))
    return number * 1000 if match.group(3) == "k" else number


def _counted(resources: Any) -> dict[str, int]:
    """Extended resources (``vendor/name``) as whole numbers; cpu and memory are not needed."""
    if not isinstance(resources, dict):
        return {}
    return {str(k): whole_units(v) for k, v in resources.items() if "/" in str(k)}


def node_from_raw(raw: dict[str, Any]) -> NodeInfo:
    """A Node's fields that decisions read; the rest (images, addresses…) is dropped."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    conditions = tuple(
        NodeCondition(
            type=str(c.get("type", "")),
            status=str(c.get("status", "Unknown")),
            last_transition=parse_time(c.get("lastTransitionTime")),
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or "")[:256],
        )
        for c in status.get("conditions") or []
        if isinstance(c, dict)
    )
    taints = tuple(
        Taint(
            key=str(t.get("key", "")),
            value=str(t.get("value") or ""),
            effect=str(t.get("effect", "NoSchedule")),
            time_added=str(t.get("timeAdded") or ""),
        )
        for t in spec.get("taints") or []
        if isinstance(t, dict)
    )
    # Ours, and the autoscalers' guards that a claim writes (a node is patched from these).
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k.startswith(f"{labels.PREFIX}/") or k in labels.SCALE_DOWN_GUARDS
    }
    return NodeInfo(
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels=dict(meta.get("labels") or {}),
        annotations=annotations,
        taints=taints,
        unschedulable=bool(spec.get("unschedulable", False)),
        conditions=conditions,
        allocatable=_counted(status.get("allocatable")),
        capacity=_counted(status.get("capacity")),
        created=parse_time(meta.get("creationTimestamp")),
        uid=str(meta.get("uid") or ""),
    )


def pod_from_raw(raw: dict[str, Any]) -> PodInfo:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    try:
        phase = PodPhase(status.get("phase", "Pending"))
    except ValueError:
        phase = PodPhase.UNKNOWN
    exit_code: int | None = None
    finished: datetime | None = None
    reason = str(status.get("reason") or "")
    statuses = [cs for cs in status.get("containerStatuses") or [] if isinstance(cs, dict)]
    # The worker container's ending first: a sidecar's is not the worker's.
    statuses.sort(key=lambda cs: cs.get("name") != WORKER_CONTAINER)
    for cs in statuses:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated:
            exit_code = terminated.get("exitCode")
            reason = str(terminated.get("reason") or reason)
            if cs.get("name") == WORKER_CONTAINER:
                finished = parse_time(terminated.get("finishedAt"))
            break
    phase, lingering = _worker_ended(phase, statuses)
    rejected = phase == PodPhase.FAILED and str(status.get("message") or "").startswith(_REJECTED)
    disruption = _disruption(status) if phase == PodPhase.FAILED and not rejected else ""
    waiting_reason, waiting_message = _waiting(status)
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
        if isinstance(c, dict)
    )
    return PodInfo(
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        node_name=spec.get("nodeName"),
        phase=phase,
        stop_by=_stop_by(meta.get("deletionTimestamp")),
        ready=ready,
        created=parse_time(meta.get("creationTimestamp")),
        started=parse_time(status.get("startTime")),
        running_since=_running_since(status),
        exit_code=exit_code,
        finished=finished,
        reason=reason,
        waiting_reason=waiting_reason,
        waiting_message=waiting_message,
        lingering=lingering,
        rejected=rejected,
        disruption=disruption,
        controller=_controller(meta),
        **checkpoint_fields(spec),
    )


def checkpoint_fields(spec: Any) -> dict[str, str | None]:
    """Where a worker was made to keep its checkpoints, as its pod spec says
    (:class:`~phased.core.model.PodInfo`'s ``checkpoint_*``): the claim of the volume
    ``phased-checkpoints`` ("" when none), that volume's mount path in the ``worker``
    container, and that container's ``PHASED_CHECKPOINT_ROOT``. Nothing is known of a pod
    with no ``worker`` container."""
    if not isinstance(spec, dict):
        return {}
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    worker = next((c for c in containers if c.get("name") == WORKER_CONTAINER), None)
    if worker is None:
        return {}
    claim = ""
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and volume.get("name") == CHECKPOINT_VOLUME:
            source = volume.get("persistentVolumeClaim")
            claim = str(source.get("claimName") or "") if isinstance(source, dict) else ""
    mount = next(
        (
            str(m.get("mountPath"))
            for m in worker.get("volumeMounts") or []
            if isinstance(m, dict) and m.get("name") == CHECKPOINT_VOLUME and m.get("mountPath")
        ),
        None,
    )
    root = next(
        (
            str(e.get("value"))
            for e in worker.get("env") or []
            if isinstance(e, dict) and e.get("name") == "PHASED_CHECKPOINT_ROOT" and e.get("value")
        ),
        None,
    )
    return {"checkpoint_claim": claim, "checkpoint_mount": mount, "checkpoint_root": root}


def _controller(meta: dict[str, Any]) -> str:
    """The UID the object's controlling ownerReference names, "" when it has none."""
    for owner in meta.get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller") is True:
            return str(owner.get("uid") or "")
    return ""


def _worker_ended(phase: PodPhase, statuses: list[dict[str, Any]]) -> tuple[PodPhase, bool]:
    """A worker is its ``worker`` container: once that has ended, the pod has ended as it did
    (Succeeded with exit code 0, else Failed), though a sidecar that is no init container
    keeps the pod Running (or Pending: one whose image cannot be pulled). Whether such a
    container still runs or waits, holding the node, is the second value."""
    if phase not in (PodPhase.PENDING, PodPhase.RUNNING):
        return phase, False
    worker = next((cs for cs in statuses if cs.get("name") == WORKER_CONTAINER), None)
    terminated = ((worker or {}).get("state") or {}).get("terminated")
    if not isinstance(terminated, dict):
        return phase, False
    ended = PodPhase.SUCCEEDED if terminated.get("exitCode") == 0 else PodPhase.FAILED
    others = [cs for cs in statuses if cs.get("name") != WORKER_CONTAINER]
    return ended, any(not (cs.get("state") or {}).get("terminated") for cs in others)


def _disruption(status: dict[str, Any]) -> str:
    """What the kubelet said when it stopped a pod for its node's sake ("" when it did not):
    the ``DisruptionTarget`` condition (True) it writes before the pod ends, else the pod's
    reason from a kubelet that writes none. A pod deleted (the Eviction API, a preemption by
    the scheduler, the taint manager) carries the condition too, but is read as gone."""
    for cond in status.get("conditions") or []:
        target = isinstance(cond, dict) and cond.get("type") == "DisruptionTarget"
        if target and cond.get("status") == "True":
            said = str(cond.get("message") or "")
            return f"{cond.get('reason') or 'DisruptionTarget'}: {said}"[:256].rstrip(": ")
    reason = str(status.get("reason") or "")
    if reason in _STOPPED_BY_KUBELET:
        return f"{reason}: {status.get('message') or ''}"[:256].rstrip(": ")
    return ""


def _running_since(status: dict[str, Any]) -> datetime | None:
    """When the last of the pod's running containers started (None: none says it runs)."""
    starts = [
        parse_time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
        for cs in status.get("containerStatuses") or []
        if isinstance(cs, dict)
    ]
    known = [s for s in starts if s is not None]
    return max(known) if known else None


def _waiting(status: dict[str, Any]) -> tuple[str, str]:
    """Why a pod is not running yet: a container's waiting reason, else the scheduler's."""
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            waiting = ((cs or {}).get("state") or {}).get("waiting") or {}
            reason = str(waiting.get("reason") or "")
            if reason and reason not in ("ContainerCreating", "PodInitializing"):
                return reason, str(waiting.get("message") or "")[:256]
    for cond in status.get("conditions") or []:
        scheduled = isinstance(cond, dict) and cond.get("type") == "PodScheduled"
        if scheduled and cond.get("status") == "False":
            reason = str(cond.get("reason") or "Unschedulable")
            return reason, str(cond.get("message") or "")[:256]
    return "", ""


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
_TERMINAL = ("Succeeded", "Failed")


def node_pod_from_raw(raw: dict[str, Any], operator: tuple[str, str] | None = None) -> NodePod:
    """Any pod bound to a node, for deciding who may have the node. ``operator`` is the
    operator's own pod (namespace, name), from the downward API; ``None`` when unknown."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "")
    owners = meta.get("ownerReferences") or []
    daemon = any(
        isinstance(o, dict) and o.get("kind") == "DaemonSet" and o.get("controller") for o in owners
    )
    return NodePod(
        namespace=namespace,
        name=name,
        node=str(spec.get("nodeName") or ""),
        created=parse_time(meta.get("creationTimestamp")),
        priority_class=str(spec.get("priorityClassName") or ""),
        daemon=daemon,
        mirror=MIRROR_ANNOTATION in (meta.get("annotations") or {}),
        operator=operator is not None and (namespace, name) == operator,
        terminal=status.get("phase") in _TERMINAL,
        deleting=meta.get("deletionTimestamp") is not None,
        controller=_controller(meta),
    )


def job_ref_from_raw(raw: dict[str, Any]) -> JobRef:
    meta = raw.get("metadata") or {}
    return JobRef(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        generation=int(meta.get("generation") or 1),
        created=parse_time(meta.get("creationTimestamp")),
        deleting=meta.get("deletionTimestamp") is not None,
    )
