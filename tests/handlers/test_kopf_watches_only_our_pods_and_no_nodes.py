"""The Pod watch asks the API server for our objects only: a ``labelSelector`` on the watch
request, not a filter applied after streaming every Pod of the cluster. Nodes are not
watched through kopf at all (the reconciler's own watch, tests/kube, takes the node
selector); start-up starts that watch, after the jobs are loaded."""

from __future__ import annotations

from kopf._cogs.structs.references import Resource

from phased.core import labels
from phased.core.settings import Settings
from phased.handlers import build_registry
from tests.handlers.startup import started

PODS = Resource("", "v1", "pods", kind="Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", kind="Node", namespaced=False)
JOBS = Resource("phased.dev", "v1alpha1", "trainingjobs", kind="TrainingJob", namespaced=True)


def test_the_pod_watch_carries_the_managed_by_selector() -> None:
    watching = started(Settings()).watching
    assert watching.label_selectors.collect(PODS) == [
        f"{labels.LABEL_MANAGED_BY}={labels.MANAGED_BY}"
    ]


def test_kopf_has_no_node_handler_and_no_node_selector() -> None:
    chosen = started(Settings(node_selector="pool=gpu")).watching.label_selectors
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
    started(Settings(), seen)
    assert seen == ["jobs listed", "node watch started"]
