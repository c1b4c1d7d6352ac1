"""The operator's own Node watch (kube/nodewatch.py), against a scripted API server: it lists
(the synced gate) and watches from the list's resourceVersion with bookmarks and the node
selector; resumes from the last version after a bookmark, the server's timeout or a cut
connection; lists afresh on 410 Gone; hands real changes and deletions on, and drops
heartbeats before converting anything, while keeping the view's resourceVersion current."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.kube.convert import node_from_raw
from phased.kube.nodeview import Listed, NodeView, fingerprint
from phased.kube.nodewatch import NodeWatch
from phased.reconcile import Reconciler
from tests.kube.answers import Answer


def node(name: str, rv: int, *, ready: str = "True", beat: str = "T0", **labels: str) -> Any:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": str(rv),
            "labels": {"pool": "gpu", **labels},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": "8", "cpu": "96"},
            "capacity": {"nvidia.com/gpu": "8", "cpu": "96"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": beat,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "images": [{"names": [f"image-{beat}"], "sizeBytes": 1}],
        },
    }


def event(kind: str, obj: Any) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def bookmark(rv: int) -> bytes:
    return event("BOOKMARK", {"kind": "Node", "metadata": {"resourceVersion": str(rv)}})


def gone() -> bytes:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    return event("ERROR", status)


HANG = object()  # the stream stays open until the test stops the watch


class Content:
    def __init__(self, lines: list[Any]) -> None:
        self.lines = list(lines)

    async def readline(self) -> bytes:
        if not self.lines:
            return b""  # the server ended the watch (its timeoutSeconds)
        line = self.lines.pop(0)
        if line is HANG:
            await asyncio.Event().wait()
        if isinstance(line, BaseException):
            raise line
        assert isinstance(line, bytes)
        return line


class StreamResponse:
    status, reason = 200, "OK"

    def __init__(self, lines: list[Any]) -> None:
        self.response = self
        self.content = Content(lines)
        self.released = False

    def release(self) -> None:
        self.released = True

    def close(self) -> None:
        self.released = True


class FakeApi:
    """Stands in for kubernetes.aio's ApiClient: each request takes the next step of the
    script for its kind ("list" or "watch"); the requests are recorded with their query.

    Requests for the nodes this installation marked (the second watch a node selector
    brings) take their steps from a script of their own (``marked``: lists and watches; by
    default an empty list and a watch that stays open)."""

    def __init__(
        self,
        lists: list[Any],
        watches: list[Any],
        marked: tuple[list[Any], list[Any]] | None = None,
    ) -> None:
        self.script = {"list": list(lists), "watch": list(watches)}
        mine_lists, mine_watches = marked or ([node_list(1)], [[HANG]])
        self.marked = {"list": list(mine_lists), "watch": list(mine_watches)}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.streams: list[StreamResponse] = []

    async def param_serialize(self, **kw: Any) -> tuple[str, str, dict[str, str], Any, None]:
        query = "&".join(f"{k}={v}" for k, v in kw["query_params"] or [])
        url = "https://cluster" + kw["resource_path"] + (f"?{query}" if query else "")
        return kw["method"], url, kw["header_params"], kw["body"], None

    async def call_api(self, method: str, url: str, **_: Any) -> Any:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        kind = "watch" if query.get("watch") == "true" else "list"
        self.requests.append((kind, query))
        mine = query.get("labelSelector", "").startswith("phased.dev/installation=")
        steps = (self.marked if mine else self.script)[kind]
        step = steps.pop(0) if steps else [HANG]
        if isinstance(step, BaseException):
            raise step
        if kind == "list":
            status, body = step
            return Answer(status, body)
        if isinstance(step, tuple):  # (status, body): the watch refused outright
            return Answer(*step)
        stream = StreamResponse(step)
        self.streams.append(stream)
        return stream

    async def close(self) -> None:
        return None

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.requests]


def node_list(rv: int, *items: Any) -> tuple[int, Any]:
    return 200, {"metadata": {"resourceVersion": str(rv)}, "items": list(items)}


class Recorder:
    """What a reconciler would get: full lists into the view, then real events."""

    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.lists: list[list[str]] = []
        self.events: list[tuple[str | None, str, str]] = []
        self.alive = 0

    def on_list(self, entries: list[Listed], version: str) -> None:
        self.lists.append([entry.node.name for entry in entries])
        self.view.replace_converted(entries, version)

    def on_event(self, kind: str | None, raw: Any) -> None:
        self.events.append((kind, raw["metadata"]["name"], raw["metadata"]["resourceVersion"]))
        self.view.apply_event(kind, raw)

    def on_alive(self) -> None:
        self.alive += 1


def make(api: FakeApi, selector: str = "") -> tuple[NodeWatch, NodeView, Recorder]:
    kube = KubeClient(api, retries=0, base_delay=0.001, max_delay=0.001)  # type: ignore[arg-type]
    view = NodeView()
    rec = Recorder(view)
    watch = NodeWatch(
        kube,
        view,
        selector,
        on_list=rec.on_list,
        on_event=rec.on_event,
        on_alive=rec.on_alive,
        timeout=300,
        backoff=(0.001, 0.002),
    )
    return watch, view, rec


async def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never happened: {what}")


def watch_queries(api: FakeApi) -> list[dict[str, str]]:
    return [q for kind, q in api.requests if kind == "watch"]


def test_it_lists_first_then_watches_from_the_lists_version_with_bookmarks() -> None:
    api = FakeApi(
        lists=[node_list(10, node("a", 5), node("b", 6))],
        watches=[[event("ADDED", node("c", 11)), event("MODIFIED", node("a", 12, role="x"))]],
    )
    watch, view, rec = make(api, selector="pool=gpu")

    async def scenario() -> None:
        await watch.start()
        # The first list is done when start() returns: the view is synced, nothing watched yet.
        assert view.synced and view.names() == {"a", "b"}
        assert api.kinds() == ["list"]
        await until(lambda: len(watch_queries(api)) == 2, "a second watch")
        await watch.stop()

    asyncio.run(scenario())
    assert api.requests[0] == ("list", {"limit": "500", "labelSelector": "pool=gpu"})
    first, second = watch_queries(api)
    assert first == {
        "watch": "true",
        "resourceVersion": "10",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "300",
        "labelSelector": "pool=gpu",
    }
    # The server ended the first watch (its timeout): the next resumes where it got to.
    assert second["resourceVersion"] == "12"
    assert rec.events == [("ADDED", "c", "11"), ("MODIFIED", "a", "12")]
    assert view.get("a").labels["role"] == "x"  # type: ignore[union-attr]
    assert api.kinds().count("list") == 1
    assert all(s.released for s in api.streams)


def test_a_bookmark_moves_the_version_and_the_liveness_clock_and_nothing_else() -> None:
    api = FakeApi(lists=[node_list(10, node("a", 5))], watches=[[bookmark(40)]])
    watch, view, rec = make(api)

    async def scenario() -> None:
        await watch.start()
        before = view.last_event_at
        await until(lambda: len(watch_queries(api)) == 2, "a second watch")
        assert view.last_event_at > before
        await watch.stop()

    asyncio.run(scenario())
    assert watch_queries(api)[1]["resourceVersion"] == "40"
    assert rec.events == []
    assert rec.alive == 1 and watch.bookmarks == 1


@pytest.mark.parametrize("how", ["an ERROR event", "the watch request itself"])
def test_410_gone_lists_afresh_and_watches_from_the_new_list(how: str) -> None:
    refused = [gone()] if how == "an ERROR event" else (410, {"reason": "Expired", "code": 410})
    api = FakeApi(
        lists=[node_list(10, node("a", 5), node("b", 6)), node_list(90, node("a", 80))],
        watches=[refused],
    )
    watch, view, rec = make(api)

    async def scenario() -> None:
        await watch.start()
        await until(lambda: len(watch_queries(api)) == 2, "a watch after the relist")
        await watch.stop()

    asyncio.run(scenario())
    assert api.kinds()[:4] == ["list", "watch", "list", "watch"]
    assert watch_queries(api)[1]["resourceVersion"] == "90"
    # b was deleted while the version was gone: the new list says so.
    assert rec.lists == [["a", "b"], ["a"]]
    assert view.names() == {"a"}


@pytest.mark.parametrize(
    "cut", [ConnectionResetError("reset by peer"), TimeoutError(), ValueError("bad line")]
)
def test_a_cut_stream_resumes_from_the_last_version_after_a_backoff(cut: Exception) -> None:
    api = FakeApi(
        lists=[node_list(10, node("a", 5))],
        watches=[
            [event("MODIFIED", node("a", 11, ready="False")), cut],
            ConnectionRefusedError("down"),  # the API server restarting
        ],
    )
    watch, _view, rec = make(api)

    async def scenario() -> None:
        await watch.start()
        await until(lambda: len(watch_queries(api)) == 3, "a watch after the cut")
        await watch.stop()

    asyncio.run(scenario())
    assert api.kinds().count("list") == 1  # no relist: the version is still good
    assert [q["resourceVersion"] for q in watch_queries(api)] == ["10", "11", "11"]
    assert rec.events == [("MODIFIED", "a", "11")]


def test_heartbeats_are_dropped_but_keep_the_version_current() -> None:
    api = FakeApi(
        lists=[node_list(10, node("a", 5), node("b", 6))],
        watches=[
            [
                event("MODIFIED", node("a", 11, beat="T1")),
                event("MODIFIED", node("b", 12, beat="T1")),
                event("MODIFIED", node("a", 13, beat="T2", ready="False")),
                event("MODIFIED", node("b", 14, beat="T2")),
                HANG,
            ]
        ],
    )
    watch, view, rec = make(api)

    async def scenario() -> None:
        await watch.start()
        await until(lambda: watch.events == 4, "four events")
        await watch.stop()

    asyncio.run(scenario())
    assert rec.events == [("MODIFIED", "a", "13")]  # the only change a decision reads
    assert watch.heartbeats == 3 and rec.alive == 4
    b = view.get("b")
    assert b is not None and b.resource_version == "14"  # claims use it as a precondition
    a = view.get("a")
    assert a is not None and not a.ready


def test_a_deleted_node_leaves_the_view() -> None:
    api = FakeApi(
        lists=[node_list(10, node("a", 5), node("b", 6))],
        watches=[[event("DELETED", node("b", 11)), HANG]],
    )
    watch, view, rec = make(api)

    async def scenario() -> None:
        await watch.start()
        await until(lambda: watch.events == 1, "the deletion")
        await watch.stop()

    asyncio.run(scenario())
    assert rec.events == [("DELETED", "b", "11")]
    assert view.names() == {"a"}


def test_the_reconciler_is_fed_by_its_node_watch_and_stops_it_when_draining() -> None:
    api = FakeApi(
        lists=[node_list(10, node("a", 5))],
        watches=[
            [event("ADDED", node("b", 11)), event("MODIFIED", node("a", 12, beat="T9")), HANG]
        ],
    )
    kube = KubeClient(api, retries=0)  # type: ignore[arg-type]
    reconciler = Reconciler(kube, Settings(node_selector="pool=gpu"))

    async def scenario() -> None:
        await reconciler.node_watch.start()
        assert reconciler.nodes.synced
        await until(lambda: reconciler.node_watch.events == 2, "two events")
        await reconciler.drain()
        assert api.streams[-1].released

    asyncio.run(scenario())
    assert reconciler.nodes.names() == {"a", "b"}
    assert reconciler.node_watch.heartbeats == 1
    assert api.requests[0] == ("list", {"limit": "500", "labelSelector": "pool=gpu"})


# -- what counts as a heartbeat -----------------------------------------------------------------


def _set(*path: Any, value: Any) -> Callable[[Any], None]:
    def change(raw: Any) -> None:
        *parents, last = path
        target = raw
        for key in parents:
            target = target[key] if isinstance(key, int) else target.setdefault(key, {})
        target[last] = value

    return change


CHANGES = {
    "a label": _set("metadata", "labels", "phased.dev/role", value="spare"),
    "a phased annotation": _set("metadata", "annotations", "phased.dev/claimed-at", value="now"),
    "another annotation": _set("metadata", "annotations", "other", value="x"),
    "a taint": _set("spec", "taints", value=[{"key": "k", "effect": "NoSchedule"}]),
    "cordoned": _set("spec", "unschedulable", value=True),
    "Ready": _set("status", "conditions", 0, "status", value="Unknown"),
    "a transition": _set(
        "status", "conditions", 0, "lastTransitionTime", value="2026-02-01T00:00:00Z"
    ),
    "a reason": _set("status", "conditions", 0, "reason", value="NodeStatusUnknown"),
    "a message": _set("status", "conditions", 0, "message", value="Kubelet stopped posting"),
    "a new condition": lambda raw: raw["status"]["conditions"].append(
        {"type": "GPUXidError", "status": "True"}
    ),
    "allocatable GPUs": _set("status", "allocatable", "nvidia.com/gpu", value="7"),
    "GPU capacity": _set("status", "capacity", "nvidia.com/gpu", value="4"),
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_any_change_a_decision_reads_is_not_a_heartbeat(what: str) -> None:
    view = NodeView()
    view.replace_all([node("a", 5)])
    changed = node("a", 6, beat="T1")
    CHANGES[what](changed)
    assert not view.heartbeat(changed)
    # ...and the converted node differs too, wherever node_from_raw looks.
    if what != "another annotation":  # the view keeps phased.dev/ annotations only
        assert node_from_raw(changed) != node_from_raw(node("a", 6))


def test_a_heartbeat_moves_only_the_version_and_an_old_one_is_ignored() -> None:
    view = NodeView()
    view.replace_all([node("a", 5)])
    held = view.get("a")
    assert view.heartbeat(node("a", 9, beat="T1"))
    now = view.get("a")
    assert now is not None and held is not None
    assert now == replace(held, resource_version="9")
    assert view.heartbeat(node("a", 7, beat="T0"))  # older than held: dropped, not applied
    assert view.get("a").resource_version == "9"  # type: ignore[union-attr]
    assert not view.heartbeat(node("zz", 1))  # unknown: an addition, not a heartbeat


def test_an_object_that_cannot_be_hashed_is_never_a_heartbeat() -> None:
    view = NodeView()
    raw = node("a", 5)
    raw["metadata"]["labels"] = {"x": ["not", "a", "string"]}
    view.replace_all([raw])
    assert fingerprint(raw) is None
    assert not view.heartbeat(copy.deepcopy(raw))


def test_a_watch_that_keeps_failing_at_once_backs_off_instead_of_hammering(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeApi(
        lists=[node_list(10), node_list(11), node_list(12)],
        watches=[[gone()], [gone()], [], [bookmark(13)]],
    )
    watch, _view, _rec = make(api)

    async def scenario() -> None:
        await watch.start()
        await until(lambda: len(watch_queries(api)) == 5, "five watches")
        await watch.stop()

    with caplog.at_level("INFO", logger="phased.kube.listwatch"):
        asyncio.run(scenario())
    said = [r.getMessage() for r in caplog.records]
    # The first 410 lists afresh at once; the same again at once waits first; so does a
    # watch the server ends at once with nothing in it. A bookmark is progress.
    assert "listing afresh" in said[0]
    assert said[1].startswith("node watch interrupted (ApiException")
    assert said[2].startswith("node watch interrupted (ConnectionError: the watch ended at once")
    assert len(said) == 3
    assert api.kinds().count("list") == 3
    assert [q["resourceVersion"] for q in watch_queries(api)] == ["10", "11", "12", "12", "13"]
