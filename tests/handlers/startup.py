"""The operator's start-up handler run on its own, against a stand-in reconciler: the kopf
settings it leaves behind (what kopf will watch, how it stores state) and the order of what
it started."""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass
from typing import Any

import kopf
from kopf._core.intents.causes import Activity

from phased.core.settings import Settings
from phased.handlers import build_registry


class _NodeWatch:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.listed: list[dict[str, Any]] = []  # stands in for the first list of the Nodes

    async def start(self) -> None:
        self.calls.append("node watch started")
        self.listed = [{"metadata": {"name": f"node-{i}"}} for i in range(3)]


class _PodWatch:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def start(self) -> None:
        self.calls.append("pod watch started")


class _Reconciler:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.calls: list[str] = []
        self.node_watch = _NodeWatch(self.calls)
        self.pod_watch = _PodWatch(self.calls)

    async def relist_jobs(self) -> None:
        self.calls.append("jobs listed")

    async def relist_nodes(self) -> None:
        self.calls.append("nodes relisted")

    def trigger_all(self) -> None:
        return None

    def survey(self) -> None:
        return None


@dataclass
class Collector:
    """The garbage collector as start-up left it: its young threshold, and whether the
    objects of the first Node list were still in its sight."""

    young_threshold: int = 0
    listed_in_sight: bool = True


def started(
    settings: Settings, seen: list[str] | None = None, collector: Collector | None = None
) -> kopf.OperatorSettings:
    """The kopf settings once the start-up handler has run with ``settings``; what it
    started is appended to ``seen``; what it did to the garbage collector goes into
    ``collector``, and is undone (this is the test process's collector)."""
    made: list[_Reconciler] = []

    async def start() -> Any:
        reconciler = _Reconciler(settings)
        if seen is not None:
            reconciler.calls = seen
            reconciler.node_watch.calls = seen
            reconciler.pod_watch.calls = seen
        made.append(reconciler)
        return reconciler

    async def stop() -> None:
        return None

    registry = build_registry(start, stop)
    operator_settings = kopf.OperatorSettings()

    async def run() -> None:
        (startup,) = [
            handler
            for handler in registry._activities.get_all_handlers()
            if handler.activity == Activity.STARTUP
        ]
        await startup.fn(settings=operator_settings)
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()  # the periodic resync started by the handler

    threshold = gc.get_threshold()
    try:
        asyncio.run(run())
        if collector is not None:
            collector.young_threshold = gc.get_threshold()[0]
            listed = {id(o) for r in made for o in r.node_watch.listed}
            collector.listed_in_sight = any(id(o) in listed for o in gc.get_objects())
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
    return operator_settings
