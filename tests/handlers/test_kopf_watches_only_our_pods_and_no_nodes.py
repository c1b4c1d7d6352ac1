"""The Pod watch asks the API server for our objects only: a ``labelSelector`` on the watch
request, not a filter applied after streaming every Pod of the cluster. Nodes are not
watched through kopf at all (the reconciler's own watch, tests/kube, takes the node
selector); start-up starts that watch, after the jobs are loaded."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
from kopf._cogs.structs.references import Resource
from kopf._core.intents.causes import Activity

from phased.core import labels
from phased.core.settings import Settings
from phased.handlers import build_registry

PODS = Resource("", "v1", "pods", kind="Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", kind="Node", namespaced=False)
JOBS = Resource("phased.dev", "v1alpha1", "trainingjobs", kind="TrainingJob", namespaced=True)


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


def _started(settings: Settings, seen: list[str] | None = None) -> kopf.OperatorSettings:
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


def test_the_pod_watch_carries_the_managed_by_selector() -> None:
    watching = _started(Settings()).watching
    assert watching.label_selectors.collect(PODS) == [
        f"{labels.LABEL_MANAGED_BY}={labels.MANAGED_BY}"
    ]


def test_kopf_has_no_node_handler_and_no_node_selector() -> None:
    chosen = _started(Settings(node_selector="pool=gpu")).watching.label_selectors
    assert chosen.collect(NODES) == []
    assert chosen.collect(JOBS) == []
    registry = build_registry(lambda: None, lambda: None)  # type: ignore[arg-type,return-value]
    watched = {
        handler.selector.any_name
        for handler in registry._watching.get_all_handlers()  # type: ignore[attr-defined]
    }
    assert watched == {"trainingjobs", "pods"}


def test_start_up_loads_the_jobs_then_starts_the_node_watch() -> None:
    seen: list[str] = []
    _started(Settings(), seen)
    assert seen == ["jobs listed", "node watch started"]
