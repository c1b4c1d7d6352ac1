"""The Node watch: list, then watch from the list's resourceVersion, straight into the view.

Nodes are the largest stream the operator reads (thousands of objects, each updated by its
kubelet every few tens of seconds), and nearly every event is a heartbeat. kopf deep-copied
each one before a handler could look at it; this watch hands the raw event to the view's
cheap :meth:`~phased.kube.nodeview.NodeView.heartbeat` test first, and only real changes go
on to the reconciler (``on_event``, converted there).

- The first LIST (with ``settings.nodeSelector`` as its ``labelSelector``; paged, each page
  converted as it arrives: :func:`~phased.kube.nodes.list_nodes`) fills the view
  (``on_list``): that is the "synced" gate, awaited by :meth:`NodeWatch.start`.
- Then the watch, resumed and relisted as every watch of the operator's is
  (:class:`~phased.kube.listwatch.ListWatch`); every event, bookmarks and heartbeats
  included, feeds the liveness clock (``on_alive``).

A node deleted while no watch was running sends no event: the periodic relist
(``nodeRelistInterval``) still catches it, independently of this watch.

With a ``nodeSelector`` the operator runs two such watches (:func:`watched_selectors`,
:class:`NodeWatches`): the selector's, and one of the Nodes carrying this installation's
``phased.dev/installation`` label, whatever the selector. A label selector cannot say "this
or that", and a node the operator marked must never leave its sight: relabelled out of the
selector, a held node would otherwise be gone from the view — taken for a deleted node, its
marks kept for ever (orphan release reads the view). Each watch feeds its own view
(:class:`~phased.kube.nodeview.NodeViews`). The second selection is small: the nodes jobs
hold, and quarantined ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phased.core import labels
from phased.kube.client import JSON, KubeClient
from phased.kube.listwatch import ListWatch, OnAlive, OnEvent, Watches
from phased.kube.nodes import NODES, list_nodes
from phased.kube.nodeview import Listed, NodeView
from phased.kube.paging import Query

OnList = Callable[[list[Listed], str], None]  # the nodes converted, the list's resourceVersion


def watched_selectors(node_selector: str, installation: str) -> tuple[str, ...]:
    """The label selectors the operator lists and watches Nodes with: ``node_selector``
    (empty: every Node, and nothing more is needed), then, when it is set, the nodes that
    carry this installation's label (the marks a claim writes), whatever the selector."""
    if not node_selector or not installation:
        return (node_selector,)
    return node_selector, f"{labels.LABEL_INSTALLATION}={installation}"


class NodeWatch(ListWatch):
    what = "node"

    def __init__(
        self,
        kube: KubeClient,
        view: NodeView,
        label_selector: str,
        *,
        on_list: OnList,
        on_event: OnEvent,
        on_alive: OnAlive | None = None,
        timeout: int = 300,
        backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        super().__init__(
            kube,
            label_selector,
            on_event=on_event,
            on_alive=on_alive,
            timeout=timeout,
            backoff=backoff,
        )
        self._view = view
        self._on_list = on_list
        self.heartbeats = 0

    async def relist(self) -> None:
        listed = await list_nodes(self._kube, self._selector, convert=self._view.listed)
        self.lists += 1
        self._on_list(listed.entries, listed.resource_version)
        self.resource_version = listed.resource_version

    async def _stream(self, query: Query, read_timeout: int) -> Any:
        return await self._kube.stream(
            "watch", "GET", NODES, resource="nodes", query=query, read_timeout=read_timeout
        )

    def _bookmark(self) -> None:
        self._view.touch()

    def _event(self, kind: str | None, raw: JSON) -> None:
        if kind in ("ADDED", "MODIFIED") and self._view.heartbeat(raw):
            self.heartbeats += 1
            return
        self._on_event(kind, raw)


class NodeWatches(Watches):
    """One :class:`NodeWatch` per selector (:func:`watched_selectors`), started and stopped
    together."""

    @property
    def heartbeats(self) -> int:
        return sum(w.heartbeats for w in self.watches if isinstance(w, NodeWatch))
