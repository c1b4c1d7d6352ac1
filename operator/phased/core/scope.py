"""A node the job holds that a person relabelled out of the operator's ``nodeSelector``.

The settings' ``nodeSelector`` says which nodes are the operator's to use. A person may
relabel a node the job holds so that it no longer matches it (taking it back for other
work). The node is still the job's — it carries the job's marks — and the operator still
sees it (it watches the nodes carrying its installation label whatever the selector:
:mod:`phased.kube.nodewatch`), so it is neither lost nor taken for a deleted node. It is
given back cleanly:

* an active or spare node out of the selector is released at once (labels, annotations and
  pool or spare taint removed; a cordon stays, as with any release), with one Normal event
  ``NodeLeftSelector``; no ledger entry, since nothing failed;
* a worker of the running generation on it is then on a node that is no longer active, so
  it is stopped and the generation made whole as after any loss of a node (a spare
  promoted, the gang restarted or the rank replaced, counted in ``restarts`` but not
  against ``restartBudget``); the spares are refilled from free nodes within the selector;
* a node in trouble (not Ready, or a suspect) is left to failure handling first, so a
  failure is still recorded; nothing moves while the breaker holds failures (automatic
  action is paused), as for a node a person cordons;
* a quarantined node stays quarantined (a broken node keeps its cordon and note for a
  person); healed under ``ReturnToSpares``, it is released rather than made a spare
  (:mod:`phased.core.recovery`).

A node out of the selector is never claimed (:mod:`phased.core.sizing`), and a spare out of it
is never promoted, even in trouble (:func:`phased.core.recovery.promotable`).
"""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.draft import NORMAL, Draft
from phased.core.model import NodeInfo, ReleaseNode
from phased.core.selector import selects
from phased.core.settings import Settings


def in_scope(node: NodeInfo, settings: Settings) -> bool:
    """``node`` matches the operator's ``nodeSelector`` (every node does when it is empty)."""
    return selects(settings.node_selector, node.labels)


def release_out_of_scope(draft: Draft) -> None:
    """Give back the active and spare nodes that left the selector (module docstring)."""
    selector = draft.settings.node_selector
    if not selector or draft.breaker_nodes:
        return
    for node in draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE):
        if in_scope(node, draft.settings):
            continue
        if not node.ready or node.name in draft.suspect_nodes:
            continue  # failure handling answers it first, so its failure is recorded
        role = draft.roles.pop(node.name)
        draft.act(ReleaseNode(node=node.name))
        what = (
            "an active node: a worker of the job there moves to another"
            if role == NodeRole.ACTIVE
            else "a spare"
        )
        draft.event(
            NORMAL,
            "NodeLeftSelector",
            f"node {node.name} no longer matches the operator's nodeSelector ({selector}): "
            f"released from the pool ({what}); nothing failed, no ledger entry",
        )
