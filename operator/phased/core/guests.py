"""Clearing a node that became active: its guests leave through the Eviction API, in time.

A node is *being cleared* while it carries ``phased.dev/clearing-since`` (written by the kube
layer in the same patch that makes it active: a spare promoted, or a node claimed as active
with pods of a preemptible class on it). For each such node of the job, with the node's pods
in the snapshot, decide answers (who is a guest: :func:`phased.core.occupancy.guests`):

* guests left, before ``clearing-since + settings.guestEvictionTimeout``: ``EvictPod`` for
  each (policy/v1 Eviction: a PodDisruptionBudget may refuse it for now), an event
  ``GuestsEvicted``, and a look again in 2 s;
* guests left after that deadline: ``EvictPod(delete=True)`` — a plain delete with the pod's
  own grace period, PodDisruptionBudget or not — and a Warning event ``GuestsDeleted``. The
  training is down while a guest holds the node; a guest that borrowed a spare, or runs at
  a class the admin declared preemptible, accepted this. Waiting longer, or promoting
  another spare, would only move the wait (the next spare may have guests of its own);
* no guest left: ``FinishClearing`` drops the annotation (not while a worker of the job
  waits to be placed and none holds the node: :func:`awaited`); pods that were there before the
  claim and are not preemptible stay, with a Warning event ``GuestsLeftAlone``.

A held node that is no longer active loses the annotation (``FinishClearing``). The
annotation and the claim time are on the node, so an operator restarted in the middle
carries on with the same deadline.

A node that stays active is cleared the same way when a worker of the job waits to be placed
and no pod of the job holds the node (:func:`mark_vacant`, ``StartClearing``): between the
generations of a gang restart, at a phase boundary, or before a rank's replacement, no worker
holds its GPUs, and a pod that tolerates every taint (the pool's too) could take them; the
new worker waited Pending there until ``pendingGrace`` failed its start.
"""

from __future__ import annotations

from datetime import datetime

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.draft import NORMAL, WARNING, Draft
from phased.core.model import EvictPod, FinishClearing, NodePod, StartClearing
from phased.core.occupancy import guests
from phased.core.phases import ENDED
from phased.core.times import parse_time, seconds_between, shifted

RETRY_SECONDS = 2.0
# A worker unplaced this long after its creation: its node is looked at for guests.
PLACE_SECONDS = 15.0
_NAMED = 5


def _names(pods: tuple[NodePod, ...]) -> str:
    more = f" and {len(pods) - _NAMED} more" if len(pods) > _NAMED else ""
    return ", ".join(p.key for p in pods[:_NAMED]) + more


def clear_guests(draft: Draft) -> None:
    """Evict, then delete, the guests of the job's nodes being cleared (module docstring)."""
    timeout = parse_duration(draft.settings.guest_eviction_timeout)
    kept = awaited(draft)
    for name in sorted(draft.roles):
        node = draft.nodes.get(name)
        if node is None or labels.ANNOTATION_CLEARING not in node.annotations:
            continue
        if draft.roles[name] != NodeRole.ACTIVE:
            draft.act(FinishClearing(node=name))
            continue
        pods = draft.snap.node_pods.get(name)
        if pods is None:
            continue  # not looked at in this pass
        claimed = parse_time(node.annotations.get(labels.ANNOTATION_CLAIMED_AT))
        found = guests(pods, draft.snap.job, claimed, draft.settings)
        if found.stay:
            draft.event(
                WARNING,
                "GuestsLeftAlone",
                f"node {name}: pods there before it was claimed are left alone: "
                f"{_names(found.stay)}",
            )
        if not found.evict:
            if name not in kept:
                draft.act(FinishClearing(node=name))
            continue
        since = parse_time(node.annotations.get(labels.ANNOTATION_CLEARING))
        late = since is None or draft.now >= shifted(since, timeout)
        for pod in found.evict:
            draft.act(EvictPod(namespace=pod.namespace, name=pod.name, node=name, delete=late))
        if late:
            draft.event(
                WARNING,
                "GuestsDeleted",
                f"node {name}: guests still there {draft.settings.guest_eviction_timeout} "
                f"after it became active are deleted: {_names(found.evict)}",
            )
        else:
            draft.event(
                NORMAL, "GuestsEvicted", f"node {name} is active: evicting {_names(found.evict)}"
            )
        draft.later(RETRY_SECONDS)


def _waiting(draft: Draft) -> list[datetime]:
    """When each worker of the job that waits to be placed (unbound, not ended, not being
    deleted) was created."""
    return [
        p.created
        for p in draft.snap.pods
        if not p.node_name and not p.deleting and p.phase not in ENDED and p.created
    ]


def _vacant(draft: Draft) -> set[str]:
    """Active nodes of the job on which no pod of the job holds the GPUs (none bound, or only
    ended ones: one being deleted still holds them)."""
    held = {p.node_name for p in draft.snap.pods if p.node_name and p.phase not in ENDED}
    return {n.name for n in draft.held(NodeRole.ACTIVE)} - held


def awaited(draft: Draft) -> set[str]:
    """The vacant active nodes while a worker of the job waits to be placed: a node being
    cleared stays marked while it is one (a guest may still come before the worker does)."""
    return _vacant(draft) if _waiting(draft) else set()


def mark_vacant(draft: Draft) -> None:
    """Once a worker of the job has waited ``PLACE_SECONDS`` unplaced, mark ``clearing-since``
    on each vacant active node (:func:`_vacant`). The next passes list its pods and clear its
    guests as on a node that became active (module docstring), and keep the mark while the
    worker still waits, so no guest that comes meanwhile goes unseen and the mark is not
    written again and again. One already being cleared keeps its deadline. Nothing is
    marked while the workers are placed as they should be: the common case costs no
    request."""
    waiting = _waiting(draft)
    if not waiting:
        return
    due = shifted(min(waiting), PLACE_SECONDS)
    if draft.now < due:
        draft.later(seconds_between(draft.now, due))
        return
    for name in sorted(_vacant(draft)):
        if labels.ANNOTATION_CLEARING not in draft.nodes[name].annotations:
            draft.act(StartClearing(node=name))
