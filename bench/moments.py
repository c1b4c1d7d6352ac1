"""When the API server first shows an object passing each of some tests, as a watch sees it.

The scale bench times a failure from the Node seen NotReady to the replacement worker seen
created. Read by polls (every 0.05 s for the node, 0.1 s for the pods, each poll a round
trip), each end was seen up to a poll's wait and a round trip late, some 75 ms at the
median at 5,000 nodes for the pod alone (section 4r of RESULTS.md). A watch sees each
change as the API server sends it to every watcher, the operator's included.

Objects are read as the JSON the API server sent (plain dicts), each moment taken as its
line is decoded: turning each event into the client's models first (a pod's dozens of
nested classes) held the moment of the replacement back behind the models of the
survivors' deletions, in a bench process that shares two CPUs with the control plane.

:class:`Moments` is the pure part (what was seen first, and when); :func:`watch` follows
one watch in a thread, from a list's resourceVersion, so nothing that happens between the
list and the watch is missed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

Test = Callable[[Any], bool]


class Moments:
    """The first moment (``time.monotonic()``, ``time.time()``) each test passed, by name."""

    def __init__(self, tests: Mapping[str, Test]) -> None:
        self.tests = dict(tests)
        self.seen: dict[str, tuple[float, float]] = {}
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._ended = threading.Event()

    def offer(self, obj: Any, at: tuple[float, float] | None = None) -> bool:
        """Look at one object as it came (``at``: when; now by default); True once every
        test has passed."""
        moment = at or (time.monotonic(), time.time())
        with self._lock:
            for name, test in self.tests.items():
                if name not in self.seen and test(obj):
                    self.seen[name] = moment
            return len(self.seen) == len(self.tests)

    def follow(self, objects: Iterable[Any]) -> None:
        """Offer each of ``objects`` as it comes until every test has passed or they end
        (an error is kept in ``error``); the iterable is closed after."""
        try:
            for obj in objects:
                if self.offer(obj):
                    break
        except Exception as exc:  # the bench falls back to its polls
            self.error = exc
        finally:
            close = getattr(objects, "close", None)
            if close is not None:
                close()
            self._ended.set()

    def wait(self, timeout: float) -> bool:
        """Wait until every test has passed or the watch ended: whether all passed."""
        self._ended.wait(timeout)
        with self._lock:
            return len(self.seen) == len(self.tests)

    def at(self, name: str) -> tuple[float, float] | None:
        with self._lock:
            return self.seen.get(name)


def watch(
    list_fn: Callable[..., Any], tests: Mapping[str, Test], seconds: int, **selectors: Any
) -> Moments:
    """Follow ``list_fn``'s objects (a list, then a watch from its resourceVersion, for at
    most ``seconds``) in a daemon thread, each as the plain dict the API server sent; an
    object already passing a test when listed is seen as the list came back."""
    from kubernetes import watch as kwatch

    listed = json.loads(list_fn(_preload_content=False, **selectors).data)
    moments = Moments(tests)
    if any([moments.offer(item) for item in listed.get("items") or ()]):
        moments.follow(())  # all passed already: nothing to follow
        return moments
    stream = kwatch.Watch()  # type: ignore[no-untyped-call]

    def objects() -> Iterator[Any]:
        for event in stream.stream(  # type: ignore[no-untyped-call]
            list_fn,
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=seconds,
            deserialize=False,
            **selectors,
        ):
            if event["type"] in ("ADDED", "MODIFIED"):
                yield event["object"]

    threading.Thread(target=moments.follow, args=(objects(),), daemon=True).start()
    return moments
