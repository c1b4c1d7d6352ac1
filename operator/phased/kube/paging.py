"""Full lists, a page at a time, as client-go's reflector reads them.

A full list of thousands of objects (several KB of JSON each) read at once is tens of MB of
body and far more of decoded dicts, all alive together, and the allocator keeps that peak as
resident memory long after. :func:`list_paged` asks for ``limit`` objects a request, follows
``metadata.continue`` to the end, and converts each page into what its caller keeps before
the next is asked for, so only one page of raw objects is ever alive.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from phased.kube.client import JSON, KubeError

logger = logging.getLogger(__name__)

LIST_PAGE = 500  # objects per page of a full list, as client-go's reflector asks
LIST_RESTARTS = 2  # a list whose continue token expired begins again at most this often
# Objects of a page converted between two turns of the event loop: converted at once, a page
# of 500 Nodes held the loop for its whole conversion while the passes of the jobs waited.
CONVERTED_AT_ONCE = 50

T = TypeVar("T")
Query = dict[str, str | int | bool]
Fetch = Callable[[Query], Awaitable[JSON]]  # one LIST request of the collection, with this query
# Awaited before each page is asked for: a list that may wait (a periodic relist) waits here
# for the work that may not (:meth:`phased.reconcile.Reconciler.quiet`).
Pause = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Paged(Generic[T]):
    """A full list, converted page by page."""

    entries: list[T]
    resource_version: str  # the first page's: the pages are one snapshot
    pages: int
    restarts: int  # times it began again after its continue token expired


async def list_paged(
    fetch: Fetch,
    convert: Callable[[JSON], T],
    label_selector: str = "",
    *,
    limit: int = LIST_PAGE,
    what: str = "object",
    pause: Pause | None = None,
) -> Paged[T]:
    """Every object of a collection (matching ``label_selector``), ``limit`` to a request
    (each sent by ``fetch``), following ``metadata.continue`` until it is empty, each page's
    items passed through ``convert`` as soon as the page is read, :data:`CONVERTED_AT_ONCE`
    at a time with a turn of the event loop between (the passes go on meanwhile). With
    ``pause``, each page is asked for once it returns.

    The pages are one consistent snapshot, taken at the first page's resourceVersion. A
    continue token can expire (``410 Gone``: the snapshot was compacted away while the pages
    were read); the list then begins again from the first page, at most
    :data:`LIST_RESTARTS` times, and the 410 is raised after that."""
    restarts = 0
    while True:
        entries: list[T] = []
        version, token, pages = "", "", 0
        try:
            while True:
                query: Query = {"limit": limit}
                if label_selector:
                    query["labelSelector"] = label_selector
                if token:
                    query["continue"] = token
                if pause is not None:
                    await pause()
                data = await fetch(query)
                meta = data.get("metadata") or {}
                items = [raw for raw in data.get("items") or () if isinstance(raw, dict)]
                del data
                for at in range(0, len(items), CONVERTED_AT_ONCE):
                    if at:
                        await asyncio.sleep(0)
                    entries.extend(convert(raw) for raw in items[at : at + CONVERTED_AT_ONCE])
                del items  # the raw page goes before the next is asked for
                if not pages:
                    version = str(meta.get("resourceVersion") or "")
                token = str(meta.get("continue") or "")
                pages += 1
                if not token:
                    return Paged(entries, version, pages, restarts)
        except KubeError as exc:
            if exc.status != 410 or not token or restarts >= LIST_RESTARTS:
                raise
            restarts += 1
            logger.info(
                "%s list: page %d's continue token expired (%s); listing afresh",
                what,
                pages + 1,
                exc,
            )
