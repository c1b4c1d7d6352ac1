"""The scale bench times a failure's ends (the node seen NotReady, the replacement seen
created) from watches (``bench/moments.py``): the first moment each test passed, kept as it
came, and the watch let go as soon as every test has passed."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import moments  # noqa: E402


def _node(ready: str, cordoned: bool = False) -> Any:
    return SimpleNamespace(ready=ready, cordoned=cordoned)


TESTS = {
    "not ready": lambda n: n.ready == "False",
    "cordoned": lambda n: n.cordoned,
}


def test_each_test_keeps_the_first_moment_it_passed() -> None:
    m = moments.Moments(TESTS)
    assert not m.offer(_node("True"), at=(1.0, 101.0))
    assert not m.offer(_node("False"), at=(2.0, 102.0))
    assert not m.offer(_node("False"), at=(3.0, 103.0))  # still NotReady: kept at 2.0
    assert m.offer(_node("False", cordoned=True), at=(4.0, 104.0))
    assert m.at("not ready") == (2.0, 102.0)
    assert m.at("cordoned") == (4.0, 104.0)


def test_following_stops_once_every_test_passed_and_lets_the_watch_go() -> None:
    consumed: list[str] = []
    closed = threading.Event()

    def events() -> Iterator[Any]:
        try:
            for ready, cordoned in (("True", False), ("False", False), ("False", True)):
                consumed.append(ready)
                yield _node(ready, cordoned)
            consumed.append("one too many")
            yield _node("True")
        finally:
            closed.set()

    m = moments.Moments(TESTS)
    m.follow(events())
    assert consumed == ["True", "False", "False"]
    assert closed.is_set()  # the stream (and its connection) closed at once
    assert m.wait(0)
    assert m.at("not ready") is not None and m.at("cordoned") is not None
    assert m.at("not ready")[0] <= m.at("cordoned")[0]  # type: ignore[index]


def test_a_watch_that_ends_or_fails_first_says_what_it_missed() -> None:
    m = moments.Moments(TESTS)
    m.follow(iter([_node("False")]))  # ended (the server's timeout) before the cordon
    assert not m.wait(0)
    assert m.at("not ready") is not None and m.at("cordoned") is None

    def broken() -> Iterator[Any]:
        yield _node("True")
        raise ConnectionError("watch cut")

    m = moments.Moments(TESTS)
    m.follow(broken())
    assert not m.wait(0)
    assert isinstance(m.error, ConnectionError)


def test_objects_already_passing_when_listed_are_not_watched_for() -> None:
    asked: list[dict[str, Any]] = []
    node = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    node["spec"] = {"unschedulable": True}
    body = json.dumps({"metadata": {"resourceVersion": "7"}, "items": [node]}).encode()

    def list_fn(**selectors: Any) -> Any:
        asked.append(selectors)
        return SimpleNamespace(data=body)

    raw = {
        "not ready": lambda n: any(
            c["type"] == "Ready" and c["status"] == "False" for c in n["status"]["conditions"]
        ),
        "cordoned": lambda n: n["spec"]["unschedulable"],
    }
    m = moments.watch(list_fn, raw, 5, field_selector="metadata.name=n1")  # no watch begun
    assert m.wait(0)
    # Listed as the API server's JSON, not the client's models, with the caller's selector.
    assert asked == [{"_preload_content": False, "field_selector": "metadata.name=n1"}]
