"""Pods on a node: which keep it from being claimed, and which must leave once it is active.

A pod **counts for nothing** when a DaemonSet owns it (node agents run on every node and
tolerate every taint), when it is a static pod (its mirror: the kubelet runs it from a
file and nothing can evict it), or when it has finished (Succeeded or Failed).

**Claiming.** Any other pod keeps the node out (``RunningPods``) — one being deleted too,
until it is gone: it holds the node's GPUs for as long as its grace period lets it stop
(another job's worker given a long one to write its checkpoint), the scheduler counts it
until then, and a worker of the job created beside it would wait Pending, past
``pendingGrace`` if the grace is longer (a failed start that was no one's fault). A node
kept out only by such pods is looked at again within seconds (:data:`LOOK_AGAIN_SECONDS`),
not after a resync interval as one with a pod that stays. The
exception is pods of a PriorityClass listed in ``settings.preemptiblePriorityClasses``: the
cluster admin declared those displaceable, and a node holding them is claimed and cleared.
The operator's own pod always keeps its node out (it is never displaced), whatever its
class.

**Guests.** When a node of the job becomes active (a spare promoted, a node claimed as
active), the pods that must leave are those that count and are not already being deleted
(they are on their way out), are not this job's workers and are not the operator's pod, and
either

* arrived after the claim: created strictly after the node's ``phased.dev/claimed-at``
  (they came to borrow it, e.g. by tolerating a Preemptible spare's taint), or
* are of a preemptible PriorityClass.

Any other pod that counts was there before the claim: a claim would not have been made
with it there, so it raced the claim, or the node was claimed before these rules. It is
left alone and reported, and so are all pods of a node without a readable ``claimed-at``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from phased.core.model import JobRef, NodePod
from phased.core.settings import Settings


def counts(pod: NodePod) -> bool:
    """The pod occupies the node (module docstring), a pod being deleted included."""
    return not (pod.daemon or pod.mirror or pod.terminal)


def staying(pod: NodePod) -> bool:
    """The pod occupies the node and nobody asked it to leave yet."""
    return counts(pod) and not pod.deleting


def preemptible(pod: NodePod, settings: Settings) -> bool:
    return (
        not pod.operator
        and bool(pod.priority_class)
        and pod.priority_class in settings.preemptible_priority_classes
    )


def blocking(pods: Iterable[NodePod], settings: Settings) -> list[NodePod]:
    """The pods that keep their node from being claimed."""
    return [p for p in pods if counts(p) and not preemptible(p, settings)]


# A node kept out only by pods on their way out is looked at again this soon: nothing else
# says when they are gone (their going changes no node, and their watch events, if Phased
# watches them at all, wake only their own job).
LOOK_AGAIN_SECONDS = 5.0


def leaving(pods: Iterable[NodePod], settings: Settings) -> bool:
    """Pods keep their node out, and every one of them is being deleted: the node will be
    free once they are gone (their grace), so it is worth a look within seconds."""
    busy = blocking(pods, settings)
    return bool(busy) and all(p.deleting for p in busy)


def displaceable(pods: Iterable[NodePod], settings: Settings) -> list[NodePod]:
    """Pods of a preemptible class on a node that may be claimed: they leave when it is
    active (one already being deleted leaves by itself)."""
    return [p for p in pods if staying(p) and preemptible(p, settings)]


@dataclass(frozen=True)
class Guests:
    evict: tuple[NodePod, ...]  # must leave
    stay: tuple[NodePod, ...]  # there before the claim: left alone, reported


def guests(
    pods: Iterable[NodePod], job: JobRef, claimed_at: datetime | None, settings: Settings
) -> Guests:
    """Who must leave a node of ``job`` that became active (module docstring). The job's
    workers are its pods: the job their controller, in the job's namespace (a pod that only
    carries the job's labels, a copy of a worker, is a guest like any other)."""
    evict: list[NodePod] = []
    stay: list[NodePod] = []
    for pod in sorted(pods, key=lambda p: p.key):
        worker = pod.controller == job.uid and pod.namespace == job.namespace
        if not staying(pod) or worker or pod.operator:
            continue
        # A pod's creationTimestamp has whole seconds, the claim time microseconds: a pod of
        # the claim's own second counts as after it (one from before would have stopped the
        # claim, which lists the node's pods after writing it).
        after = (
            claimed_at is not None
            and pod.created is not None
            and pod.created >= claimed_at.replace(microsecond=0)
        )
        (evict if after or preemptible(pod, settings) else stay).append(pod)
    return Guests(tuple(evict), tuple(stay))
