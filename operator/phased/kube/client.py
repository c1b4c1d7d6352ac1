"""A thin async JSON client for the Kubernetes API: the only code that sends requests.

It borrows authentication and TLS from ``kubernetes.aio`` (kubeconfig or in-cluster), speaks
plain dicts (no generated models on the hot path), retries transient failures with backoff
and jitter, and turns HTTP errors into the project's own exceptions.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import aiohttp
from kubernetes.aio import client as aio_client
from kubernetes.aio import config as aio_config

logger = logging.getLogger(__name__)

# Who a request is sent for (a job's ``namespace/name``), named in its trace line: set by
# the caller for the task it runs (a pass), inherited by the tasks that task starts.
ON_BEHALF: ContextVar[str] = ContextVar("on_behalf", default="")

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

ErrorHook = Callable[[str, str], None]  # (verb, resource) -> None


class KubeError(Exception):
    """The API answered with an error (or could not be reached)."""

    def __init__(self, status: int, reason: str, message: str, verb: str, resource: str) -> None:
        super().__init__(f"{verb} {resource}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """409: a resourceVersion precondition failed, or the object already exists."""

    @property
    def already_exists(self) -> bool:
        return self.reason == "AlreadyExists"


class Invalid(KubeError):
    """422: the object was rejected by validation."""


class Forbidden(KubeError):
    pass


class Fenced(KubeError):
    """Not sent: this replica is not the leader, or its acting deadline has passed."""


Fence = Callable[[], bool]  # True while this process may write


_TRANSIENT = {429, 500, 502, 503, 504}


def _kubeconfig_path(explicit: str | None) -> str:
    """The kubeconfig to use: explicit, $KUBECONFIG, ~/.kube/config; empty for in-cluster."""
    path = explicit or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if not path and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        default = os.path.expanduser("~/.kube/config")
        path = default if os.path.exists(default) else ""
    return path


class KubeClient:
    """Async requests against one API server; create with :meth:`connect`."""

    def __init__(
        self,
        api: aio_client.ApiClient,
        *,
        retries: int = 5,
        base_delay: float = 0.2,
        max_delay: float = 5.0,
        timeout: float = 30.0,
        on_error: ErrorHook | None = None,
        fence: Fence | None = None,
    ) -> None:
        self._api = api
        self._fence = fence
        self._retries = retries
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._timeout = timeout
        self._on_error = on_error

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        on_error: ErrorHook | None = None,
        fence: Fence | None = None,
    ) -> KubeClient:
        """Log in from ``kubeconfig`` (or $KUBECONFIG, ~/.kube/config, then in-cluster)."""
        configuration = aio_client.Configuration()
        path = _kubeconfig_path(kubeconfig)
        if path:
            await aio_config.load_kube_config(config_file=path, client_configuration=configuration)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            aio_config.load_incluster_config(client_configuration=configuration)
        else:
            raise aio_config.ConfigException(
                "no kubeconfig: pass --kubeconfig, set KUBECONFIG, or run inside a cluster"
            )
        api = aio_client.ApiClient(configuration=configuration)
        return cls(api, on_error=on_error, fence=fence)

    async def close(self) -> None:
        await self._api.close()

    async def request(
        self,
        verb: str,
        method: str,
        path: str,
        *,
        resource: str,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str | None = None,
        retry: bool = True,
    ) -> JSON:
        """Send one request; retry transient failures; return the decoded JSON body.

        With a fence (leader election), a write is checked against it before every attempt:
        a replica past its acting deadline sends nothing and gets :class:`Fenced`."""
        attempt = 0
        while True:
            if method != "GET" and self._fence is not None and not self._fence():
                raise Fenced(0, "NotLeader", "not holding the leader Lease", verb, resource)
            try:
                return await self._once(method, path, query, body, content_type, verb, resource)
            except KubeError as exc:
                transient = exc.status in _TRANSIENT or exc.status == 0
                if not (retry and transient) or attempt >= self._retries:
                    if self._on_error is not None:
                        self._on_error(verb, resource)
                    raise
            attempt += 1
            delay = min(self._max_delay, self._base_delay * 2**attempt)
            await asyncio.sleep(delay * (0.5 + random.random() / 2))  # noqa: S311 - jitter

    async def _once(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | int | bool] | None,
        body: Any,
        content_type: str | None,
        verb: str,
        resource: str,
    ) -> JSON:
        started = time.perf_counter()
        try:
            response = await self._send(method, path, query, body, content_type, self._timeout)
            raw = await response.read()
        except (TimeoutError, OSError) as exc:
            _trace(method, path, "unreachable", started)
            raise _unreachable(exc, verb, resource) from exc
        except Exception as exc:  # aiohttp client errors and the like: the API is unreachable
            if type(exc).__module__.startswith("aiohttp"):
                _trace(method, path, "unreachable", started)
                raise _unreachable(exc, verb, resource) from exc
            raise
        status = int(response.status)
        _trace(method, path, status, started)
        data = _decoded(raw)
        if 200 <= status < 300:
            return data
        raise _error(status, str(response.reason or ""), data, verb, resource)

    async def stream(
        self,
        verb: str,
        method: str,
        path: str,
        *,
        resource: str,
        query: Mapping[str, str | int | bool] | None = None,
        read_timeout: float = 330.0,
    ) -> Any:
        """Open a streaming request (a watch) and return the open aiohttp response, whose
        ``content`` yields the body as it arrives; the caller releases it. Not retried: a
        watch is restarted by its owner, from where it got to. Only the time between two
        reads is bounded (``read_timeout``), not the whole stream."""
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._timeout, sock_read=read_timeout
        )
        try:
            response = await self._send(method, path, query, None, None, timeout)
            status = int(response.status)
            if 200 <= status < 300:
                return response.response
            raw = await response.read()
        except (TimeoutError, OSError) as exc:
            raise _unreachable(exc, verb, resource) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("aiohttp"):
                raise _unreachable(exc, verb, resource) from exc
            raise
        error = _error(status, str(response.reason or ""), _decoded(raw), verb, resource)
        if status != 410 and self._on_error is not None:  # 410: the watch relists, as designed
            self._on_error(verb, resource)
        raise error

    async def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | int | bool] | None,
        body: Any,
        content_type: str | None,
        request_timeout: float | aiohttp.ClientTimeout,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        params = [
            (k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()
        ]
        _method, url, header_params, serialized, _ = await self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=params or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        return await self._api.call_api(
            method,
            url,
            header_params=header_params,
            body=serialized,
            _request_timeout=request_timeout,
        )


def _trace(method: str, path: str, outcome: int | str, started: float) -> None:
    """One request's line in the trace (DEBUG on this module's logger, ``phased run
    --trace``): as client-go logs a request at ``-v=6``, with the job it was sent for."""
    if logger.isEnabledFor(logging.DEBUG):
        took = 1000 * (time.perf_counter() - started)
        behalf = ON_BEHALF.get()
        logger.debug(
            "%s %s %s in %.1f ms%s", method, path, outcome, took, f" for {behalf}" if behalf else ""
        )


def _unreachable(exc: BaseException, verb: str, resource: str) -> KubeError:
    return KubeError(0, "Unreachable", str(exc) or type(exc).__name__, verb, resource)


def _decoded(raw: bytes) -> JSON:
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {"message": raw[:200].decode(errors="replace")}
    return data if isinstance(data, dict) else {}


def _error(status: int, fallback: str, data: JSON, verb: str, resource: str) -> KubeError:
    """The project's exception for an error answer (``data``: the API's Status, if any)."""
    reason = str(data.get("reason") or fallback)
    message = str(data.get("message") or "")
    error_type: type[KubeError] = {
        404: NotFound,
        409: Conflict,
        422: Invalid,
        403: Forbidden,
    }.get(status, KubeError)
    return error_type(status, reason, message, verb, resource)
