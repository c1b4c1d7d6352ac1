"""The report endpoint: workers tell the operator about completed checkpoints and progress.

``POST /v1/namespaces/<namespace>/trainingjobs/<name>/reports`` with
``Authorization: Bearer <token>`` (the job's token, mounted into its workers from the Secret
Phased creates) and a JSON body::

    {"kind": "checkpoint", "step": 1200, "path": "/checkpoints/llm/train/step-1200",
     "final": false, "phase": "train", "generation": 1, "attempt": 0, "rank": 0}

(``kind: progress`` needs no ``path``). Answers: 200 once the report is written into the job
(so an acknowledged report survives an operator killed the next instant), 401 for a missing
or wrong token or an unknown job (the same answer, so the endpoint tells nobody which jobs
exist), 409 for a report from a generation of the current phase that a gang restart has
replaced (the worker is left behind, e.g. on a silent node: it must stop writing checkpoints;
the helper raises ``Superseded``), 422 for a body that is not a report of one of the job's
phases, 503 while the operator is starting or the API server refuses (the worker helper
retries).

Workers need no ServiceAccount token and no RBAC: the token authenticates them, and it is
good for one job only. The worker helper is ``phased_worker`` (stdlib only).
"""

from __future__ import annotations

import json
import logging
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from phased.api.v1alpha1 import PHASE_NAME_PATTERN
from phased.core.reports import Report, ReportKind, Superseded, token_matches
from phased.kube.client import KubeError
from phased.metrics import Metrics
from phased.reconcile import Reconciler

logger = logging.getLogger(__name__)

MAX_BODY = 16 * 1024
MAX_STEP = 2**53  # JSON numbers stay exact up to here


class ReportBody(BaseModel):
    """What a worker sends (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["checkpoint", "progress"]
    step: int = Field(ge=0, le=MAX_STEP)
    path: str = Field(default="", max_length=1024)
    final: bool = False
    phase: str = Field(pattern=PHASE_NAME_PATTERN, max_length=20)
    generation: int = Field(default=0, ge=0, le=1_000_000)
    attempt: int = Field(default=0, ge=0, le=1_000_000)
    rank: int = Field(default=0, ge=0, le=1_000_000)


def _answer(status: int, **body: object) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(body) + "\n", content_type="application/json"
    )


class ReportEndpoint:
    def __init__(
        self,
        reconciler: Reconciler,
        key: bytes,
        port: int,
        metrics: Metrics | None = None,
        host: str = "0.0.0.0",  # noqa: S104 - workers reach it through a Service
    ) -> None:
        self._reconciler = reconciler
        self._key = key
        self._port = port
        self._metrics = metrics
        self._host = host
        self._runner: web.AppRunner | None = None

    def _count(self, kind: str, result: str) -> None:
        if self._metrics is not None:
            self._metrics.report_received(kind, result)

    async def _post(self, request: web.Request) -> web.Response:
        r = self._reconciler
        namespace = request.match_info["namespace"]
        name = request.match_info["name"]
        if not r.jobs_synced:
            self._count("other", "unavailable")
            return _answer(503, error="the operator is starting; try again")
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        uid = r.job_uid(namespace, name)
        if (
            scheme.lower() != "bearer"
            or uid is None
            or not token_matches(self._key, namespace, name, uid, token.strip())
        ):
            self._count("other", "unauthorized")
            return _answer(401, error="unknown job or wrong token")
        try:
            body = ReportBody.model_validate_json(await request.read())
        except ValidationError as exc:
            self._count("other", "invalid")
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            return _answer(422, error=problems)
        spec = r.job_spec(uid)
        if spec is not None and body.phase not in {p.name for p in spec.phases}:
            self._count(body.kind, "invalid")
            return _answer(422, error=f"the job has no phase {body.phase!r}")
        if body.kind == "checkpoint" and not body.path:
            self._count(body.kind, "invalid")
            return _answer(422, error="a checkpoint report needs its path")
        report = Report(
            kind=ReportKind(body.kind),
            phase=body.phase,
            generation=body.generation,
            attempt=body.attempt,
            rank=body.rank,
            step=body.step,
            time=r.clock(),
            path=body.path,
            final=body.final,
        )
        try:
            recorded = await r.record_report(uid, report)
        except Superseded as exc:
            self._count(body.kind, "superseded")
            return _answer(409, error=str(exc), superseded=True)
        except KubeError as exc:
            logger.warning("report for %s/%s not recorded: %s", namespace, name, exc)
            self._count(body.kind, "unavailable")
            return _answer(503, error="could not record the report; try again")
        if not recorded:
            self._count(body.kind, "unauthorized")
            return _answer(401, error="unknown job or wrong token")
        self._count(body.kind, "recorded")
        return _answer(200, recorded=True, step=body.step)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/v1/namespaces/{namespace}/trainingjobs/{name}/reports", self._post)
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
