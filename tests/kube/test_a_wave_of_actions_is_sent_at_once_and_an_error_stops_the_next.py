"""The reconciler carries out a plan wave by wave (core.stages): the requests of one wave
are in flight together, a wave starts only when the one before it has ended, and an error
lets its wave finish but stops every wave after it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from phased.api.v1alpha1 import NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.model import CreatePod, DeletePod, JobRef, Plan, QuarantineNode, SetNodeRole
from phased.core.settings import Settings
from phased.kube.client import JSON, KubeError
from phased.reconcile import JobEntry, Reconciler
from tests.kube.fake_cluster import FakeCluster

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-llm")


class SlowCluster(FakeCluster):
    """The fake API server, each request taking a while; it records when each began and
    ended (in order of events), how many were in flight at most, and creates pods."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most = 0
        self.timeline: list[tuple[str, str, str]] = []  # ("begin" | "end", method, path)
        self.failing: set[str] = set()  # paths answered with a 500

    async def request(self, verb: str, method: str, path: str, **kw: Any) -> JSON:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        self.timeline.append(("begin", method, path))
        try:
            await asyncio.sleep(0.01)
            if path in self.failing:
                raise KubeError(500, "InternalError", "the server is unwell", verb, "pods")
            if method == "POST" and path == f"/api/v1/namespaces/{JOB.namespace}/pods":
                name = kw["body"]["metadata"]["name"]
                self.calls.append((method, path))
                self.add_pod(JOB.namespace, name, "")
                return dict(kw["body"])
            return await super().request(verb, method, path, **kw)
        finally:
            self.in_flight -= 1
            self.timeline.append(("end", method, path))


def held(role: str) -> dict[str, str]:
    return {
        labels.LABEL_JOB_UID: JOB.uid,
        labels.LABEL_JOB: JOB.name,
        labels.LABEL_JOB_NAMESPACE: JOB.namespace,
        labels.LABEL_ROLE: role,
        labels.LABEL_INSTALLATION: "default",
    }


def swap_plan(cluster: SlowCluster) -> Plan:
    """What decide answers a lost node with: cordon it, stop the gang, promote the spare,
    start the next generation."""
    cluster.add_node("lost", held("active"))
    cluster.add_node("spare", held("spare"))
    actions: list[Any] = [
        QuarantineNode("lost", "NodeNotReady", "Ready=False", NOW, NOW),
        DeletePod("llm-train-g0-0", force=True, reason="node lost failed"),
        SetNodeRole("spare", NodeRole.ACTIVE),
    ]
    for rank in range(4):
        if rank:
            cluster.add_pod(JOB.namespace, f"llm-train-g0-{rank}", f"n{rank}")
            actions.append(DeletePod(f"llm-train-g0-{rank}", reason="gang restart"))
    cluster.add_pod(JOB.namespace, "llm-train-g0-0", "lost")
    actions += [CreatePod(manifest={"metadata": {"name": f"llm-train-g1-{r}"}}) for r in range(4)]
    return Plan(actions=tuple(actions), status=TrainingJobStatus())


def spans(cluster: SlowCluster, method: str, prefix: str) -> tuple[int, int]:
    """The first begin and the last end of the requests ``method`` on paths ``prefix*``."""
    at = [i for i, (_, m, p) in enumerate(cluster.timeline) if m == method and p.startswith(prefix)]
    return min(at), max(at)


def test_the_requests_of_a_wave_are_in_flight_together_and_waves_follow_each_other() -> None:
    cluster = SlowCluster()
    plan = swap_plan(cluster)
    reconciler = Reconciler(cluster, Settings())  # type: ignore[arg-type]

    asyncio.run(reconciler._act(JobEntry(ref=JOB, raw={}), plan, NOW))

    assert cluster.most >= 4  # four pods deleted, or four created, at once
    deletes = spans(cluster, "DELETE", "/api/v1/namespaces/ml/pods/")
    patches = spans(cluster, "PATCH", "/api/v1/nodes/")
    creates = spans(cluster, "POST", "/api/v1/namespaces/ml/pods")
    assert deletes[1] < spans(cluster, "GET", "/api/v1/nodes/")[0]  # pods leave, then
    assert patches[1] < creates[0]  # nodes change, then pods come
    assert {p["metadata"]["name"] for p in cluster.pods if "g1" in p["metadata"]["name"]} == {
        f"llm-train-g1-{r}" for r in range(4)
    }
    lost = cluster.nodes["lost"]
    assert lost["spec"]["unschedulable"] is True
    assert cluster.nodes["spare"]["metadata"]["labels"][labels.LABEL_ROLE] == "active"


def test_an_error_lets_its_wave_finish_and_stops_the_waves_after_it() -> None:
    cluster = SlowCluster()
    plan = swap_plan(cluster)
    cluster.failing.add("/api/v1/namespaces/ml/pods/llm-train-g0-2")
    reconciler = Reconciler(cluster, Settings())  # type: ignore[arg-type]

    with pytest.raises(KubeError):
        asyncio.run(reconciler._act(JobEntry(ref=JOB, raw={}), plan, NOW))

    deleted = {
        p["metadata"]["name"] for p in cluster.pods if p["metadata"].get("deletionTimestamp")
    }
    assert deleted == {"llm-train-g0-0", "llm-train-g0-1", "llm-train-g0-3"}
    assert cluster.patches() == []  # no node changed
    assert not [c for c in cluster.calls if c[0] == "POST"]  # no worker created
