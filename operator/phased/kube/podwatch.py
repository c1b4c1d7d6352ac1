"""The worker Pod watch: list, then watch from the list's resourceVersion, into the
:class:`~phased.kube.podindex.PodIndex`.

It selects every pod carrying the ``phased.dev/job-uid`` label (the selection a pass listed
its pods by, one job at a time), in every namespace or, when the operator is limited to some
(``phased run --namespace``), with one watch per namespace: filtered on the server, so a
busy cluster's other pods are never streamed, and no wider than the operator's own reach.
The loop (resuming, ``410 Gone``, backoff) is every watch's of the operator
(:class:`~phased.kube.listwatch.ListWatch`); the first full lists, paged, are the index's
"synced" gate. A pod deleted while no watch was running sends no event: the periodic relist
(``nodeRelistInterval``, with the Nodes) catches it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phased.core import labels
from phased.kube.client import JSON, KubeClient
from phased.kube.listwatch import ListWatch, OnAlive, OnEvent
from phased.kube.paging import Paged, Pause, Query, list_paged
from phased.kube.podindex import Indexed, indexed

SELECTOR = labels.LABEL_JOB_UID  # every pod that names a job (the label exists)

# The pods converted, the list's resourceVersion, the namespace it covers ("": every one).
OnList = Callable[[list[Indexed], str, str], None]


def pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"


async def list_pods(
    kube: KubeClient, namespace: str = "", pause: Pause | None = None
) -> Paged[Indexed]:
    """Every job's pod (in ``namespace``; "": in every one), paged, each page converted as it
    is read; with ``pause``, awaited before each page."""

    async def fetch(query: Query) -> JSON:
        return await kube.request("list", "GET", pods_path(namespace), resource="pods", query=query)

    listed = await list_paged(fetch, indexed, SELECTOR, what="pod", pause=pause)
    entries = [e for e in listed.entries if e is not None]
    return Paged(entries, listed.resource_version, listed.pages, listed.restarts)


class PodWatch(ListWatch):
    what = "pod"

    def __init__(
        self,
        kube: KubeClient,
        namespace: str = "",
        *,
        on_list: OnList,
        on_event: OnEvent,
        on_alive: OnAlive | None = None,
        timeout: int = 300,
        backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        super().__init__(
            kube, SELECTOR, on_event=on_event, on_alive=on_alive, timeout=timeout, backoff=backoff
        )
        self.namespace = namespace
        self._on_list = on_list

    async def relist(self) -> None:
        listed = await list_pods(self._kube, self.namespace)
        self.lists += 1
        self._on_list(listed.entries, listed.resource_version, self.namespace)
        self.resource_version = listed.resource_version

    async def _stream(self, query: Query, read_timeout: int) -> Any:
        return await self._kube.stream(
            "watch",
            "GET",
            pods_path(self.namespace),
            resource="pods",
            query=query,
            read_timeout=read_timeout,
        )
