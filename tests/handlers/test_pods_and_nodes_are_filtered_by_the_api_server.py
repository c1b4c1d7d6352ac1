"""The Pod watch (and, when configured, the Node watch) asks the API server for our objects
only: a ``labelSelector`` on the watch request, not a filter applied after streaming
every Pod of the cluster."""

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


class _Reconciler:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def relist_jobs(self) -> None:
        return None

    async def relist_nodes(self) -> None:
        return None

    def trigger_all(self) -> None:
        return None

    def survey(self) -> None:
        return None


def _started(settings: Settings) -> kopf.OperatorSettings:
    async def start() -> Any:
        return _Reconciler(settings)

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


def test_nodes_are_filtered_only_when_a_node_selector_is_set() -> None:
    assert _started(Settings()).watching.label_selectors.collect(NODES) == []
    chosen = _started(Settings(node_selector="pool=gpu")).watching.label_selectors
    assert chosen.collect(NODES) == ["pool=gpu"]
    assert chosen.collect(JOBS) == []
