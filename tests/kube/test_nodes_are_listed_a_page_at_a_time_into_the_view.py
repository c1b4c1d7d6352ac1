"""A full Node list (the node watch's first list and the periodic relist) is read a page at a
time, ``limit`` Nodes a request with the node selector on every page, following
``metadata.continue`` to the end; each page is converted before the next is asked for; the
list's resourceVersion is the first page's; a continue token that expired (410) begins the
list again from the first page, a bounded number of times; and a relist taken before what
the watch delivered since still never rolls the view back.

A page is converted a few Nodes at a time, the event loop turning between (the jobs' passes
go on meanwhile); the periodic relist asks for each page only once the passes woken by a
change are done (``Reconciler.quiet``)."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from phased import reconcile as reconcile_module
from phased.core.settings import Settings
from phased.kube import nodeview as nodeview_module
from phased.kube.client import KubeClient, KubeError
from phased.kube.nodes import list_nodes
from phased.kube.nodeview import converted
from phased.kube.paging import CONVERTED_AT_ONCE, LIST_PAGE, LIST_RESTARTS
from phased.reconcile import Reconciler
from tests.kube.answers import Answer

SELECTOR = "pool=gpu"
EXPIRED = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": "The provided continue parameter is too old to display a consistent list result.",
    "reason": "Expired",
    "code": 410,
}


def node(name: str, rv: int, ready: str = "True") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": str(rv), "labels": {"pool": "gpu"}},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


class PagingApi:
    """Stands in for kubernetes.aio's ApiClient as the API server answers a paged Node list:
    at most ``limit`` Nodes a page from a snapshot of the cluster taken by the first page,
    and a continue token (``<snapshot version>/<offset>``) while more are left. The cluster
    can change between pages (:meth:`change`): a new list sees the change, a continued one
    does not. A token in ``expire`` (or every token, with ``expire_all``) is answered with
    410 Expired, once. Every request is recorded with its query.

    A real server repeats the snapshot's resourceVersion on every page; with
    ``later_pages_say`` the pages after the first say another one (the list must not take it).

    The operator also lists the nodes this installation marked (with a node selector set):
    none here carries its label, so that list is answered empty and recorded apart
    (``marked``).
    """

    def __init__(self, nodes: list[dict[str, Any]], version: int) -> None:
        self.version = version
        self.snapshots = {version: [json.dumps(n) for n in nodes]}
        self.expire: set[str] = set()
        self.expire_all = False
        self.later_pages_say: str | None = None
        self.requests: list[dict[str, str]] = []
        self.before_page: Any = None  # called with each query, before it is answered
        self.marked: list[dict[str, str]] = []

    def change(self, version: int, nodes: list[dict[str, Any]]) -> None:
        self.version = version
        self.snapshots[version] = [json.dumps(n) for n in nodes]

    async def param_serialize(self, **kw: Any) -> tuple[str, str, dict[str, str], Any, None]:
        query = urlencode(kw["query_params"] or [])
        url = "https://cluster" + kw["resource_path"] + (f"?{query}" if query else "")
        return kw["method"], url, kw["header_params"], kw["body"], None

    async def call_api(self, method: str, url: str, **_: Any) -> Answer:
        parts = urlsplit(url)
        assert (method, parts.path) == ("GET", "/api/v1/nodes")
        query = dict(parse_qsl(parts.query))
        if query.get("labelSelector", "").startswith("phased.dev/installation="):
            self.marked.append(query)
            return Answer(200, {"metadata": {"resourceVersion": str(self.version)}, "items": []})
        self.requests.append(query)
        if self.before_page is not None:
            self.before_page(query)
        token = query.get("continue", "")
        if token and (self.expire_all or token in self.expire):
            self.expire.discard(token)
            return Answer(410, EXPIRED)
        version, offset = (int(p) for p in token.split("/")) if token else (self.version, 0)
        limit = int(query.get("limit", 0)) or len(self.snapshots[version])
        page = self.snapshots[version][offset : offset + limit]
        rest = offset + limit < len(self.snapshots[version])
        said = self.later_pages_say if token and self.later_pages_say else str(version)
        meta = {"resourceVersion": said, "continue": f"{version}/{offset + limit}" if rest else ""}
        return Answer(200, {"metadata": meta, "items": [json.loads(n) for n in page]})

    async def close(self) -> None:
        return None


def reconciler(api: PagingApi) -> Reconciler:
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    return Reconciler(kube, Settings(node_selector=SELECTOR))


def many(count: int, rv: int = 5) -> list[dict[str, Any]]:
    return [node(f"n{i:04d}", rv) for i in range(count)]


def test_the_node_watchs_list_fills_the_view_with_every_node_of_every_page() -> None:
    api = PagingApi(many(2 * LIST_PAGE + 1), version=10)
    rec = reconciler(api)
    asyncio.run(rec.node_watch.relist())
    assert rec.nodes.synced
    assert rec.nodes.names() == {f"n{i:04d}" for i in range(2 * LIST_PAGE + 1)}
    assert rec.node_watch.watches[0].resource_version == "10"
    assert [q.get("continue") for q in api.requests] == [None, f"10/{LIST_PAGE}", "10/1000"]
    for query in api.requests:
        assert query["limit"] == str(LIST_PAGE) and query["labelSelector"] == SELECTOR


def test_the_periodic_relist_pages_too_and_corrects_the_view() -> None:
    api = PagingApi(many(LIST_PAGE + 2), version=10)
    rec = reconciler(api)

    async def scenario() -> None:
        await rec.node_watch.relist()
        # n0000 deleted and n9999 added while no watch ran: the relist finds both.
        api.change(20, [*many(LIST_PAGE + 2)[1:], node("n9999", 20)])
        api.requests.clear()
        await rec.relist_nodes()

    asyncio.run(scenario())
    assert "n0000" not in rec.nodes.names() and "n9999" in rec.nodes.names()
    assert len(rec.nodes) == LIST_PAGE + 2
    assert rec.nodes.relist_corrections == 2
    assert len(api.requests) == 2
    assert all(q["limit"] == str(LIST_PAGE) for q in api.requests)
    assert all(q["labelSelector"] == SELECTOR for q in api.requests)


def test_the_limit_and_the_selector_go_with_every_page_and_the_version_is_the_first_pages() -> None:
    api = PagingApi([node(name, 5) for name in "abcdefg"], version=10)
    api.later_pages_say = "99"
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    listed = asyncio.run(list_nodes(kube, SELECTOR, limit=3))
    assert [entry.node.name for entry in listed.entries] == list("abcdefg")
    assert listed.resource_version == "10"
    assert (listed.pages, listed.restarts) == (3, 0)
    assert api.requests == [
        {"limit": "3", "labelSelector": SELECTOR},
        {"limit": "3", "labelSelector": SELECTOR, "continue": "10/3"},
        {"limit": "3", "labelSelector": SELECTOR, "continue": "10/6"},
    ]


def test_a_list_without_a_node_selector_sends_no_label_selector() -> None:
    api = PagingApi([node(name, 5) for name in "abc"], version=10)
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    asyncio.run(list_nodes(kube, limit=2))
    assert api.requests == [{"limit": "2"}, {"limit": "2", "continue": "10/2"}]


def test_an_expired_continue_token_begins_the_list_again_from_the_first_page() -> None:
    api = PagingApi([node(name, 5) for name in "abcde"], version=10)
    api.expire = {"10/2"}

    def compacted(query: dict[str, str]) -> None:
        # Between the first page and the second, c is deleted and f added, and the
        # snapshot the token names is compacted away.
        if query.get("continue") == "10/2":
            api.change(20, [node(n, 5) for n in "abde"] + [node("f", 20)])

    api.before_page = compacted
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    listed = asyncio.run(list_nodes(kube, SELECTOR, limit=2))
    assert [q.get("continue") for q in api.requests] == [None, "10/2", None, "20/2", "20/4"]
    # Nothing of the expired attempt is kept: the list is the new snapshot's, whole.
    assert [entry.node.name for entry in listed.entries] == list("abdef")
    assert (listed.resource_version, listed.restarts, listed.pages) == ("20", 1, 3)
    assert all(q["limit"] == "2" and q["labelSelector"] == SELECTOR for q in api.requests)


def test_the_node_watch_lists_afresh_when_its_continue_token_expires() -> None:
    api = PagingApi(many(LIST_PAGE + 1), version=10)
    api.expire = {f"10/{LIST_PAGE}"}

    def compacted(query: dict[str, str]) -> None:
        if query.get("continue") == f"10/{LIST_PAGE}":
            api.change(20, [*many(LIST_PAGE + 1)[1:], node("n9999", 20)])

    api.before_page = compacted
    rec = reconciler(api)
    asyncio.run(rec.node_watch.relist())
    assert [q.get("continue") for q in api.requests] == [
        None,
        f"10/{LIST_PAGE}",
        None,
        f"20/{LIST_PAGE}",
    ]
    assert rec.nodes.names() == {f"n{i:04d}" for i in range(1, LIST_PAGE + 1)} | {"n9999"}
    assert rec.node_watch.watches[0].resource_version == "20"


def test_a_continue_token_that_keeps_expiring_gives_up_with_the_410() -> None:
    api = PagingApi([node(name, 5) for name in "abc"], version=10)
    api.expire_all = True
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    with pytest.raises(KubeError) as raised:
        asyncio.run(list_nodes(kube, SELECTOR, limit=2))
    assert raised.value.status == 410
    # The first attempt and LIST_RESTARTS more, each a first page and an expired second.
    assert [q.get("continue") for q in api.requests] == [None, "10/2"] * (1 + LIST_RESTARTS)


def test_a_410_on_the_first_page_is_not_taken_for_an_expired_token() -> None:
    class Refusing(PagingApi):
        async def call_api(self, method: str, url: str, **_: Any) -> Answer:
            self.requests.append(dict(parse_qsl(urlsplit(url).query)))
            return Answer(410, EXPIRED)

    api = Refusing([], version=10)
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    with pytest.raises(KubeError):
        asyncio.run(list_nodes(kube, limit=2))
    assert len(api.requests) == 1


def test_no_raw_node_of_a_page_is_alive_when_the_next_page_is_asked_for() -> None:
    api = PagingApi([node(f"n{i}", 5) for i in range(9)], version=10)
    served: list[set[str]] = []
    alive: list[set[str]] = []

    def look(query: dict[str, str]) -> None:
        gc.collect()
        names = set().union(*served) if served else set()
        alive.append(
            {
                obj["metadata"]["name"]
                for obj in gc.get_objects()
                if isinstance(obj, dict)
                and isinstance(obj.get("metadata"), dict)
                and obj["metadata"].get("name") in names
            }
        )
        offset = int(query.get("continue", "10/0").split("/")[1])
        served.append({f"n{i}" for i in range(offset, offset + 3)})

    api.before_page = look
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    listed = asyncio.run(list_nodes(kube, limit=3))
    assert len(listed.entries) == 9 and len(alive) == 3
    assert alive == [set(), set(), set()]


def test_a_paged_relist_taken_before_what_the_watch_delivered_does_not_roll_the_view_back() -> None:
    listed = [node("a", 5), *many(LIST_PAGE), node("b", 5), node("c", 5)]
    api = PagingApi(listed, version=5)
    rec = reconciler(api)

    def watch_meanwhile(query: dict[str, str]) -> None:
        # While the periodic list (taken at version 10) is between its pages, the watch
        # delivers a going NotReady (a is on the first page), b's deletion and d's addition
        # (b is on the second page, d on none).
        if query.get("continue", "").startswith("10/"):
            rec.node_event("MODIFIED", node("a", 12, ready="False"))
            rec.node_event("DELETED", node("b", 13))
            rec.node_event("ADDED", node("d", 14))

    async def scenario() -> None:
        await rec.node_watch.relist()
        api.change(10, listed)
        api.before_page = watch_meanwhile
        api.requests.clear()
        await rec.relist_nodes()

    asyncio.run(scenario())
    assert [q.get("continue") for q in api.requests] == [None, f"10/{LIST_PAGE}"]
    a = rec.nodes.get("a")
    assert a is not None and not a.ready and a.resource_version == "12"
    assert {"a", "c", "d"} <= rec.nodes.names() and "b" not in rec.nodes.names()
    assert len(rec.nodes) == LIST_PAGE + 3
    assert rec.nodes.relist_corrections == 0


def test_a_page_is_converted_a_few_nodes_at_a_time_with_the_loop_turning_between() -> None:
    """Another task (a pass) runs between the conversions of one page's Nodes, not only
    once the whole page is converted."""
    api = PagingApi(many(LIST_PAGE), version=10)
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    conversions: list[str] = []
    seen: list[int] = []  # how many Nodes were converted each time the other task ran

    def counted(raw: dict[str, Any]) -> Any:
        conversions.append(raw["metadata"]["name"])
        return converted(raw)

    async def scenario() -> None:
        listing = asyncio.ensure_future(list_nodes(kube, convert=counted))
        while not listing.done():
            await asyncio.sleep(0)
            seen.append(len(conversions))
        await listing

    asyncio.run(scenario())
    within = sorted({n for n in seen if 0 < n < LIST_PAGE})
    assert within == list(range(CONVERTED_AT_ONCE, LIST_PAGE, CONVERTED_AT_ONCE))


def test_a_list_with_a_pause_awaits_it_before_each_page() -> None:
    api = PagingApi(many(2 * LIST_PAGE + 1), version=10)
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    order: list[str] = []
    api.before_page = lambda query: order.append("page")

    async def pause() -> None:
        order.append("pause")
        await asyncio.sleep(0)

    listed = asyncio.run(list_nodes(kube, pause=pause))
    assert len(listed.entries) == 2 * LIST_PAGE + 1
    assert order == ["pause", "page"] * 3


def test_the_periodic_relist_asks_for_its_pages_once_the_passes_woken_by_a_change_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = PagingApi(many(2 * LIST_PAGE), version=10)
    rec = reconciler(api)
    timeline: list[str] = []
    api.before_page = lambda query: timeline.append("page")

    async def a_pass(uid: str) -> None:
        timeline.append(f"pass {uid}")
        await asyncio.sleep(0.05)
        timeline.append(f"pass {uid} ended")

    monkeypatch.setattr(rec, "reconcile", a_pass)

    async def scenario() -> None:
        await rec.node_watch.relist()
        timeline.clear()
        rec.trigger("u1")  # a change wakes a job: its pass runs
        relisting = asyncio.ensure_future(rec.relist_nodes())
        await asyncio.sleep(0.02)
        rec.trigger("u2")  # another, while the first runs: the page waits for it too
        await relisting

    asyncio.run(scenario())
    assert timeline[:4] == ["pass u1", "pass u2", "pass u1 ended", "pass u2 ended"]
    assert timeline[4:] == ["page", "page"]


def test_a_relist_waits_for_the_passes_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job woken again and again never holds the relist for more than a moment a page."""
    monkeypatch.setattr(reconcile_module, "_QUIET_AT_MOST", 0.05)
    api = PagingApi(many(2 * LIST_PAGE), version=10)
    rec = reconciler(api)

    async def endless(uid: str) -> None:
        await asyncio.sleep(10)

    monkeypatch.setattr(rec, "reconcile", endless)

    async def scenario() -> float:
        await rec.node_watch.relist()
        rec.trigger("u1")
        loop = asyncio.get_running_loop()
        began = loop.time()
        await rec.relist_nodes()
        took = loop.time() - began
        for task in list(rec._tasks):
            task.cancel()
        return took

    took = asyncio.run(scenario())
    assert 0.1 <= took < 1.0  # two pages, each after at most 0.05 s of waiting


def test_a_resync_pass_does_not_hold_the_relist(monkeypatch: pytest.MonkeyPatch) -> None:
    api = PagingApi(many(LIST_PAGE), version=10)
    rec = reconciler(api)
    timeline: list[str] = []
    api.before_page = lambda query: timeline.append("page")

    async def a_pass(uid: str) -> None:
        timeline.append("pass")
        await asyncio.sleep(0.05)
        timeline.append("pass ended")

    monkeypatch.setattr(rec, "reconcile", a_pass)

    async def scenario() -> None:
        await rec.node_watch.relist()
        timeline.clear()
        rec.trigger("u1", routine=True)
        await asyncio.sleep(0)
        await rec.relist_nodes()
        await asyncio.gather(*list(rec._tasks))

    asyncio.run(scenario())
    assert timeline == ["pass", "page", "pass ended"]


@pytest.mark.parametrize("which", ["the periodic relist", "the node watch's own list"])
def test_a_relist_keeps_the_views_own_object_for_each_node_it_finds_as_the_view_holds_it(
    which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Node listed at the resourceVersion the view holds is the same object: the view's
    own is kept, nothing converted or hashed; only the nodes the list finds changed, new or
    gone are. At thousands of nodes a relist finds nearly all of them as the view holds
    them, and converting each afresh held the event loop while the passes waited."""
    nodes = many(LIST_PAGE + 2)
    api = PagingApi(nodes, version=10)
    rec = reconciler(api)
    asyncio.run(rec.node_watch.relist())
    held = {name: rec.nodes.get(name) for name in rec.nodes.names()}
    changed = node("n0001", 20, ready="False")
    api.change(20, [nodes[0], changed, *nodes[3:], node("n9999", 20)])  # n0002 gone
    converted: list[str] = []
    real = nodeview_module.node_from_raw

    def counting(raw: dict[str, Any]) -> Any:
        converted.append(raw["metadata"]["name"])
        return real(raw)

    monkeypatch.setattr(nodeview_module, "node_from_raw", counting)
    relist = rec.relist_nodes if which == "the periodic relist" else rec.node_watch.relist
    asyncio.run(relist())

    assert sorted(converted) == ["n0001", "n9999"]
    kept = set(rec.nodes.names()) - {"n0001", "n9999"}
    assert kept == set(held) - {"n0001", "n0002"} and len(kept) == LIST_PAGE
    assert all(rec.nodes.get(name) is held[name] for name in kept)
    assert rec.nodes.get("n0001").ready is False  # type: ignore[union-attr]
    assert rec.nodes.snapshot().not_ready() == {"n0001"}
