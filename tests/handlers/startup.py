"""The operator's start-up handler run on its own, against a stand-in reconciler: the kopf
settings it leaves behind (what kopf will watch, how it stores state) and the order of what
it started."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
from kopf._core.intents.causes import Activity

from phased.core.settings import Settings
from phased.handlers import build_registry


class _NodeWatch:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def start(self) -> None:
        self.calls.append("node watch started")


class _Reconciler:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.calls: list[str] = []
        self.node_watch = _NodeWatch(self.calls)

    async def relist_jobs(self) -> None:
        self.calls.append("jobs listed")

    async def relist_nodes(self) -> None:
        self.calls.append("nodes relisted")

    def trigger_all(self) -> None:
        return None

    def survey(self) -> None:
        return None


def started(settings: Settings, seen: list[str] | None = None) -> kopf.OperatorSettings:
    """The kopf settings once the start-up handler has run with ``settings``; what it
    started is appended to ``seen``."""

    async def start() -> Any:
        reconciler = _Reconciler(settings)
        if seen is not None:
            reconciler.calls = seen
            reconciler.node_watch.calls = seen
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

    asyncio.run(run())
    return operator_settings
