"""The kube client retries what can pass (5xx, 429, an unreachable server) with backoff and
jitter, gives up after its budget, never retries a conflict or a refusal, and counts every
final error by verb and resource."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from phased.kube.client import Conflict, Invalid, KubeClient, KubeError, NotFound


class FakeResponse:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.reason, self._body = status, "", json.dumps(body).encode()

    async def read(self) -> bytes:
        return self._body


class FakeApi:
    """Stands in for kubernetes.aio's ApiClient: answers from a script, records the calls."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.calls: list[tuple[str, str]] = []

    async def param_serialize(self, **kw: Any) -> tuple[str, str, dict[str, str], Any, None]:
        return (
            kw["method"],
            "https://cluster" + kw["resource_path"],
            kw["header_params"],
            kw["body"],
            None,
        )

    async def call_api(self, method: str, url: str, **_: Any) -> FakeResponse:
        self.calls.append((method, url))
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        status, body = step
        return FakeResponse(status, body)

    async def close(self) -> None:
        return None


def client(
    script: list[Any], errors: list[tuple[str, str]] | None = None
) -> tuple[KubeClient, FakeApi]:
    api = FakeApi(script)
    hook = (lambda verb, res: errors.append((verb, res))) if errors is not None else None
    return KubeClient(api, retries=3, base_delay=0.001, max_delay=0.002, on_error=hook), api  # type: ignore[arg-type]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize("transient", [500, 502, 503, 504, 429])
def test_a_transient_answer_is_retried_until_it_passes(transient: int) -> None:
    kube, api = client([(transient, {}), (transient, {}), (200, {"ok": True})])
    assert run(kube.request("get", "GET", "/api/v1/nodes/a", resource="nodes")) == {"ok": True}
    assert len(api.calls) == 3


def test_an_unreachable_server_is_retried_then_reported_once() -> None:
    errors: list[tuple[str, str]] = []
    kube, api = client([ConnectionRefusedError("down")] * 4, errors)
    with pytest.raises(KubeError) as caught:
        run(kube.request("list", "GET", "/api/v1/nodes", resource="nodes"))
    assert caught.value.status == 0
    assert len(api.calls) == 4  # the first try and three retries
    assert errors == [("list", "nodes")]


@pytest.mark.parametrize(
    ("status", "reason", "error"),
    [
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", Conflict),
        (404, "NotFound", NotFound),
        (422, "Invalid", Invalid),
    ],
)
def test_conflicts_and_refusals_are_not_retried(status: int, reason: str, error: type) -> None:
    errors: list[tuple[str, str]] = []
    kube, api = client([(status, {"reason": reason, "message": "no"})], errors)
    with pytest.raises(error) as caught:
        run(kube.request("patch", "PATCH", "/api/v1/nodes/a", resource="nodes", body={}))
    assert len(api.calls) == 1
    assert errors == [("patch", "nodes")]
    if reason == "AlreadyExists":
        assert caught.value.already_exists


def test_a_request_that_must_not_repeat_is_tried_once() -> None:
    kube, api = client([(503, {})])
    with pytest.raises(KubeError):
        run(
            kube.request(
                "create",
                "POST",
                "/api/v1/namespaces/x/events",
                resource="events",
                body={},
                retry=False,
            )
        )
    assert len(api.calls) == 1
