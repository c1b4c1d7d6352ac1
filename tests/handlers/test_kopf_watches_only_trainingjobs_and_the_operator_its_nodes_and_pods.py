"""kopf watches TrainingJobs and nothing else. Nodes and the jobs' worker Pods are watched
by the reconciler's own watches (tests/kube: the node selector and the job-uid label are
theirs, sent to the API server), which start-up starts after the jobs are loaded: the Nodes
first, then the Pods."""

from __future__ import annotations

from kopf._cogs.structs.references import Resource

from phased.core.settings import Settings
from phased.handlers import build_registry
from tests.handlers.startup import started

PODS = Resource("", "v1", "pods", kind="Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", kind="Node", namespaced=False)
JOBS = Resource("phased.dev", "v1alpha1", "trainingjobs", kind="TrainingJob", namespaced=True)


def test_kopf_has_no_node_or_pod_handler_and_no_selector() -> None:
    chosen = started(Settings(node_selector="pool=gpu")).watching.label_selectors
    assert chosen.collect(NODES) == []
    assert chosen.collect(PODS) == []
    assert chosen.collect(JOBS) == []
    registry = build_registry(lambda: None, lambda: None)  # type: ignore[arg-type,return-value]
    watched = {
        handler.selector.any_name
        for handler in registry._watching.get_all_handlers()  # type: ignore[attr-defined]
    }
    assert watched == {"trainingjobs"}


def test_start_up_loads_the_jobs_then_starts_the_node_watch_then_the_pod_watch() -> None:
    seen: list[str] = []
    started(Settings(), seen)
    assert seen == ["jobs listed", "node watch started", "pod watch started"]
