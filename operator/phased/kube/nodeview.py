"""The operator's in-memory view of Nodes, fed by watch events and corrected by relists.

Decisions read Nodes from here, never from a LIST per reconcile: at thousands of nodes a list
per job per event would dominate. The view is "synced" once the first full list has been
applied; until then a decision must not conclude that a node has vanished.

Most Node events are heartbeats (the kubelet's ``lastHeartbeatTime``): the view keeps a
fingerprint of the raw fields it reads for each node, so that :meth:`NodeView.heartbeat`
recognises one from the raw event, before anything is converted.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from phased.core.model import NodeIndex, NodeInfo, NodeSet
from phased.core.selector import selects
from phased.kube.convert import node_from_raw
from phased.kube.versions import at_least, newer

# The index is built afresh when more than one node in this many of a full list is a new
# object (:meth:`NodeView.replace_converted`).
_REBUILT_BEYOND = 4


class NodeView:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        # The names by job-uid label, by topology and not Ready (NodeSet's index), kept as
        # _nodes changes: a pass finds its job's nodes, the free nodes near its pool and the
        # nodes down there.
        self._index = NodeIndex()
        self._prints: dict[str, int | None] = {}  # name -> fingerprint of what _nodes holds
        # Deletions the watch delivered since the last full list: name -> resourceVersion.
        self._deleted: dict[str, str] = {}
        self._synced = False
        self.last_event_at: float = 0.0  # monotonic clock of the last watch event
        self.relist_corrections = 0  # changes a relist found that the watch had not delivered

    @property
    def synced(self) -> bool:
        return self._synced

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def touch(self) -> None:
        """The watch is alive (a bookmark): move the liveness clock, nothing else."""
        self.last_event_at = time.monotonic()

    def heartbeat(self, raw: dict[str, Any]) -> bool:
        """True when ``raw`` changes nothing the view holds but the resourceVersion (a
        heartbeat): the view takes the new resourceVersion (claims use it as a precondition)
        and nothing else is done. False for anything else (a change, an unknown node): then
        :meth:`apply_event` it. Cheap: the raw fields are hashed, nothing is converted."""
        meta = raw.get("metadata") or {}
        name = meta.get("name")
        before = self._nodes.get(name) if isinstance(name, str) else None
        if before is None:
            return False
        held = self._prints.get(before.name)
        if held is None or fingerprint(raw) != held:
            return False
        self.last_event_at = time.monotonic()
        rv = str(meta.get("resourceVersion", ""))
        if rv != before.resource_version and not newer(before.resource_version, rv):
            # Only the resourceVersion moves: what the index keeps of the node stays true.
            self._nodes[before.name] = replace(before, resource_version=rv)
        return True

    def apply_event(
        self, event_type: str | None, raw: dict[str, Any]
    ) -> tuple[NodeInfo | None, NodeInfo | None]:
        """Apply one watch event; return (before, after) for the node it concerns."""
        self.last_event_at = time.monotonic()
        name = str((raw.get("metadata") or {}).get("name", ""))
        if not name:
            return None, None
        before = self._nodes.get(name)
        if event_type == "DELETED":
            self._put(name, None)
            self._prints.pop(name, None)
            self._deleted[name] = str((raw.get("metadata") or {}).get("resourceVersion", ""))
            return before, None
        after = node_from_raw(raw)
        if before is not None and newer(before.resource_version, after.resource_version):
            return before, before  # a stale event after a relist: keep what we know
        self._put(name, after)
        self._prints[name] = fingerprint(raw)
        self._deleted.pop(name, None)
        return before, after

    def refresh(self, name: str, raw: dict[str, Any] | None) -> None:
        """Put one node as just read from the API into the view (``None``: it is gone).

        Not a watch event: the watch's liveness clock is left alone, and a newer version
        already in the view is kept."""
        if raw is None:
            self._put(name, None)
            self._prints.pop(name, None)
            return
        fresh = node_from_raw(raw)
        before = self._nodes.get(name)
        if before is not None and newer(before.resource_version, fresh.resource_version):
            return
        self._put(name, fresh)
        self._prints[name] = fingerprint(raw)

    def listed(self, raw: dict[str, Any]) -> Listed:
        """What the view keeps of one raw Node of a list (:func:`converted`), or, when the
        view holds that node at the listed resourceVersion, what it holds already: the same
        version of an object is the same object, and a relist at thousands of nodes finds
        nearly every one unchanged (heartbeats move the view's version with the node's,
        :meth:`heartbeat`), so it converts and hashes only the nodes the watch had not
        brought, and hands the rest back as they are."""
        meta = raw.get("metadata") or {}
        name, rv = meta.get("name"), meta.get("resourceVersion")
        mine = self._nodes.get(name) if isinstance(name, str) else None
        if mine is not None and rv and mine.resource_version == str(rv):
            return Listed(mine, self._prints.get(mine.name))
        return converted(raw)

    def replace_all(self, raws: Iterable[dict[str, Any]], list_version: str = "") -> set[str]:
        """:meth:`replace_converted` with raw Nodes, converted one by one."""
        return self.replace_converted((converted(raw) for raw in raws), list_version)

    def replace_converted(self, entries: Iterable[Listed], list_version: str = "") -> set[str]:
        """Replace the view with a full list taken at ``list_version`` (the list's own
        resourceVersion), already converted (:func:`converted`, page by page as a paged list
        arrives: no raw Node outlives its page); return the names whose state changed.

        The watch goes on while a periodic list is in flight, so the view may already hold
        what happened after the list was taken: it is never rolled back. A node the view
        holds at a later version than the list's stays as the view has it; one the list
        lacks stays when the view's version is later than ``list_version`` (it came after
        the list); one whose deletion the watch delivered after the list stays deleted.
        """
        fresh: dict[str, NodeInfo] = {}
        prints: dict[str, int | None] = {}
        for node, stamp in entries:
            if not node.name:
                continue
            mine = self._nodes.get(node.name)
            gone = self._deleted.get(node.name)
            if mine is not None and newer(mine.resource_version, node.resource_version):
                fresh[node.name], prints[node.name] = mine, self._prints.get(node.name)
            elif mine is None and gone is not None and at_least(gone, node.resource_version):
                continue
            else:
                fresh[node.name], prints[node.name] = node, stamp
        for name, mine in self._nodes.items():
            if name not in fresh and list_version and newer(mine.resource_version, list_version):
                fresh[name], prints[name] = mine, self._prints.get(name)
        # The nodes that are new objects (one held at the listed version is the view's own,
        # :meth:`listed`); of them, those whose state changed.
        moved = [
            (name, self._nodes.get(name), fresh.get(name))
            for name in set(fresh) | set(self._nodes)
            if fresh.get(name) is not self._nodes.get(name)
        ]
        changed = {
            name
            for name, before, after in moved
            if before is None or after is None or after.resource_version != before.resource_version
        }
        if self._synced:
            self.relist_corrections += len(changed)
        # The index follows the new objects only; built afresh when they are many (the first
        # list), as putting them one by one keeps each of its entries sorted.
        if len(moved) * _REBUILT_BEYOND > len(fresh):
            self._index = NodeIndex.of(fresh.values())
        else:
            for name, before, after in moved:
                self._index.put(name, before, after)
        self._nodes = fresh
        self._prints = prints
        self._deleted = {
            name: rv
            for name, rv in self._deleted.items()
            if list_version and newer(rv, list_version)
        }
        self._synced = True
        return changed

    def _put(self, name: str, node: NodeInfo | None) -> None:
        self._index.put(name, self._nodes.get(name), node)
        if node is None:
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = node

    def all(self) -> tuple[NodeInfo, ...]:
        return tuple(self._nodes.values())

    def snapshot(self) -> NodeSet:
        """The nodes as they stand, a copy a pass reads across its awaits: the dict of nodes
        copied whole, the index as :meth:`~phased.core.model.NodeIndex.copy` copies it."""
        return NodeSet(dict(self._nodes), self._index.copy())

    def by_name(self) -> Mapping[str, NodeInfo]:
        """The view's nodes by name, not copied: read it at once, never across an await."""
        return self._nodes

    def names(self) -> frozenset[str]:
        return frozenset(self._nodes)


class NodeViews:
    """What the operator sees of the Nodes: one :class:`NodeView` per Node watch, read as one.

    The first watch is the settings' ``nodeSelector``'s (every Node when it is empty); when
    a selector is set, a second one watches the Nodes carrying this installation's label
    (:func:`phased.kube.nodewatch.watched_selectors`), so a node the operator marked stays
    in sight whatever the selector: one a person relabelled out of it is still seen, and
    given back (:mod:`phased.core.scope`), never taken for a deleted node. A node is seen
    while any view holds it; of two copies, the one at the later resourceVersion is read.
    Each view follows its own watch and lists exactly as a lone view does, so a node leaving
    one selection (a ``DELETED`` on that watch) stays while the other still holds it, and a
    deleted node goes once every watch that held it has said so.
    """

    def __init__(self, selectors: Iterable[str] = ("",)) -> None:
        self.selectors = tuple(selectors) or ("",)
        self.views = tuple(NodeView() for _ in self.selectors)

    @property
    def synced(self) -> bool:
        return all(view.synced for view in self.views)

    @property
    def last_event_at(self) -> float:
        return max(view.last_event_at for view in self.views)

    @property
    def relist_corrections(self) -> int:
        return sum(view.relist_corrections for view in self.views)

    def __len__(self) -> int:
        return len(self.names())

    def get(self, name: str) -> NodeInfo | None:
        return _latest(view.get(name) for view in self.views)

    def all(self) -> tuple[NodeInfo, ...]:
        first, *others = self.views
        if not others:
            return first.all()
        seen = dict(first.by_name())  # copied whole, not node by node: every pass merges
        for view in others:
            for node in view.all():
                held = seen.get(node.name)
                if held is None or newer(node.resource_version, held.resource_version):
                    seen[node.name] = node
        return tuple(seen.values())

    def snapshot(self) -> NodeSet:
        """The nodes as seen, all views together (as :meth:`all`), a copy a pass reads across
        its awaits."""
        first, *others = self.views
        seen = first.snapshot()
        for view in others:
            seen = seen.with_nodes(
                node
                for node in view.all()
                if (held := seen.get(node.name)) is None
                or newer(node.resource_version, held.resource_version)
            )
        return seen

    def names(self) -> frozenset[str]:
        first, *others = self.views
        return first.names().union(*(view.names() for view in others))

    def apply_event(
        self, event_type: str | None, raw: dict[str, Any], source: int = 0
    ) -> tuple[NodeInfo | None, NodeInfo | None]:
        """One event of watch ``source``; (before, after) of the node as seen, all views
        together (a node leaving one selection that another still holds has not gone)."""
        name = str((raw.get("metadata") or {}).get("name", ""))
        before = self.get(name) if name else None
        self.views[source].apply_event(event_type, raw)
        return before, self.get(name) if name else None

    def replace_converted(
        self, entries: Iterable[Listed], list_version: str = "", source: int = 0
    ) -> set[str]:
        """A full list of watch ``source``'s selection (:meth:`NodeView.replace_converted`)."""
        return self.views[source].replace_converted(entries, list_version)

    def replace_all(
        self, raws: Iterable[dict[str, Any]], list_version: str = "", source: int = 0
    ) -> set[str]:
        return self.views[source].replace_all(raws, list_version)

    def refresh(self, name: str, raw: dict[str, Any] | None) -> None:
        """One node as just read from the API (``None``: it is gone): into each view whose
        selector selects it, out of each that does not (its watch says the same soon),
        never replacing a later version a view already holds."""
        labels = ((raw or {}).get("metadata") or {}).get("labels") or {}
        for selector, view in zip(self.selectors, self.views, strict=True):
            if raw is not None and isinstance(labels, dict) and selects(selector, labels):
                view.refresh(name, raw)
                continue
            held = view.get(name)
            fresh = str(((raw or {}).get("metadata") or {}).get("resourceVersion", ""))
            if held is not None and not (raw is not None and newer(held.resource_version, fresh)):
                view.refresh(name, None)


def _latest(nodes: Iterable[NodeInfo | None]) -> NodeInfo | None:
    found: NodeInfo | None = None
    for node in nodes:
        if node is not None and (
            found is None or newer(node.resource_version, found.resource_version)
        ):
            found = node
    return found


class Listed(NamedTuple):
    """One Node of a list, as the view keeps it: converted, and the fingerprint of its raw
    fields (:meth:`NodeView.heartbeat` holds events against it)."""

    node: NodeInfo
    fingerprint: int | None


def converted(raw: dict[str, Any]) -> Listed:
    """What the view keeps of one raw Node from a list; the raw object can go."""
    return Listed(node_from_raw(raw), fingerprint(raw))


def fingerprint(raw: dict[str, Any]) -> int | None:
    """A hash of every raw field :func:`~phased.kube.convert.node_from_raw` reads (more than
    it keeps: all annotations and resources, whole condition messages), and of nothing
    that moves with a heartbeat (``lastHeartbeatTime``, the resourceVersion, images).
    Equal fingerprints: nothing a decision reads has changed. ``None`` when a field cannot
    be hashed (a malformed object): never equal to anything, so never taken for a heartbeat.
    """
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    try:
        return hash(
            (
                _items(meta.get("labels")),
                _items(meta.get("annotations")),
                meta.get("creationTimestamp"),
                meta.get("uid"),
                tuple(
                    (t.get("key"), t.get("value"), t.get("effect"), t.get("timeAdded"))
                    for t in spec.get("taints") or ()
                    if isinstance(t, dict)
                ),
                spec.get("unschedulable"),
                tuple(
                    (
                        c.get("type"),
                        c.get("status"),
                        c.get("lastTransitionTime"),
                        c.get("reason"),
                        c.get("message"),
                    )
                    for c in status.get("conditions") or ()
                    if isinstance(c, dict)
                ),
                _items(status.get("allocatable")),
                _items(status.get("capacity")),
            )
        )
    except (TypeError, AttributeError):
        return None


def _items(mapping: Any) -> tuple[tuple[Any, Any], ...] | None:
    if mapping is None:
        return None
    return tuple(mapping.items())
