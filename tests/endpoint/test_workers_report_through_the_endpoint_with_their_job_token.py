"""The report endpoint and the worker helper, over real HTTP on localhost (no cluster): the
job's store of TrainingJobs is a fake that behaves like the API (resourceVersion checks)."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import phased_worker
from phased.api.v1alpha1 import TrainingJobSpec
from phased.core.labels import (
    LABEL_ATTEMPT,
    LABEL_GENERATION,
    LABEL_JOB_UID,
    LABEL_PHASE,
    LABEL_RANK,
)
from phased.core.reports import ANNOTATION_REPORTS, decode, report_token
from phased.core.settings import Settings
from phased.core.workers import pod_name
from phased.endpoint import ReportEndpoint
from phased.metrics import Metrics
from phased.reconcile import JobEntry, Reconciler
from tests.core.builders import JOB, T0, phase, spec

KEY = b"0123456789abcdef0123456789abcdef"
SPEC = spec(phase("train", 2, 2), checkpoint={"report": True})
WORKER_SCOPED = spec(
    phase("train", 2, 2),
    checkpoint={"report": True},
    launcher={"type": "Torchrun", "rendezvous": "C10d"},
    failurePolicy={"restartScope": "Worker"},
)


class FakeJobs:
    """GET and a resourceVersion-guarded annotation patch, like the API server."""

    def __init__(self, conflicts: int = 0) -> None:
        self.status: dict[str, Any] = {}
        self.annotations: dict[str, str] = {}
        self.version = 1
        self.conflicts = conflicts
        self.patches = 0

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        if (namespace, name) != (JOB.namespace, JOB.name):
            return None
        meta = {
            "namespace": namespace,
            "name": name,
            "uid": JOB.uid,
            "resourceVersion": str(self.version),
            "annotations": dict(self.annotations),
        }
        return {"metadata": meta, "status": dict(self.status)}

    async def set_annotation(
        self, namespace: str, name: str, key: str, value: str, resource_version: str
    ) -> bool:
        self.patches += 1
        if self.conflicts > 0:  # a status write got in between
            self.conflicts -= 1
            self.version += 1
            return False
        if resource_version != str(self.version):
            return False
        self.annotations[key] = value
        self.version += 1
        return True


class FakePods:
    """The worker pods of the job, listed by label selector (equality terms only)."""

    def __init__(self) -> None:
        self.pods: list[dict[str, Any]] = []
        self.lists = 0

    def add(
        self, rank: int, generation: int, attempt: int, phase_name: str = "train", ours: bool = True
    ) -> None:
        """A worker of the job, named as Phased names it; ``ours=False``: a pod that only
        carries its labels."""
        owner = {"kind": "TrainingJob", "name": JOB.name, "uid": JOB.uid, "controller": True}
        self.pods.append(
            {
                "metadata": {
                    "name": pod_name(JOB, phase_name, generation, rank, attempt),
                    "namespace": JOB.namespace,
                    "ownerReferences": [owner] if ours else [],
                    "labels": {
                        LABEL_JOB_UID: JOB.uid,
                        LABEL_PHASE: phase_name,
                        LABEL_RANK: str(rank),
                        LABEL_GENERATION: str(generation),
                        LABEL_ATTEMPT: str(attempt),
                    },
                },
                "status": {"phase": "Running"},
            }
        )

    async def select(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        self.lists += 1
        terms = dict(term.split("=", 1) for term in label_selector.split(","))
        return [
            p
            for p in self.pods
            if p["metadata"]["namespace"] == namespace
            and all(p["metadata"]["labels"].get(k) == v for k, v in terms.items())
        ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _environ(port: int, token_file: Path, **extra: str) -> dict[str, str]:
    return {
        "PHASED_REPORT_URL": f"http://127.0.0.1:{port}",
        "PHASED_REPORT_TOKEN_FILE": str(token_file),
        "PHASED_NAMESPACE": JOB.namespace,
        "PHASED_JOB": JOB.name,
        "PHASED_PHASE": "train",
        "PHASED_RESTART_GENERATION": "2",
        "PHASED_ATTEMPT": "0",
        "PHASED_RANK": "0",
        **extra,
    }


def _serve(
    tmp_path: Path,
    body: Callable[[int, Path, FakeJobs, Metrics], None],
    *,
    conflicts: int = 0,
    synced: bool = True,
    token: str | None = None,
    job_spec: TrainingJobSpec = SPEC,
    pods: FakePods | None = None,
) -> FakeJobs:
    """Run the endpoint, call ``body`` (blocking, as a worker would) in a thread."""
    jobs = FakeJobs(conflicts)
    metrics = Metrics.create(CollectorRegistry())
    token_file = tmp_path / "token"
    token_file.write_text(
        (token or report_token(KEY, JOB.namespace, JOB.name, JOB.uid)) + "\n", encoding="utf-8"
    )
    port = _free_port()

    async def main() -> None:
        reconciler = Reconciler(object(), Settings(), metrics, clock=lambda: T0, report_key=KEY)  # type: ignore[arg-type]
        reconciler.job_verbs = jobs  # type: ignore[assignment]
        reconciler.pod_verbs = pods or FakePods()  # type: ignore[assignment]
        reconciler.trigger = lambda uid, delay=0.0: None  # type: ignore[method-assign]
        reconciler.jobs[JOB.uid] = JobEntry(
            ref=JOB, raw={"metadata": {"generation": 1}, "spec": {}}, spec=job_spec
        )
        reconciler.jobs[JOB.uid].spec_generation = JOB.generation
        reconciler.jobs_synced = synced
        endpoint = ReportEndpoint(reconciler, KEY, port, metrics, host="127.0.0.1")
        await endpoint.start()
        try:
            await asyncio.to_thread(body, port, token_file, jobs, metrics)
        finally:
            await endpoint.stop()

    asyncio.run(main())
    return jobs


def _count(metrics: Metrics, kind: str, result: str) -> float:
    return float(metrics.reports.labels(kind, result)._value.get())


def test_a_checkpoint_report_is_written_into_the_job_before_it_is_acknowledged(tmp_path):
    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        env = _environ(port, token_file)
        assert phased_worker.report_checkpoint(1200, "/checkpoints/llm/train/s1200", environ=env)
        store = decode(jobs.annotations[ANNOTATION_REPORTS])
        assert store.checkpoint is not None
        assert (store.checkpoint.step, store.checkpoint.path) == (
            1200,
            "/checkpoints/llm/train/s1200",
        )
        assert (store.checkpoint.generation, store.checkpoint.time) == (2, T0)
        assert phased_worker.report_progress(1250, environ=env)
        store = decode(jobs.annotations[ANNOTATION_REPORTS])
        assert store.progress is not None and store.progress.step == 1250
        assert store.checkpoint.step == 1200
        assert _count(metrics, "checkpoint", "recorded") == 1
        assert _count(metrics, "progress", "recorded") == 1

    _serve(tmp_path, worker)


def test_a_status_write_in_between_makes_the_endpoint_read_again(tmp_path):
    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        assert phased_worker.report_progress(7, environ=_environ(port, token_file))
        assert jobs.patches == 3  # two conflicts, then the write

    _serve(tmp_path, worker, conflicts=2)


REFUSED = [
    # (case, token, extra env, kind and result counted)
    ("a wrong token", "f" * 64, {}, ("other", "unauthorized")),
    ("another job's name", None, {"PHASED_JOB": "other"}, ("other", "unauthorized")),
    ("a phase the job does not have", None, {"PHASED_PHASE": "eval"}, ("progress", "invalid")),
    ("a phase name that is not one", None, {"PHASED_PHASE": "Bad_Phase"}, ("other", "invalid")),
]


@pytest.mark.parametrize(
    ("case", "token", "extra", "counted"), REFUSED, ids=[c[0] for c in REFUSED]
)
def test_a_refused_report_is_not_retried_and_records_nothing(tmp_path, case, token, extra, counted):
    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        env = _environ(port, token_file, **extra)
        assert not phased_worker.report_progress(3, environ=env, timeout=30)
        assert jobs.annotations == {}
        assert _count(metrics, *counted) == 1  # answered once: a 4xx is not retried

    _serve(tmp_path, worker, token=token)


def test_a_worker_of_a_replaced_generation_is_told_to_stop_and_records_nothing(tmp_path):
    # The job restarted its gang (generation 3); a worker of generation 2 ran on, e.g. on a
    # silent node. Its checkpoint must not become the run's latest, and it must stop.
    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        jobs.status = {"phase": "train", "restartGeneration": 3}
        old = _environ(port, token_file)  # PHASED_RESTART_GENERATION=2
        with pytest.raises(phased_worker.Superseded, match="replaced by generation 3"):
            phased_worker.report_checkpoint(120, "/c/step-120", environ=old, timeout=30)
        with pytest.raises(phased_worker.Superseded):
            phased_worker.report_progress(121, environ=old, timeout=30)
        assert jobs.annotations == {} and jobs.patches == 0
        assert _count(metrics, "checkpoint", "superseded") == 1  # answered once, not retried
        current = _environ(port, token_file, PHASED_RESTART_GENERATION="3")
        assert phased_worker.report_checkpoint(105, "/c/step-105", environ=current)
        # A late report of a phase that ended is not a replaced worker: recorded as before.
        jobs.status = {"phase": "validate", "restartGeneration": 0}
        assert phased_worker.report_checkpoint(200, "/c/final", final=True, environ=old)

    _serve(tmp_path, worker)


def test_a_rank_replaced_on_its_own_leaves_its_old_worker_refused_and_told_to_stop(tmp_path):
    # restartScope Worker: rank 1's node went silent, the rank was started again as attempt
    # 1 of the same generation elsewhere. Its attempt-0 worker runs on and must stop; rank 0
    # (never replaced) and the replacement report as usual.
    pods = FakePods()
    pods.add(rank=0, generation=2, attempt=0)
    pods.add(rank=1, generation=2, attempt=0)
    pods.add(rank=1, generation=2, attempt=1)
    pods.add(rank=1, generation=1, attempt=4)  # an older generation's record: not this one

    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        jobs.status = {"phase": "train", "restartGeneration": 2}
        old = _environ(port, token_file, PHASED_RANK="1", PHASED_ATTEMPT="0")
        with pytest.raises(phased_worker.Superseded, match=r"rank 1 attempt 0 .* attempt 1"):
            phased_worker.report_checkpoint(300, "/c/step-300", environ=old, timeout=30)
        assert jobs.annotations == {} and jobs.patches == 0
        assert _count(metrics, "checkpoint", "superseded") == 1
        new = _environ(port, token_file, PHASED_RANK="1", PHASED_ATTEMPT="1")
        assert phased_worker.report_checkpoint(290, "/c/step-290", environ=new)
        assert phased_worker.report_progress(301, environ=_environ(port, token_file))  # rank 0
        store = decode(jobs.annotations[ANNOTATION_REPORTS])
        assert store.checkpoint is not None and store.checkpoint.path == "/c/step-290"

    _serve(tmp_path, worker, job_spec=WORKER_SCOPED, pods=pods)


def test_a_pod_that_only_carries_a_ranks_labels_supersedes_none_of_its_workers(tmp_path):
    # A copy of rank 1's worker (its manifest copied, the attempt label edited) is not the
    # job's: the worker of the newest attempt the job made still reports.
    pods = FakePods()
    pods.add(rank=1, generation=2, attempt=0)
    pods.add(rank=1, generation=2, attempt=5, ours=False)

    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        jobs.status = {"phase": "train", "restartGeneration": 2}
        env = _environ(port, token_file, PHASED_RANK="1", PHASED_ATTEMPT="0")
        assert phased_worker.report_checkpoint(300, "/c/step-300", environ=env)
        assert _count(metrics, "checkpoint", "superseded") == 0

    _serve(tmp_path, worker, job_spec=WORKER_SCOPED, pods=pods)


def test_a_gang_scoped_job_spends_no_pod_list_on_a_report(tmp_path):
    pods = FakePods()

    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        jobs.status = {"phase": "train", "restartGeneration": 2}
        assert phased_worker.report_progress(5, environ=_environ(port, token_file))
        assert pods.lists == 0

    _serve(tmp_path, worker, pods=pods)


def test_a_conflict_from_anything_but_the_endpoint_is_an_ordinary_refusal(tmp_path):
    # Only the endpoint's own "superseded" answer stops a worker; a 409 from a proxy on the
    # way must not end training.
    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"error": "conflict"}'
            self.send_response(409)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        token_file = tmp_path / "token"
        token_file.write_text("t", encoding="utf-8")
        env = _environ(server.server_address[1], token_file)
        assert not phased_worker.report_checkpoint(3, "/c/3", environ=env, timeout=5)
    finally:
        server.shutdown()
        server.server_close()


def test_a_checkpoint_without_its_path_is_refused(tmp_path):
    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        assert not phased_worker.report_checkpoint(3, "", environ=_environ(port, token_file))
        assert jobs.annotations == {}

    _serve(tmp_path, worker)


def test_a_starting_operator_answers_503_and_the_helper_gives_up_after_its_timeout(tmp_path):
    def worker(port: int, token_file: Path, jobs: FakeJobs, metrics: Metrics) -> None:
        assert not phased_worker.report_progress(3, environ=_environ(port, token_file), timeout=1)
        assert _count(metrics, "other", "unavailable") >= 2  # retried
        assert jobs.annotations == {}

    _serve(tmp_path, worker, synced=False)


def test_the_helper_does_nothing_outside_a_reporting_job(tmp_path):
    assert not phased_worker.enabled({})
    assert not phased_worker.report_checkpoint(1, "/c", environ={})
    assert phased_worker.resume_path({}) is None and phased_worker.resume_step({}) is None
    env = {"PHASED_RESUME_FROM": "/c/9", "PHASED_RESUME_STEP": "9"}
    assert (phased_worker.resume_path(env), phased_worker.resume_step(env)) == ("/c/9", 9)
    missing = _environ(_free_port(), tmp_path / "absent")
    assert not phased_worker.report_progress(1, environ=missing)  # no token file: no request


def test_an_unreachable_operator_is_retried_until_the_timeout(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("t", encoding="utf-8")
    env = _environ(_free_port(), token_file)  # nothing listens there
    assert not phased_worker.report_progress(1, environ=env, timeout=1)


def test_the_report_body_is_what_the_docs_show():
    # docs/api.md shows this body; the endpoint's model must accept exactly it.
    from phased.endpoint import ReportBody

    body = {
        "kind": "checkpoint",
        "step": 1200,
        "path": "/checkpoints/llm/train/step-1200",
        "final": False,
        "phase": "train",
        "generation": 1,
        "attempt": 0,
        "rank": 0,
    }
    assert ReportBody.model_validate_json(json.dumps(body)).step == 1200
    with pytest.raises(ValueError):
        ReportBody.model_validate_json(json.dumps({**body, "extra": 1}))
