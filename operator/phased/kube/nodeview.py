"""The operator's in-memory view of Nodes, fed by watch events and corrected by relists.

Decisions read Nodes from here, never from a LIST per reconcile: at thousands of nodes a list
per job per event would dominate. The view is "synced" once the first full list has been
applied; until then a decision must not conclude that a node has vanished.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from phased.core.model import NodeInfo
from phased.kube.convert import node_from_raw


class NodeView:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
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
            self._nodes.pop(name, None)
            return before, None
        after = node_from_raw(raw)
        if before is not None and _newer(before.resource_version, after.resource_version):
            return before, before  # a stale event after a relist: keep what we know
        self._nodes[name] = after
        return before, after

    def refresh(self, name: str, raw: dict[str, Any] | None) -> None:
        """Put one node as just read from the API into the view (``None``: it is gone).

        Not a watch event: the watch's liveness clock is left alone, and a newer version
        already in the view is kept."""
        if raw is None:
            self._nodes.pop(name, None)
            return
        fresh = node_from_raw(raw)
        before = self._nodes.get(name)
        if before is not None and _newer(before.resource_version, fresh.resource_version):
            return
        self._nodes[name] = fresh

    def replace_all(self, raws: Iterable[dict[str, Any]]) -> set[str]:
        """Replace the view with a full list; return the names whose state changed."""
        fresh = {n.name: n for n in (node_from_raw(r) for r in raws) if n.name}
        changed = {
            name
            for name in set(fresh) | set(self._nodes)
            if (fresh.get(name) is None) != (self._nodes.get(name) is None)
            or (
                name in fresh and fresh[name].resource_version != self._nodes[name].resource_version
            )
        }
        if self._synced:
            self.relist_corrections += len(changed)
        self._nodes = fresh
        self._synced = True
        return changed

    def all(self) -> tuple[NodeInfo, ...]:
        return tuple(self._nodes.values())

    def names(self) -> frozenset[str]:
        return frozenset(self._nodes)


def _newer(current: str, incoming: str) -> bool:
    """True when ``current`` is a later resourceVersion than ``incoming`` (both numeric here)."""
    try:
        return int(current) > int(incoming)
    except ValueError:
        return False
