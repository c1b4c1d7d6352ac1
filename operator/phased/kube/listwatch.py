"""List, then watch from the list's resourceVersion: the loop the operator's own watches share.

The operator watches Nodes (:mod:`phased.kube.nodewatch`) and its worker Pods
(:mod:`phased.kube.podwatch`) itself rather than through kopf: it reads the raw events
without kopf's deep copy of each, and it knows when the first full list has landed (the
"synced" gate a view needs before it may conclude that an object is gone).

- :meth:`ListWatch.relist` (a subclass's: a paged LIST handed to its view) sets the
  resourceVersion the watch starts from; :meth:`ListWatch.start` awaits the first one.
- Then a WATCH from there, with bookmarks, through the client's own auth and TLS; lines are
  decoded by ``kubernetes.aio``'s :class:`Watch` (an ``ERROR`` event becomes an
  ``ApiException``; bookmarks and events move its resourceVersion), without converting
  objects into generated models.
- The server ends a watch after ``timeout`` seconds; the next one resumes from the last
  resourceVersion seen. So does one cut off (a disconnect, a read timeout), after a backoff
  with jitter. ``410 Gone`` (the version is too old) lists afresh and watches from there.
- Every event, bookmarks included, feeds the liveness clock (``on_alive``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes.aio.client.exceptions import ApiException
from kubernetes.aio.watch import Watch

from phased.kube.client import JSON, KubeClient, KubeError
from phased.kube.paging import Query

logger = logging.getLogger(__name__)

OnAlive = Callable[[], None]
OnEvent = Callable[[str | None, JSON], None]  # an event's type and raw object


class _RawWatch(Watch):
    """kubernetes.aio's Watch, minus the conversion of every object into a generated model
    (a JSON round trip per event): the raw dict is all a view needs."""

    def get_return_type(self, func: Any) -> None:
        return None


class ListWatch:
    """One list-then-watch loop over a collection, filtered by ``label_selector``.

    Subclasses say how to list (:meth:`relist`, which must set :attr:`resource_version`) and
    how to open a watch of their collection (:meth:`_stream`); events go to ``on_event``
    (unless a subclass's :meth:`_event` drops some first), bookmarks to :meth:`_bookmark`."""

    what = "object"  # in the logs: "<what> watch interrupted"

    def __init__(
        self,
        kube: KubeClient,
        label_selector: str,
        *,
        on_event: OnEvent,
        on_alive: OnAlive | None = None,
        timeout: int = 300,
        backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        self._kube = kube
        self._selector = label_selector
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
        self.bookmarks = 0

    async def start(self) -> None:
        """List (the view is synced when this returns), then watch in the background. A
        failed first list raises, as the operator cannot start without it."""
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
        """A full list into the view; sets :attr:`resource_version` to the list's."""
        raise NotImplementedError

    async def _stream(self, query: Query, read_timeout: int) -> Any:
        """Open one watch of the collection with ``query`` (the stream's response)."""
        raise NotImplementedError

    def _event(self, kind: str | None, raw: JSON) -> None:
        """An ADDED, MODIFIED or DELETED event's object: handed on (``on_event``)."""
        self._on_event(kind, raw)

    def _bookmark(self) -> None:
        """A bookmark: the watch is alive and nothing changed."""

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
                        logger.info("%s watch: %s; listing afresh", self.what, exc)
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
                "%s watch interrupted (%s: %s); resuming from %s in %.1fs",
                self.what,
                type(problem).__name__,
                problem,
                self.resource_version or "a new list",
                delay,
            )
            await asyncio.sleep(delay)

    async def _watch(self) -> None:
        """One watch request, until the server ends it; raises on an error or a cut."""
        query: Query = {
            "watch": True,
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": self._timeout,
        }
        if self._selector:
            query["labelSelector"] = self._selector

        async def open_stream(**_: Any) -> Any:
            return await self._stream(query, self._timeout + 30)

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
            self._bookmark()
            return
        self.events += 1
        self._event(kind, raw)


class Watches:
    """Several :class:`ListWatch`, started and stopped together.

    :meth:`start` lists through each in turn (every view is synced when it returns: the
    "synced" gate), then each watches in the background. A start that fails stops the
    watches it started before raising."""

    def __init__(self, watches: Sequence[ListWatch]) -> None:
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
    def bookmarks(self) -> int:
        return sum(w.bookmarks for w in self.watches)
