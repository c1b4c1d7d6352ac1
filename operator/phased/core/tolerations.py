"""Which of a node's taints the job's workers tolerate, as the scheduler judges it.

GPU nodes are often tainted so that only pods asking for them land there (a managed
cluster's GPU pools come with ``nvidia.com/gpu=present:NoSchedule``; many fleets add their
own), and the workers carry the matching toleration in their template. A node whose
NoSchedule and NoExecute taints are all tolerated by the phase's workers can take a worker;
one with a taint they do not tolerate cannot (the scheduler would leave the worker Pending).
A toleration of a NoExecute taint bounded by ``tolerationSeconds`` does not count: the
worker would be evicted once it runs out. Nor does any toleration of the taint an autoscaler
puts on a node it is about to delete (:data:`DELETION_TAINTS`): the node goes whatever its
pods tolerate, so it can take no worker, not even one that tolerates every taint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from phased.core import labels
from phased.core.model import NodeInfo, Taint

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# Taints the node controllers derive from conditions (not-ready, unreachable, pressure,
# unschedulable for a cordon): they come and go with the node's health, which failure
# handling and the placement of new workers judge (:func:`condition_blocking`), and are no
# one's decision about the node.
CONDITION_TAINTS = "node.kubernetes.io/"
# Of those, the ones readiness and a cordon answer (failure handling, the pool's leaving rules).
_READINESS_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
    }
)
# The node conditions the node controllers derive a condition taint from (besides readiness):
# each is True while the trouble lasts (:func:`condition_passed`).
_TAINTING_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
# Taints an autoscaler puts on a node it is about to delete (drain, then delete): the cluster
# autoscaler's, Karpenter's (v1), and Karpenter's before v1. No toleration keeps the node.
DELETION_TAINTS = frozenset(
    {"ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted", "karpenter.sh/disruption"}
)

Toleration = Mapping[str, Any]


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """``toleration`` (a pod spec's, as written) tolerates ``taint`` for good (never a
    taint that says the node is about to be deleted: :data:`DELETION_TAINTS`)."""
    if taint.key in DELETION_TAINTS:
        return False
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    if taint.effect == "NoExecute" and toleration.get("tolerationSeconds") is not None:
        return False
    key = toleration.get("key") or ""
    if (toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint.key
    return key == taint.key and (toleration.get("value") or "") == taint.value


def untolerated(node: NodeInfo, tolerations: Sequence[Toleration]) -> list[Taint]:
    """The node's NoSchedule and NoExecute taints that none of ``tolerations`` tolerates."""
    return [
        t
        for t in node.taints
        if t.effect in BLOCKING_EFFECTS and not any(tolerates(tol, t) for tol in tolerations)
    ]


def foreign_blocking(node: NodeInfo, tolerations: Sequence[Toleration]) -> list[Taint]:
    """The untolerated taints of a node the job holds that someone else put there for good:
    not Phased's own (``pool``, ``spare``, ``quarantined``: the workers tolerate their pool
    and spare taints, and another job's are its own; any other key under ``phased.dev/`` is
    someone else's, an admin's maintenance taint say), not one the node controllers derive
    from its health or a cordon (``node.kubernetes.io/``)."""
    return [
        t
        for t in untolerated(node, tolerations)
        if not t.key.startswith(CONDITION_TAINTS) and t.key not in labels.OWNERSHIP_TAINTS
    ]


def condition_blocking(node: NodeInfo, tolerations: Sequence[Toleration]) -> list[Taint]:
    """The untolerated taints the node controllers derived from a condition of the node but
    its readiness and a cordon: memory, disk or PID pressure, network unavailable. The
    scheduler leaves a worker Pending on a node with one until the condition passes (a
    worker already running there runs on)."""
    return [
        t
        for t in untolerated(node, tolerations)
        if t.key.startswith(CONDITION_TAINTS) and t.key not in _READINESS_TAINTS
    ]


def condition_passed(node: NodeInfo) -> datetime | None:
    """When a condition the node controllers taint a node for (pressure, network unavailable)
    last turned False on ``node``: its taint goes soon after, and a worker left Pending for it
    is placed then. ``None`` if none has."""
    return max(
        (
            c.last_transition
            for c in node.conditions
            if c.type in _TAINTING_CONDITIONS and c.status == "False" and c.last_transition
        ),
        default=None,
    )


def of_pod_spec(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """The tolerations of a pod spec (the phase's template merged over the job's)."""
    found: Iterable[Any] = spec.get("tolerations") or ()
    return tuple(t for t in found if isinstance(t, Mapping))
