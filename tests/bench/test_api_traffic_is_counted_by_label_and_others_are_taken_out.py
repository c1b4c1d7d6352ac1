"""The scale bench's API figures: counters read by label from the API server's exposition,
window deltas, other clients' share taken out, and the request keys of the bench's own
calls matching the API server's."""

from __future__ import annotations

import pytest
from bench.apiload import (
    REQUEST_LABELS,
    REQUESTS,
    WATCH_BYTES,
    WATCH_EVENTS,
    WATCH_LABELS,
    count_keys,
    delta,
    describe,
    mean_counts,
    minus,
    read,
    request_key,
    sums,
    top,
)


def _sample(name: str, value: float, **labels: str) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" + f" {value}"


def _request(verb: str, resource: str, subresource: str, code: str, value: float) -> str:
    # Every label the API server puts on apiserver_request_total.
    return _sample(
        "apiserver_request_total",
        value,
        code=code,
        component="apiserver" if resource else "",
        dry_run="",
        group="phased.dev" if resource == "trainingjobs" else "",
        resource=resource,
        scope="cluster" if resource == "nodes" else "namespace" if resource else "",
        subresource=subresource,
        verb=verb,
        version="v1",
    )


EXPOSITION = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
        "# TYPE apiserver_request_total counter",
        _request("PATCH", "nodes", "status", "200", 120),
        _request("PATCH", "nodes", "status", "409", 3),
        _request("LIST", "pods", "", "200", 7),
        _request("PATCH", "trainingjobs", "status", "200", 4),
        _request("GET", "", "/metrics", "200", 2),
        "# HELP apiserver_request_duration_seconds Response latency",
        "# TYPE apiserver_request_duration_seconds histogram",
        _sample("apiserver_request_duration_seconds_bucket", 99, resource="nodes", le="+Inf"),
        _sample("apiserver_request_duration_seconds_sum", 1.5, resource="nodes"),
        _sample("apiserver_request_duration_seconds_count", 99, resource="nodes"),
        "# HELP apiserver_watch_events_total [ALPHA] Number of events sent in watch clients",
        "# TYPE apiserver_watch_events_total counter",
        _sample("apiserver_watch_events_total", 5000, group="", resource="nodes", version="v1"),
        _sample("apiserver_watch_events_total", 80, group="", resource="pods", version="v1"),
        "# HELP apiserver_watch_events_sizes [ALPHA] Watch event size distribution in bytes",
        "# TYPE apiserver_watch_events_sizes histogram",
        _sample("apiserver_watch_events_sizes_bucket", 5000, resource="nodes", le="+Inf"),
        _sample("apiserver_watch_events_sizes_sum", 2.5e07, resource="nodes"),
        _sample("apiserver_watch_events_sizes_count", 5000, resource="nodes"),
        "",
    ]
)


def test_request_counters_are_summed_by_verb_resource_and_subresource_over_codes() -> None:
    counts = sums(EXPOSITION, REQUESTS, REQUEST_LABELS)
    assert counts == {
        ("PATCH", "nodes", "status"): 123,  # 200 and 409 together
        ("LIST", "pods", ""): 7,
        ("PATCH", "trainingjobs", "status"): 4,
        ("GET", "", "/metrics"): 2,
    }


def test_only_the_named_samples_count_not_a_histogram_of_the_same_labels() -> None:
    assert ("LIST", "nodes", "") not in sums(EXPOSITION, REQUESTS, REQUEST_LABELS)
    assert sums(EXPOSITION, "apiserver_request_duration_seconds_count", ("resource",)) == {
        ("nodes",): 99
    }


def test_watch_events_and_bytes_are_read_by_resource_or_by_kind_on_older_servers() -> None:
    assert sums(EXPOSITION, WATCH_EVENTS, WATCH_LABELS) == {("nodes",): 5000, ("pods",): 80}
    assert sums(EXPOSITION, WATCH_BYTES, WATCH_LABELS) == {("nodes",): 25_000_000}
    older = (
        "# TYPE apiserver_watch_events_total counter\n"
        'apiserver_watch_events_total{group="",kind="Node",version="v1"} 9\n'
    )
    assert sums(older, WATCH_EVENTS, WATCH_LABELS) == {("Node",): 9}


def test_several_names_read_at_once_are_what_each_read_alone_gives() -> None:
    wanted = {REQUESTS: REQUEST_LABELS, WATCH_EVENTS: WATCH_LABELS, "apiserver_absent": ("x",)}
    counts = read(EXPOSITION, wanted)
    assert counts == {name: sums(EXPOSITION, name, by) for name, by in wanted.items()}
    assert counts["apiserver_absent"] == {}


def test_a_missing_metric_is_no_counts() -> None:
    assert sums(EXPOSITION, "apiserver_no_such_total", ("verb",)) == {}


def test_a_window_is_what_grew_and_a_new_key_grew_from_zero() -> None:
    before = {("LIST", "pods", ""): 7.0, ("PATCH", "nodes", "status"): 100.0}
    after = {
        ("LIST", "pods", ""): 7.0,
        ("PATCH", "nodes", "status"): 160.0,
        ("POST", "pods", ""): 2.0,
    }
    assert delta(after, before) == {("PATCH", "nodes", "status"): 60, ("POST", "pods", ""): 2}


def test_a_counter_that_went_down_is_a_reset_and_no_figure() -> None:
    with pytest.raises(ValueError, match="reset"):
        delta({("LIST", "pods", ""): 3.0}, {("LIST", "pods", ""): 7.0})
    with pytest.raises(ValueError, match="reset"):
        delta({}, {("LIST", "pods", ""): 7.0})


def test_the_bench_and_a_control_window_are_taken_out_key_by_key() -> None:
    window = {("PATCH", "nodes", "status"): 130.0, ("LIST", "pods", ""): 40.0}
    bench = {("LIST", "pods", ""): 30.0}
    control_per_s = {("PATCH", "nodes", "status"): 2.0, ("PUT", "leases", ""): 0.5}
    operator = minus(minus(window, bench), control_per_s, scale=60)
    # 130 heartbeats - 120 in the control; the bench's 30 lists out; the control's 30
    # lease renewals, absent from this window, come out as -30 rather than vanish.
    assert operator == {
        ("PATCH", "nodes", "status"): 10,
        ("LIST", "pods", ""): 10,
        ("PUT", "leases", ""): -30,
    }


def test_means_count_a_missing_key_as_zero_and_top_is_largest_first() -> None:
    runs = [{("LIST", "nodes", ""): 2.0, ("GET", "pods", ""): 4.0}, {("LIST", "nodes", ""): 4.0}]
    assert mean_counts(runs) == {("LIST", "nodes", ""): 3.0, ("GET", "pods", ""): 2.0}
    assert mean_counts([]) == {}
    assert top({("A", "x", ""): 1.0, ("B", "y", ""): 5.0, ("C", "z", ""): 5.0}, 2) == [
        (("B", "y", ""), 5.0),
        (("C", "z", ""), 5.0),
    ]
    assert describe(("PATCH", "nodes", "status")) == "PATCH nodes/status"
    assert describe(("LIST", "pods", "")) == "LIST pods"


HOST = "https://127.0.0.1:43761"


@pytest.mark.parametrize(
    ("method", "path", "key"),
    [
        ("GET", "/api/v1/namespaces/ns/pods?labelSelector=a%3Db", ("LIST", "pods", "")),
        ("GET", "/api/v1/pods", ("LIST", "pods", "")),
        ("GET", "/api/v1/nodes/h100-001/status", ("GET", "nodes", "status")),
        ("GET", "/api/v1/nodes/h100-001", ("GET", "nodes", "")),
        ("GET", "/api/v1/nodes?watch=true&resourceVersion=5", ("WATCH", "nodes", "")),
        ("PATCH", "/api/v1/nodes/h100-001", ("PATCH", "nodes", "")),
        ("POST", "/api/v1/namespaces", ("POST", "namespaces", "")),
        ("DELETE", "/api/v1/namespaces/bench-60", ("DELETE", "namespaces", "")),
        ("GET", "/api/v1/namespaces/bench-60", ("GET", "namespaces", "")),
        ("DELETE", "/api/v1/namespaces/ns/pods", ("DELETECOLLECTION", "pods", "")),
        (
            "PATCH",
            "/apis/phased.dev/v1alpha1/namespaces/ns/trainingjobs/job-0/status",
            ("PATCH", "trainingjobs", "status"),
        ),
        ("GET", "/metrics", ("GET", "", "/metrics")),
        ("GET", "/apis/phased.dev/v1alpha1", ("GET", "", "/apis/phased.dev/v1alpha1")),
    ],
)
def test_the_benchs_own_calls_are_keyed_as_the_api_server_keys_them(
    method: str, path: str, key: tuple[str, str, str]
) -> None:
    assert request_key(method, HOST + path) == key


def test_calls_are_counted_by_key() -> None:
    keys = [("LIST", "pods", ""), ("GET", "nodes", "status"), ("LIST", "pods", "")]
    assert count_keys(keys) == {("LIST", "pods", ""): 2, ("GET", "nodes", "status"): 1}


def test_heartbeat_keys_are_set_apart_as_noise_and_the_operator_keeps_the_rest() -> None:
    from bench.apiload import split_heartbeats

    window = {
        ("PATCH", "nodes", "status"): 7.0,
        ("PUT", "leases", ""): -3.0,
        ("PATCH", "nodes", ""): 2.0,
        ("GET", "nodes", ""): 1.0,
        ("LIST", "pods", ""): 40.0,
    }
    rest, noise = split_heartbeats(window)
    assert rest == {
        ("PATCH", "nodes", ""): 2.0,
        ("GET", "nodes", ""): 1.0,
        ("LIST", "pods", ""): 40.0,
    }
    assert noise == 4.0
