"""Lint the exposition the way a Prometheus reviewer would: prefix, suffixes, units, help."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.metrics.statuses import exposition, failure, fresh, training_status

ALLOWED_LABELS = {
    "namespace", "trainingjob", "phase", "role", "gpu_type", "reason", "state", "verb", "resource",
    "le",  # histogram buckets
}  # fmt: skip
# Units Prometheus recommends against (use the base unit instead).
NON_BASE_UNITS = re.compile(
    r"_(milliseconds|microseconds|minutes|hours|days|percent|bytes_kb|kilobytes|megabytes)\b|"
    r"_(ms|us|min|hrs?)(_|$)"
)
NAME = re.compile(r"^phased_[a-z][a-z0-9_]*[a-z0-9]$")


def _families() -> list:  # type: ignore[type-arg]
    registry, metrics = fresh()
    before = training_status()
    after = training_status(
        [failure(1), failure(2, reason="NodeNotReady", resumed=None)], restarts=1
    )
    metrics.observe_job("research", "llm-120b", before, after, 8, 108)
    metrics.observe_job("research", "llm-7b", before, before, 8, 110)
    metrics.reconcile_finished(0.08, error=False)
    metrics.reconcile_finished(2.0, error=True)
    metrics.api_error("patch", "nodes")
    metrics.event_seen(1_740_000_000.0)
    families = list(text_string_to_metric_families(exposition(registry)))
    # prometheus_client's companion "<counter>_created" series are switched off in the
    # Deployment (PROMETHEUS_DISABLE_CREATED_SERIES); they are not ours to lint.
    names = {f.name for f in families}
    return [
        f
        for f in families
        if not (f.name.endswith("_created") and f.name.removesuffix("_created") in names)
    ]


FAMILIES = _families()


def test_there_is_something_to_lint() -> None:
    assert len(FAMILIES) >= 25
    assert all(f.samples for f in FAMILIES if f.name.startswith("phased_job_"))


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_metric_carries_the_one_prefix(family) -> None:  # type: ignore[no-untyped-def]
    assert NAME.match(family.name), family.name
    assert not family.name.startswith("phased_phased")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_counters_end_in_total_and_nothing_else_does(family) -> None:  # type: ignore[no-untyped-def]
    for sample in family.samples:
        if family.type == "counter":
            assert sample.name.endswith(("_total", "_created")), sample.name
        else:
            assert not sample.name.endswith("_total"), f"{sample.name} is a {family.type}"


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_durations_are_in_seconds_and_ratios_are_ratios(family) -> None:  # type: ignore[no-untyped-def]
    assert not NON_BASE_UNITS.search(family.name), f"{family.name}: use a base unit"
    words = family.name.split("_")
    if family.type == "histogram" or {"duration", "wait", "seconds"} & set(words):
        assert family.name.endswith("_seconds"), family.name
    if "utilization" in words:
        assert family.name.endswith("_ratio")
        assert all(0.0 <= s.value <= 1.0 for s in family.samples)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_help_text_says_what_is_counted(family) -> None:  # type: ignore[no-untyped-def]
    assert family.documentation, f"{family.name} has no help"
    assert len(family.documentation) >= 20, family.documentation
    assert family.documentation[0].isupper() or family.documentation[0].isdigit()
    assert family.documentation.rstrip().endswith("."), family.documentation


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_labels_are_from_the_bounded_set(family) -> None:  # type: ignore[no-untyped-def]
    for sample in family.samples:
        assert set(sample.labels) <= ALLOWED_LABELS, (sample.name, sorted(sample.labels))


def test_no_node_or_pod_name_reaches_a_label() -> None:
    values = {v for f in FAMILIES for s in f.samples for v in s.labels.values()}
    assert not [v for v in values if v.startswith("gpu-node-")]


def test_histogram_buckets_reach_from_seconds_to_hours() -> None:
    recovery = next(f for f in FAMILIES if f.name == "phased_job_failure_recovery_seconds")
    edges = sorted(
        float(s.labels["le"])
        for s in recovery.samples
        if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"
    )
    assert edges[0] <= 1.0
    assert edges[-1] >= 4 * 3600.0
    assert 900.0 in edges  # the field's 15-minute response target is a bucket edge
