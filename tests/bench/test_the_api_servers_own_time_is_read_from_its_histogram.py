"""The scale bench reads the API server's own time for each kind of request from its
``apiserver_request_duration_seconds`` histogram: a window's buckets per request key, rounds
added together, and quantiles interpolated as Prometheus's ``histogram_quantile`` does."""

from __future__ import annotations

import math

from bench.apiload import DURATION, DURATION_LABELS, buckets, histogram_quantile, merged, read

BOUNDS = ("0.005", "0.025", "0.05", "0.1", "+Inf")


def _exposition(counts: dict[tuple[str, str, str], tuple[float, ...]]) -> str:
    """Cumulative buckets by (verb, resource, subresource), split over two label sets the
    bench sums over (the API group's version), as the API server writes them."""
    lines = ["# TYPE apiserver_request_duration_seconds histogram"]
    for (verb, resource, subresource), cumulative in counts.items():
        for version, share in (("v1", 0.25), ("v1beta1", 0.75)):
            for le, count in zip(BOUNDS, cumulative, strict=True):
                lines.append(
                    "apiserver_request_duration_seconds_bucket{"
                    f'component="apiserver",dry_run="",group="",le="{le}",'
                    f'resource="{resource}",scope="resource",subresource="{subresource}",'
                    f'verb="{verb}",version="{version}"'
                    "} " + str(count * share)
                )
    return "\n".join(lines) + "\n"


def _read(counts: dict[tuple[str, str, str], tuple[float, ...]]) -> dict[tuple[str, ...], float]:
    return read(_exposition(counts), {DURATION: DURATION_LABELS})[DURATION]


def test_a_windows_buckets_are_what_it_added_with_the_empty_bounds_kept() -> None:
    before = _read({("DELETE", "pods", ""): (4, 8, 8, 8, 8), ("GET", "nodes", ""): (2, 2, 2, 2, 2)})
    after = _read(
        {("DELETE", "pods", ""): (4, 10, 16, 20, 20), ("GET", "nodes", ""): (2, 2, 2, 2, 2)}
    )
    window = buckets(after, before)
    # GET nodes gained nothing: no histogram; DELETE pods keeps its first bound at 0.
    assert window == {
        ("DELETE", "pods", ""): {0.005: 0.0, 0.025: 2.0, 0.05: 8.0, 0.1: 12.0, math.inf: 12.0}
    }


def test_quantiles_are_interpolated_within_the_bucket_they_fall_in() -> None:
    cumulative = {0.005: 0.0, 0.025: 2.0, 0.05: 8.0, 0.1: 12.0, math.inf: 12.0}
    # The median: rank 6 of 12 falls in (0.025, 0.05], 4 of its 6 requests in.
    assert math.isclose(histogram_quantile(0.5, cumulative), 0.025 + 0.025 * 4 / 6)
    # p99: rank 11.88 in (0.05, 0.1], 3.88 of its 4 in.
    assert math.isclose(histogram_quantile(0.99, cumulative), 0.05 + 0.05 * 3.88 / 4)
    # The first bucket interpolates from 0.
    assert math.isclose(histogram_quantile(0.5, {0.1: 10.0, math.inf: 10.0}), 0.05)


def test_a_quantile_in_the_open_bucket_is_the_highest_bound_and_none_without_requests() -> None:
    assert histogram_quantile(0.99, {0.1: 5.0, 0.2: 9.0, math.inf: 10.0}) == 0.2
    assert math.isnan(histogram_quantile(0.5, {0.1: 0.0, math.inf: 0.0}))
    assert math.isnan(histogram_quantile(0.5, {}))


def test_rounds_pool_by_adding_their_buckets() -> None:
    one = {("POST", "pods", ""): {0.05: 1.0, math.inf: 2.0}}
    two = {("POST", "pods", ""): {0.05: 3.0, math.inf: 3.0}, ("PATCH", "nodes", ""): {0.1: 1.0}}
    assert merged([one, two]) == {
        ("POST", "pods", ""): {0.05: 4.0, math.inf: 5.0},
        ("PATCH", "nodes", ""): {0.1: 1.0},
    }
