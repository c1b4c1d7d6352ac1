"""The Node watch: list, then watch from the list's resourceVersion, straight into the view.

Nodes are the largest stream the operator reads (thousands of objects, each updated by its
kubelet every few tens of seconds), and nearly every event is a heartbeat. kopf deep-copied
each one before a handler could look at it; this watch hands the raw event to the view's
cheap :meth:`~phased.kube.nodeview.NodeView.heartbeat` test first, and only real changes go
on to the reconciler (``on_event``, converted there).

- The first LIST (with ``settings.nodeSelector`` as its ``labelSelector``; paged, each page
  converted as it arrives: :func:`~phased.kube.nodes.list_nodes`) fills the view
  (``on_list``): that is the "synced" gate, awaited by :meth:`NodeWatch.start`.
- Then a WATCH from the list's resourceVersion, with bookmarks, through the client's own
  auth and TLS; lines are decoded by ``kubernetes.aio``'s :class:`Watch` (an ``ERROR``
  event becomes an ``ApiException``; bookmarks and events move its resourceVersion).
- The server ends a watch after ``timeout`` seconds; the next one resumes from the last
  resourceVersion seen. So does one cut off (a disconnect, a read timeout), after a backoff
  with jitter. ``410 Gone`` (the version is too old) lists afresh and watches from there.
- Every event, bookmarks and heartbeats included, feeds the liveness clock (``on_alive``).

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

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Any

from kubernetes.aio.client.exceptions import ApiException
from kubernetes.aio.watch import Watch

from phased.core import labels
from phased.kube.client import JSON, KubeClient, KubeError
from phased.kube.nodes import NODES, list_nodes
from phased.kube.nodeview import Listed, NodeView

logger = logging.getLogger(__name__)

OnList = Callable[[list[Listed], str], None]  # the nodes converted, the list's resourceVersion
OnEvent = Callable[[str | None, JSON], None]
OnAlive = Callable[[], None]


def watched_selectors(node_selector: str, installation: str) -> tuple[str, ...]:
    """The label selectors the operator lists and watches Nodes with: ``node_selector``
    (empty: every Node, and nothing more is needed), then, when it is set, the nodes that
    carry this installation's label (the marks a claim writes), whatever the selector."""
    if not node_selector or not installation:
        return (node_selector,)
    return node_selector, f"{labels.LABEL_INSTALLATION}={installation}"


class _RawWatch(Watch):
    """kubernetes.aio's Watch, minus the conversion of every object into a generated model
    (a JSON round trip per event): the raw dict is all the view needs."""

    def get_return_type(self, func: Any) -> None:
        return None


class NodeWatch:
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
        self._kube = kube
        self._view = view
        self._selector = label_selector
        self._on_list = on_list
        self._on_event = on_event
        self._on_alive = on_alive
        self._timeout = timeout
        self._backoff = backoff
        self._task: asyncio.Task[None] | None = None
        self.resource_version = ""
        # What the watch has done, for tests and logs.
        self.lists = 0
        self.watches = 0
        self.events = 0
        self.heartbeats = 0
        self.bookmarks = 0

    async def start(self) -> None:
        """List (the view is synced when this returns), then watch in the background. A
        failed first list raises, as the operator cannot start without its nodes."""
        await self.stop()  # a start-up tried again must not leave two watches running
        await self.relist()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def relist(self) -> None:
        listed = await list_nodes(self._kube, self._selector)
        self.lists += 1
        self._on_list(listed.entries, listed.resource_version)
        self.resource_version = listed.resource_version

    async def _run(self) -> None:
        failures = 0
        gone = False  # the last attempt ended in 410 Gone
        loop = asyncio.get_running_loop()
        while True:
            seen = self.events + self.bookmarks
            began = loop.time()
            try:
                if not self.resource_version:
                    await self.relist()
                await self._watch()
                if self.events + self.bookmarks > seen or loop.time() - began >= 1.0:
                    gone, failures = False, 0  # the server ended it (its timeout): go on
                    continue
                # Ended at once with nothing in it: do not hammer the server.
                problem: BaseException = ConnectionError("the watch ended at once, empty")
            except asyncio.CancelledError:
                raise
            except (KubeError, ApiException) as exc:
                if exc.status == 410:
                    # Too old a version: list afresh, at once the first time (the normal
                    # case after a long cut), after the backoff if it repeats at once.
                    self.resource_version = ""
                    progressed = self.events + self.bookmarks > seen
                    if progressed or not gone:
                        logger.info("node watch: %s; listing afresh", exc)
                        gone, failures = True, 0
                        continue
                problem = exc
            except Exception as exc:  # a disconnect, a read timeout, a malformed line
                problem = exc
            if self.events + self.bookmarks > seen:
                gone, failures = False, 0
            failures += 1
            low, high = self._backoff
            delay = min(high, low * 2 ** (failures - 1)) * (0.5 + random.random() / 2)  # noqa: S311
            logger.warning(
                "node watch interrupted (%s: %s); resuming from %s in %.1fs",
                type(problem).__name__,
                problem,
                self.resource_version or "a new list",
                delay,
            )
            await asyncio.sleep(delay)

    async def _watch(self) -> None:
        """One watch request, until the server ends it; raises on an error or a cut."""
        query: dict[str, str | int | bool] = {
            "watch": True,
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": self._timeout,
        }
        if self._selector:
            query["labelSelector"] = self._selector

        async def open_stream(**_: Any) -> Any:
            return await self._kube.stream(
                "watch",
                "GET",
                NODES,
                resource="nodes",
                query=query,
                read_timeout=self._timeout + 30,
            )

        self.watches += 1
        watch = _RawWatch()
        async with watch:
            stream = watch.stream(
                open_stream, resource_version=self.resource_version, timeout_seconds=self._timeout
            )
            async for event in stream:
                self._take(event)
                if watch.resource_version:
                    self.resource_version = str(watch.resource_version)

    def _take(self, event: Any) -> None:
        if not isinstance(event, dict):
            return  # a line that was not JSON
        kind = event.get("type")
        raw = event.get("raw_object")
        if not isinstance(raw, dict):
            return
        if self._on_alive is not None:
            self._on_alive()
        if kind == "BOOKMARK":
            self.bookmarks += 1
            self._view.touch()
            return
        self.events += 1
        if kind in ("ADDED", "MODIFIED") and self._view.heartbeat(raw):
            self.heartbeats += 1
            return
        self._on_event(kind, raw)


class NodeWatches:
    """Several :class:`NodeWatch`, one per selector, started and stopped together.

    :meth:`start` lists through each in turn (every view is synced when it returns: the
    "synced" gate), then each watches in the background. A start that fails stops the
    watches it started before raising."""

    def __init__(self, watches: list[NodeWatch]) -> None:
        self.watches = tuple(watches)

    async def start(self) -> None:
        try:
            for watch in self.watches:
                await watch.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        for watch in self.watches:
            await watch.stop()

    async def relist(self) -> None:
        for watch in self.watches:
            await watch.relist()

    @property
    def lists(self) -> int:
        return sum(w.lists for w in self.watches)

    @property
    def events(self) -> int:
        return sum(w.events for w in self.watches)

    @property
    def heartbeats(self) -> int:
        return sum(w.heartbeats for w in self.watches)

    @property
    def bookmarks(self) -> int:
        return sum(w.bookmarks for w in self.watches)
