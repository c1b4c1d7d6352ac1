"""The operator's own worker Pod watch (kube/podwatch.py), against a scripted API server: it
lists every pod carrying a job-uid label, a page at a time (the index's synced gate), then
watches from the list's resourceVersion with the same selector; each event goes into the
pod index and wakes the job whose pods it changed, and only that job, only when it changed
something; a relist wakes the jobs whose pods the watch had missed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phased.core import labels
from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.kube.podwatch import PodWatch, pods_path
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.kube.test_the_node_watch_lists_then_watches_and_drops_heartbeats import (
    HANG,
    FakeApi,
    event,
    node_list,
    until,
    watch_queries,
)
from tests.kube.test_the_pod_index_follows_watch_events_and_answers_and_never_goes_back import (
    pod,
)


def job(uid: str) -> dict[str, Any]:
    return {"metadata": {"name": f"job-{uid}", "namespace": "ml", "uid": uid}, "spec": {}}


def reconciler(api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> tuple[Reconciler, list[str]]:
    kube = KubeClient(api, retries=0, base_delay=0.001, max_delay=0.001)  # type: ignore[arg-type]
    rec = Reconciler(kube, Settings())
    for uid in ("u1", "u2"):
        rec.jobs[uid] = JobEntry(ref=job_ref_from_raw(job(uid)), raw=job(uid))
    woken: list[str] = []
    monkeypatch.setattr(rec, "trigger", lambda uid, *_, **__: woken.append(uid))
    return rec, woken


def test_it_lists_then_watches_the_job_pods_and_wakes_only_the_job_a_change_concerns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(
        lists=[node_list(10, pod("w-0", 5), pod("v-0", 6, uid="u2"))],
        watches=[
            [
                event("MODIFIED", pod("w-0", 5)),  # nothing new
                event("MODIFIED", pod("w-0", 11, phase="Failed")),
                event("ADDED", pod("x-0", 12, uid="someone-else")),
                HANG,
            ]
        ],
    )
    rec, woken = reconciler(api, monkeypatch)

    async def scenario() -> None:
        await rec.pod_watch.start()
        assert rec.pods.synced and [p.name for p in rec.pods.of("u1", "ml")] == ["w-0"]
        assert woken == ["u1", "u2"]  # the first list: both jobs' pods are new to the index
        await until(lambda: rec.pod_watch.events == 3, "three events")
        await rec.pod_watch.stop()

    asyncio.run(scenario())
    list_query = api.requests[0]
    assert list_query == ("list", {"limit": "500", "labelSelector": labels.LABEL_JOB_UID})
    (watching,) = watch_queries(api)
    assert watching["resourceVersion"] == "10"
    assert watching["labelSelector"] == labels.LABEL_JOB_UID
    # The event that changed nothing woke nobody; the failure woke its job; a pod of a job
    # the operator does not know is indexed and wakes nobody.
    assert woken == ["u1", "u2", "u1"]
    assert [p.phase for p in rec.pods.of("u1", "ml")] == ["Failed"]


def test_a_relist_wakes_the_jobs_whose_pods_the_watch_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(
        lists=[
            node_list(10, pod("w-0", 5), pod("v-0", 6, uid="u2")),
            node_list(20, pod("v-0", 6, uid="u2")),  # w-0 deleted while no watch ran
        ],
        watches=[[HANG]],
    )
    rec, woken = reconciler(api, monkeypatch)

    async def scenario() -> None:
        await rec.pod_watch.start()
        woken.clear()
        await rec.relist_pods()
        await rec.pod_watch.stop()

    asyncio.run(scenario())
    assert woken == ["u1"]
    assert rec.pods.of("u1", "ml") == ()


def test_the_periodic_relist_of_pods_waits_for_the_passes_woken_by_a_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(lists=[node_list(10, pod("w-0", 5)), node_list(20)], watches=[[HANG]])
    rec, _ = reconciler(api, monkeypatch)
    order: list[str] = []

    async def quiet() -> None:
        order.append("quiet")

    monkeypatch.setattr(rec, "quiet", quiet)

    async def scenario() -> None:
        await rec.pod_watch.start()
        assert order == []  # the watch's own list does not wait
        await rec.relist_pods()
        await rec.pod_watch.stop()

    asyncio.run(scenario())
    assert order == ["quiet"]
    assert rec.pods.of("u1", "ml") == ()


def test_an_operator_limited_to_namespaces_watches_the_pods_of_each_and_no_others() -> None:
    kube = KubeClient(FakeApi([], []), retries=0)  # type: ignore[arg-type]
    rec = Reconciler(kube, Settings(), namespaces=["ml", "research", "ml"])
    paths = [pods_path(w.namespace) for w in rec.pod_watch.watches if isinstance(w, PodWatch)]
    assert paths == ["/api/v1/namespaces/ml/pods", "/api/v1/namespaces/research/pods"]
    everywhere = Reconciler(kube, Settings())
    watches = everywhere.pod_watch.watches
    assert [pods_path(w.namespace) for w in watches if isinstance(w, PodWatch)] == ["/api/v1/pods"]
