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
* no guest left: ``FinishClearing`` drops the annotation; pods that were there before the
  claim and are not preemptible stay, with a Warning event ``GuestsLeftAlone``.

A held node that is no longer active loses the annotation (``FinishClearing``). The
annotation and the claim time are on the node, so an operator restarted in the middle
carries on with the same deadline.
"""

from __future__ import annotations

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.draft import NORMAL, WARNING, Draft
from phased.core.model import EvictPod, FinishClearing, NodePod
from phased.core.occupancy import guests
from phased.core.times import parse_time, shifted

RETRY_SECONDS = 2.0
_NAMED = 5


def _names(pods: tuple[NodePod, ...]) -> str:
    more = f" and {len(pods) - _NAMED} more" if len(pods) > _NAMED else ""
    return ", ".join(p.key for p in pods[:_NAMED]) + more


def clear_guests(draft: Draft) -> None:
    """Evict, then delete, the guests of the job's nodes being cleared (module docstring)."""
    timeout = parse_duration(draft.settings.guest_eviction_timeout)
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
