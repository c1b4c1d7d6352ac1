"""The scale bench times a failure's ends (the node seen NotReady, the replacement seen
created) from watches (``bench/moments.py``): the first moment each test passed, kept as it
came, and the watch let go as soon as every test has passed."""

from __future__ import annotations

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
    listed = SimpleNamespace(
        items=[_node("False", cordoned=True)], metadata=SimpleNamespace(resource_version="7")
    )

    def list_fn(**_: Any) -> Any:
        return listed

    m = moments.watch(list_fn, TESTS, 5)  # no watch begun: it would need an API server
    assert m.wait(0)
