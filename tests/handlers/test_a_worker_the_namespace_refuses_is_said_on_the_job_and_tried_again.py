"""A worker create (or its Service's, Secret's, claim's) refused by what guards the namespace
— a ResourceQuota, Pod Security Admission, an admission webhook — is said on the job and
tried again.

Before, the pass stopped at the refused create and wrote nothing: the job kept saying what
it said before (or nothing at all), with the reason only in the operator's log, retried
forever. Now the status as it was is written with ``WorkersRefused`` True and the API
server's message, the job's message says it, one Warning event says it, and the pass still
fails (the reconciler's backoff retries it). The first pass whose creates land turns the
condition False. A refusal only a new spec can mend (422) stays ``InvalidSpec``."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from phased import reconcile as module
from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core import refusals
from phased.core.conditions import ConditionType, find
from phased.core.model import CreatePod, Snapshot
from phased.kube.client import Forbidden, KubeClient, KubeError
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.core.builders import SETTINGS, T0, Cluster, nodes, owned, phase, spec
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

QUOTA = (
    'pods "llm-train-g0-r2" is forbidden: exceeded quota: ml-quota, requested: pods=1, '
    "used: pods=2, limited: pods=2"
)
RAW = {
    "apiVersion": "phased.dev/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {
        "name": "llm",
        "namespace": "ml",
        "uid": "uid-llm",
        "resourceVersion": "5",
        "generation": 1,
    },
    "spec": {},
}


def _ready_to_create() -> Cluster:
    """A job whose pool is held and whose next pass creates its three workers."""
    held = {n.name: owned(n, NodeRole.ACTIVE) for n in nodes("h", 3)}
    cluster = Cluster(spec(phase("train", 3, 3)), held)
    plan = cluster.decide()
    assert any(isinstance(a, CreatePod) for a in plan.actions)
    return cluster


class _Pass:
    """One reconcile of the cluster's job: the real decide, the kube side recorded; pod
    creates answer ``create_error`` (or land) and the status write is kept."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cluster: Cluster) -> None:
        self.cluster = cluster
        self.written: list[dict[str, Any]] = []
        self.events: list[tuple[str, str, str]] = []
        self.created: list[str] = []
        self.create_error: KubeError | None = None
        self.service_error: KubeError | None = None
        self.rec = Reconciler(KubeClient(FakeApi([]), retries=0), SETTINGS)  # type: ignore[arg-type]
        raw = dict(RAW, spec=cluster.the_spec.model_dump(by_alias=True, exclude_none=True))
        self.entry = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
        self.rec.jobs["uid-llm"] = self.entry
        monkeypatch.setattr(self.rec.job_verbs, "get", self._get)
        monkeypatch.setattr(self.rec.job_verbs, "set_finalizer", self._true)
        monkeypatch.setattr(self.rec.pod_verbs, "select", self._pods)
        monkeypatch.setattr(self.rec.pod_verbs, "create", self._create)
        monkeypatch.setattr(self.rec.pod_verbs, "ensure_service", self._service)
        monkeypatch.setattr(self.rec.job_verbs, "patch_status", self._patch_status)
        monkeypatch.setattr(self.rec.event_verbs, "post", self._post)
        monkeypatch.setattr(self.rec, "_observe", self._observe)
        monkeypatch.setattr(module, "decide", lambda snap, settings, now: cluster.decide())

    async def _get(self, *_: Any) -> dict[str, Any]:
        return self.entry.raw

    async def _true(self, *_: Any) -> bool:
        return True

    async def _pods(self, *_: Any) -> list[Any]:
        return []

    async def _observe(self, *_: Any) -> Snapshot:
        return self.cluster.snapshot()

    async def _service(self, *_: Any) -> None:
        if self.service_error is not None:
            raise self.service_error
        self.cluster.service = True

    async def _create(self, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        if self.create_error is not None:
            raise self.create_error
        self.created.append(manifest["metadata"]["name"])
        return manifest  # the pod as created

    async def _patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.written.append(status)
        self.cluster.status = TrainingJobStatus.model_validate(status)

    async def _post(self, job: Any, type_: str, reason: str, message: str, now: Any) -> None:
        self.events.append((type_, reason, message))

    def run(self) -> bool:
        async def once() -> bool:
            ok = await self.rec._guarded("uid-llm")
            await self.rec.events_posted()  # posted in the background
            return ok

        return asyncio.run(once())


def _refused(status: TrainingJobStatus) -> Any:
    return find(status.conditions, ConditionType.WORKERS_REFUSED)


def test_a_refused_create_is_said_with_the_api_servers_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = _ready_to_create()
    before = cluster.status
    one = _Pass(monkeypatch, cluster)
    one.create_error = Forbidden(403, "Forbidden", QUOTA, "create", "pods")
    assert one.run() is False  # the pass failed: the reconciler backs off and tries again
    assert len(one.written) == 1
    status = TrainingJobStatus.model_validate(one.written[0])
    cond = _refused(status)
    assert cond is not None and cond.status == "True" and cond.message == QUOTA
    assert "exceeded quota" in status.message
    assert status.phases == before.phases  # the refused plan's status was not written
    assert one.events == [("Warning", refusals.REASON, status.message)]
    assert one.entry.rejected is None  # not InvalidSpec: the namespace, not the spec, refused

    again = _Pass(monkeypatch, cluster)  # the same refusal: no second event
    again.create_error = Forbidden(403, "Forbidden", QUOTA, "create", "pods")
    assert again.run() is False
    assert again.events == []

    landed = _Pass(monkeypatch, cluster)  # the quota was raised: the creates land
    assert landed.run() is True
    assert len(landed.created) == 3
    cond = _refused(cluster.status)
    assert cond is not None and cond.status == "False" and cond.reason == "Created"


def test_a_webhook_denial_is_a_refusal_and_a_server_error_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    denied = 'admission webhook "policy.example.com" denied the request: no GPUs on Sunday'
    cluster = _ready_to_create()
    one = _Pass(monkeypatch, cluster)
    one.create_error = KubeError(400, "BadRequest", denied, "create", "pods")
    assert one.run() is False
    assert [e[1] for e in one.events] == [refusals.REASON]

    cluster = _ready_to_create()
    broken = _Pass(monkeypatch, cluster)
    broken.create_error = KubeError(500, "InternalError", "etcd timeout", "create", "pods")
    assert broken.run() is False
    assert broken.written == [] and broken.events == []


def test_the_workers_service_refused_by_a_quota_is_said_the_same_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quota = 'services "llm" is forbidden: exceeded quota: ml-quota, limited: services=0'
    cluster = _ready_to_create()
    one = _Pass(monkeypatch, cluster)
    one.service_error = Forbidden(403, "Forbidden", quota, "create", "services")
    assert one.run() is False
    assert one.created == []
    cond = _refused(cluster.status)
    assert cond is not None and cond.status == "True" and cond.message == quota
    assert [e[1] for e in one.events] == [refusals.REASON]


def test_a_running_job_refused_its_new_workers_is_pending_not_running() -> None:
    status = TrainingJobStatus(state=JobState.RUNNING, message="phase train running on 3 nodes")
    new, event = refusals.refused(status, QUOTA, T0, 1)
    assert new.state == JobState.PENDING
    assert event is not None and QUOTA in event.message
    finished = status.model_copy(update={"state": JobState.SUCCEEDED, "message": "done"})
    new, _ = refusals.refused(finished, QUOTA, T0, 1)
    assert (new.state, new.message) == (JobState.SUCCEEDED, "done")


def test_a_job_that_waits_holding_nothing_no_longer_says_it_is_refused() -> None:
    cluster = _ready_to_create()
    cluster.status, _ = refusals.refused(cluster.status, QUOTA, T0, 1)
    # its nodes went away meanwhile: it waits in line for a pool, needing no workers
    cluster.nodes = {n.name: replace(n, labels={}, taints=()) for n in nodes("x", 1)}
    cluster.step()
    assert cluster.status.state == JobState.WAITING
    cond = _refused(cluster.status)
    assert cond is not None and cond.status == "False"
