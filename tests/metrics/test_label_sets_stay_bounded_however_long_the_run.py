"""A 100-day run piles up ledger entries and pods; the number of series must not follow."""

from __future__ import annotations

from tests.metrics.statuses import failure, fresh, samples, training_status

REASONS = [
    "NodeNotReady",
    "GPUFault",
    "GPUCapacityDropped",
    "NodeDeleted",
    "NodeFlapping",
    "WorkerFailed",
]


def _ledger(n: int) -> list[dict[str, object]]:
    return [
        failure(i, reason=REASONS[i % len(REASONS)], detected=i * 3600) for i in range(1, n + 1)
    ]


def _series_after(n: int) -> int:
    registry, metrics = fresh()
    before = training_status()
    metrics.observe_job("research", "llm", before, training_status(_ledger(n)), 8, 110)
    # ... and once more with a pool of n nodes, as if the job had grown to n workers.
    big = training_status(_ledger(n), active=n, spares=n // 10)
    metrics.observe_job("research", "llm", training_status(_ledger(n)), big, 8, n)
    return len(samples(registry))


def test_five_hundred_failures_add_no_series_over_five() -> None:
    assert _series_after(500) == _series_after(5)


def test_a_reason_nobody_foresaw_is_counted_as_other() -> None:
    registry, metrics = fresh()
    odd = [failure(i, reason=f"Vendor{i}Fault") for i in range(1, 200)]
    metrics.observe_job("research", "llm", training_status(), training_status(odd), 8, 110)
    reasons = {
        s.labels["reason"] for s in samples(registry) if s.name == "phased_job_failures_total"
    }
    assert reasons == {*REASONS, "Other"}


def test_series_grow_with_jobs_and_shrink_when_they_are_forgotten() -> None:
    registry, metrics = fresh()
    empty = len(samples(registry))
    for i in range(20):
        metrics.observe_job("ns", f"job-{i}", training_status(), training_status(_ledger(3)), 8, 1)
    per_job = (len(samples(registry)) - empty) / 20
    assert per_job < 150, f"{per_job} series per job"
    for i in range(20):
        metrics.forget_job("ns", f"job-{i}")
    assert len(samples(registry)) == empty
    assert not [s for s in samples(registry) if s.labels.get("trainingjob", "").startswith("job-")]
