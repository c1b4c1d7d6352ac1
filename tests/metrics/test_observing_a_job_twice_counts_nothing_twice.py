"""observe_job runs after every reconcile, often with the same statuses: no double counts."""

from __future__ import annotations

from tests.metrics.statuses import failure, fresh, training_status, value

JOB = {"namespace": "research", "trainingjob": "llm"}


def test_a_new_failure_is_counted_exactly_once() -> None:
    registry, metrics = fresh()
    before = training_status([failure(1)])
    after = training_status([failure(1), failure(2, reason="NodeNotReady", resumed=None)])
    for _ in range(3):
        metrics.observe_job("research", "llm", before, after, 8, 110)
    metrics.observe_job("research", "llm", after, after, 8, 110)
    assert value(registry, "phased_job_failures_total", **JOB, reason="NodeNotReady") == 1
    # Entry 1 was already in the ledger before: it is not new.
    assert value(registry, "phased_job_failures_total", **JOB, reason="GPUFault") == 0


def test_a_recovery_is_observed_once_when_resumed_appears() -> None:
    registry, metrics = fresh()
    open_ = training_status([failure(7, resumed=None)])
    done = training_status([failure(7, cordoned=5, replaced=65, resumed=365)])
    metrics.observe_job("research", "llm", training_status(), open_, 8, 109)
    assert value(registry, "phased_job_failure_recovery_seconds_count", **JOB) == 0
    metrics.observe_job("research", "llm", open_, done, 8, 110)
    metrics.observe_job("research", "llm", open_, done, 8, 110)
    metrics.observe_job("research", "llm", done, done, 8, 110)
    assert value(registry, "phased_job_failure_recovery_seconds_count", **JOB) == 1
    assert value(registry, "phased_job_failure_recovery_seconds_sum", **JOB) == 365
    assert value(registry, "phased_job_failure_detect_to_cordon_seconds_sum", **JOB) == 5
    assert value(registry, "phased_job_failure_cordon_to_replace_seconds_sum", **JOB) == 60
    assert value(registry, "phased_job_failure_replace_to_resume_seconds_sum", **JOB) == 300
    assert value(registry, "phased_job_failures_total", **JOB, reason="GPUFault") == 1


def test_a_deleted_node_with_no_cordon_still_times_the_recovery() -> None:
    registry, metrics = fresh()
    gone = failure(3, reason="NodeDeleted", cordoned=None, replaced=30, resumed=200)
    metrics.observe_job("research", "llm", training_status(), training_status([gone]), 8, 110)
    assert value(registry, "phased_job_failure_detect_to_cordon_seconds_count", **JOB) == 0
    assert value(registry, "phased_job_failure_cordon_to_replace_seconds_count", **JOB) == 0
    assert value(registry, "phased_job_failure_replace_to_resume_seconds_sum", **JOB) == 170
    assert value(registry, "phased_job_failure_recovery_seconds_sum", **JOB) == 200


def test_restarts_grow_by_the_difference_once() -> None:
    registry, metrics = fresh()
    metrics.observe_job(
        "research", "llm", training_status(restarts=4), training_status(restarts=4), 8, 1
    )
    assert value(registry, "phased_job_restarts_total", **JOB, phase="train") == 0
    for _ in range(2):
        metrics.observe_job(
            "research", "llm", training_status(restarts=4), training_status(restarts=6), 8, 1
        )
    assert value(registry, "phased_job_restarts_total", **JOB, phase="train") == 2


def test_gauges_follow_the_latest_status() -> None:
    registry, metrics = fresh()
    metrics.observe_job("research", "llm", training_status(), training_status(spares=12), 8, 110)
    metrics.observe_job(
        "research", "llm", training_status(), training_status(spares=11, quarantined=1), 8, 96
    )
    assert value(registry, "phased_job_nodes", **JOB, role="spare") == 11
    assert value(registry, "phased_job_nodes", **JOB, role="quarantined") == 1
    assert value(registry, "phased_job_gpus_reserved", **JOB) == (110 + 11) * 8
    assert value(registry, "phased_job_gpus_running", **JOB) == 96 * 8
    assert value(registry, "phased_job_allocation_utilization_ratio", **JOB) == 0.924
    assert value(registry, "phased_job_state", **JOB, state="Running") == 1
    assert value(registry, "phased_job_state", **JOB, state="Recovering") == 0
    assert value(registry, "phased_job_interruption_seconds_total", **JOB) == 1500
    assert value(registry, "phased_job_interruption_budget_seconds", **JOB) == 7200
    assert (
        value(registry, "phased_job_gpu_seconds_total", **JOB, phase="train", role="spare")
        == 20_000 * 3600
    )
    assert value(registry, "phased_job_phase_duration_seconds", **JOB, phase="preprocess") == (
        12 * 86400
    )
    assert value(registry, "phased_job_phase_duration_seconds", **JOB, phase="train") == 10 * 86400


def test_nothing_is_registered_at_import() -> None:
    from prometheus_client import REGISTRY

    import phased.metrics  # noqa: F401

    assert not [n for n in REGISTRY._names_to_collectors if n.startswith("phased_")]


def test_two_registries_hold_two_independent_sets() -> None:
    first, a = fresh()
    second, b = fresh()
    a.reconcile_finished(0.1, error=True)
    a.api_error("create", "pods")
    assert value(first, "phased_reconcile_errors_total") == 1
    assert value(second, "phased_reconcile_errors_total") == 0
    b.event_seen(123.0)
    assert value(second, "phased_watch_last_event_timestamp_seconds") == 123.0
    assert value(first, "phased_api_errors_total", verb="create", resource="pods") == 1
