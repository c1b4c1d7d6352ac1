"""Report checkpoints and progress from a Phased worker to the operator. Standard library only:
import it (``pip install phased``) or copy this one file next to your training script.

    import phased_worker

    start = phased_worker.resume_step() or 0          # where the last checkpoint left off
    path = phased_worker.resume_path()                # load it (None: start fresh)
    for step in range(start, total):
        train_one_step()
        if step % 100 == 0:
            phased_worker.report_progress(step)       # optional
        if step % 1000 == 0:
            save(f"{ckpt_dir}/step-{step}")           # complete and durable first
            phased_worker.report_checkpoint(step, f"{ckpt_dir}/step-{step}")
    save(...)
    phased_worker.report_checkpoint(total, final_path, final=True)  # the phase's last one

Everything it needs comes from the environment Phased gives every worker when the job has
``spec.checkpoint.report: true``: ``PHASED_REPORT_URL``, ``PHASED_REPORT_TOKEN_FILE``, and
``PHASED_NAMESPACE``, ``PHASED_JOB``, ``PHASED_PHASE``, ``PHASED_RESTART_GENERATION``,
``PHASED_ATTEMPT``, ``PHASED_RANK``. Without them (reports off, or run outside Phased) every
call returns False and does nothing, so the same script runs anywhere.

A report returns True once the operator has written it into the TrainingJob (it then survives
an operator restart). While the operator is unreachable or restarting, the call retries with
backoff for up to ``timeout`` seconds, then returns False: training is never stopped by a
report that could not be sent. Call it from one rank (rank 0) or from all: the operator
keeps the latest.

One answer does stop a worker: ``Superseded``, raised when Phased has already replaced this
worker's generation (a gang restart after a failure). It reaches a worker left behind — on a
node that went silent, its container runs on until the kubelet is back — and it means: stop
now, write and delete nothing more. The checkpoint directory belongs to the new generation,
which resumes from the checkpoint Phased told it; an old worker pruning "old" checkpoints
would delete exactly that one. Prune only after a report returned True (or outside Phased,
``not enabled()``): a worker that cannot reach the operator does not know whether it was
replaced.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Mapping

__all__ = [
    "Superseded",
    "enabled",
    "report_checkpoint",
    "report_progress",
    "resume_path",
    "resume_step",
]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
SUPERSEDED_STATUS = 409


class Superseded(RuntimeError):
    """The operator refused a report: this worker's generation was replaced. Stop."""


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this worker can report (the job has ``checkpoint.report: true``)."""
    env = _env(environ)
    return bool(env.get("PHASED_REPORT_URL") and env.get("PHASED_REPORT_TOKEN_FILE"))


def resume_path(environ: Mapping[str, str] | None = None) -> str | None:
    """The checkpoint this worker should resume from (``PHASED_RESUME_FROM``), if any."""
    return _env(environ).get("PHASED_RESUME_FROM") or None


def resume_step(environ: Mapping[str, str] | None = None) -> int | None:
    """The step of that checkpoint (``PHASED_RESUME_STEP``), if any."""
    value = _env(environ).get("PHASED_RESUME_STEP", "")
    return int(value) if value.isdigit() else None


def report_checkpoint(
    step: int,
    path: str,
    *,
    final: bool = False,
    timeout: float = 60.0,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Tell the operator that the checkpoint of ``step`` at ``path`` is complete.

    ``final=True`` marks the phase's last checkpoint: the phase ends once it is recorded.
    Raises ``Superseded`` when this worker's generation was replaced (see the module).
    """
    return _send(
        {"kind": "checkpoint", "step": int(step), "path": str(path), "final": bool(final)},
        timeout,
        environ,
    )


def report_progress(
    step: int, *, timeout: float = 10.0, environ: Mapping[str, str] | None = None
) -> bool:
    """Tell the operator that training reached ``step`` (no checkpoint). Raises
    ``Superseded`` when this worker's generation was replaced."""
    return _send({"kind": "progress", "step": int(step)}, timeout, environ)


def _number(env: Mapping[str, str], name: str) -> int:
    value = env.get(name, "0")
    return int(value) if value.isdigit() else 0


def _send(body: dict[str, object], timeout: float, environ: Mapping[str, str] | None) -> bool:
    env = _env(environ)
    if not enabled(env):
        return False
    try:
        with open(env["PHASED_REPORT_TOKEN_FILE"], encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError:
        return False
    url = (
        f"{env['PHASED_REPORT_URL'].rstrip('/')}/v1/namespaces/{env.get('PHASED_NAMESPACE', '')}"
        f"/trainingjobs/{env.get('PHASED_JOB', '')}/reports"
    )
    payload = {
        **body,
        "phase": env.get("PHASED_PHASE", ""),
        "generation": _number(env, "PHASED_RESTART_GENERATION"),
        "attempt": _number(env, "PHASED_ATTEMPT"),
        "rank": _number(env, "PHASED_RANK"),
    }
    data = json.dumps(payload).encode()
    deadline = time.monotonic() + max(0.0, timeout)
    delay = 0.5
    while True:
        request = urllib.request.Request(  # noqa: S310 - the operator's own http(s) URL
            url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        left = deadline - time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=max(1.0, min(10.0, left))) as answer:  # noqa: S310
                return 200 <= int(answer.status) < 300
        except urllib.error.HTTPError as exc:
            why = _superseded(exc)
            if why is not None:
                raise Superseded(why) from None
            if exc.code not in RETRY_STATUSES:
                return False  # refused for good (wrong token, not a report of this job)
        except (urllib.error.URLError, OSError, TimeoutError):
            pass  # the operator is restarting or unreachable: try again
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, delay * (0.5 + random.random())))  # noqa: S311 - jitter
        delay = min(delay * 2, 8.0)


def _superseded(exc: urllib.error.HTTPError) -> str | None:
    """The operator's reason when it refused the report as superseded, else None (a 409
    from anything else on the way, a proxy say, is an ordinary refusal)."""
    if exc.code != SUPERSEDED_STATUS:
        return None
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return None
    if not isinstance(body, dict) or body.get("superseded") is not True:
        return None
    return str(body.get("error") or "this worker's generation was replaced")
