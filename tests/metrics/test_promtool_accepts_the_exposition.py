"""Prometheus' own linter reads the operator's /metrics page as a scrape would: every family
of a job mid-run (failures, recoveries, restarts, API errors included) passes
`promtool check metrics` (names, units, counter suffixes, help texts)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from phased.metrics import Metrics
from tests.alerts.promtool import promtool_binary, require
from tests.metrics.statuses import exposition, failure, training_status


def test_promtool_check_metrics_finds_nothing_to_say() -> None:
    import subprocess

    binary = require(promtool_binary(), "promtool", "prometheus")
    registry = CollectorRegistry()
    metrics = Metrics.create(registry)
    before = training_status()
    after = training_status([failure(1), failure(2, resumed=None)], restarts=1)
    metrics.observe_job("ml", "llm", before, after, 8, 100)
    metrics.reconcile_finished(0.02, error=False)
    metrics.reconcile_finished(0.5, error=True)
    metrics.api_error("patch", "nodes")
    metrics.event_seen(1_700_000_000.0)
    text = exposition(registry)
    assert "phased_job_failure_recovery_seconds_bucket" in text

    done = subprocess.run(
        [binary, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "" and done.stderr.strip() == "", done.stdout + done.stderr
