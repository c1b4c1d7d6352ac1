"""With leader election the operator's client carries the elector's fence: reads always go
out, writes only while the fence says this replica may act (checked before every attempt,
retries included)."""

from __future__ import annotations

import asyncio

import pytest

from phased.kube.client import Fenced, KubeClient
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def _client(script: list[object], allowed: list[bool]) -> tuple[KubeClient, FakeApi]:
    api = FakeApi(script)
    kube = KubeClient(api, retries=3, base_delay=0.001, max_delay=0.002,  # type: ignore[arg-type]
                      fence=lambda: allowed.pop(0) if len(allowed) > 1 else allowed[0])  # fmt: skip
    return kube, api


def test_writes_are_refused_without_being_sent_once_the_fence_closes() -> None:
    kube, api = _client([(200, {}), (200, {})], [False])
    assert asyncio.run(kube.request("get", "GET", "/api/v1/nodes", resource="nodes")) == {}
    for method in ("POST", "PATCH", "PUT", "DELETE"):
        with pytest.raises(Fenced):
            asyncio.run(kube.request("w", method, "/api/v1/nodes/n", resource="nodes"))
    assert api.calls == [("GET", "https://cluster/api/v1/nodes")]


def test_a_retry_is_checked_again() -> None:
    # Open for the first attempt, closed by the time the 503 is retried.
    kube, api = _client([(503, {}), (200, {})], [True, False])
    with pytest.raises(Fenced):
        asyncio.run(kube.request("patch", "PATCH", "/api/v1/nodes/n", resource="nodes"))
    assert len(api.calls) == 1


def test_an_open_fence_changes_nothing() -> None:
    kube, api = _client([(201, {"ok": 1})], [True])
    assert asyncio.run(kube.request("create", "POST", "/x", resource="pods")) == {"ok": 1}
    assert len(api.calls) == 1
