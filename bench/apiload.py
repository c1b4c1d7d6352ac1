"""What the API server counts, and whose it is: the counters of its ``/metrics`` grouped by
label, their change over a window, the subtraction of other clients' share, and the least
squares slope the scale bench prints under its table.

Pure functions (``bench/scale.py`` scrapes and sleeps; these only compute), unit-tested in
``tests/bench/``. Counts are plain dicts from a label tuple to a number, so a window's figure
is ``delta(after, before)`` and the operator's share of it is
``minus(minus(window, bench_calls), control, scale)``.

The API server's request counter has no client label: every client's requests are in it.
:func:`request_key` keys one of the bench's own calls the way the API server keys it
(verb, resource, subresource), so that the bench can count its calls and take them out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import parse_qs, urlsplit

Key = tuple[str, ...]
Counts = dict[Key, float]

REQUESTS = "apiserver_request_total"
REQUEST_LABELS = ("verb", "resource", "subresource")
# Each event the API server writes to one watcher (so an update seen by four watchers is
# four), and the bytes of those events; the label is "resource" on recent API servers and
# was "kind" before.
WATCH_EVENTS = "apiserver_watch_events_total"
WATCH_BYTES = "apiserver_watch_events_sizes_sum"
WATCH_LABELS = ("resource|kind",)
# A gauge: the long-running requests open now (watches among them), by verb and resource.
LONGRUNNING = "apiserver_longrunning_requests"
# The API server's own time for each request (watches and other long-running ones aside),
# from its receipt to its answer, as cumulative histogram buckets by upper bound ("le").
DURATION = "apiserver_request_duration_seconds_bucket"
DURATION_LABELS = (*REQUEST_LABELS, "le")


def sums(exposition: str, name: str, by: Sequence[str]) -> Counts:
    """The samples named ``name`` in a Prometheus text exposition, summed by the labels
    ``by`` (a sample without one of them counts as ""; ``"a|b"`` is label ``a``, or ``b``
    where ``a`` is missing). Other labels are summed over."""
    return read(exposition, {name: by})[name]


def read(exposition: str, wanted: Mapping[str, Sequence[str]]) -> dict[str, Counts]:
    """:func:`sums` of several sample names (name -> labels to sum by), parsing the
    exposition once (the API server's is megabytes)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, Counts] = {name: {} for name in wanted}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            by = wanted.get(sample.name)
            if by is None:
                continue
            counts = out[sample.name]
            key = tuple(_label(sample.labels, spec) for spec in by)
            counts[key] = counts.get(key, 0.0) + float(sample.value)
    return out


def _label(labels: Mapping[str, str], spec: str) -> str:
    for name in spec.split("|"):
        if name in labels:
            return labels[name]
    return ""


def delta(after: Mapping[Key, float], before: Mapping[Key, float]) -> Counts:
    """How much each counter grew from ``before`` to ``after`` (a key only in ``after`` grew
    from 0). A counter that went down was reset (its process restarted): the window is not
    measurable and this raises ValueError rather than return a wrong figure."""
    out: Counts = {}
    for key, value in after.items():
        grown = value - before.get(key, 0.0)
        if grown < 0:
            raise ValueError(f"counter {key} went down ({before[key]} -> {value}): a reset")
        if grown:
            out[key] = grown
    gone = set(before) - set(after)
    if gone:
        raise ValueError(f"counters {sorted(gone)[:3]} disappeared: a reset")
    return out


def minus(a: Mapping[Key, float], b: Mapping[Key, float], scale: float = 1.0) -> Counts:
    """``a - scale * b`` key by key, over the keys of both (a result may be negative: what
    was taken out can exceed what was there when both are noisy; it is not hidden)."""
    out: Counts = {}
    for key in set(a) | set(b):
        value = a.get(key, 0.0) - scale * b.get(key, 0.0)
        if value:
            out[key] = value
    return out


def scaled(counts: Mapping[Key, float], factor: float) -> Counts:
    return {key: value * factor for key, value in counts.items()}


def total(counts: Mapping[Key, float]) -> float:
    return float(sum(counts.values()))


def mean_counts(many: Sequence[Mapping[Key, float]]) -> Counts:
    """The key-by-key mean of several counts (a key missing from one counts 0 there)."""
    if not many:
        return {}
    keys = set().union(*many)
    return {key: sum(c.get(key, 0.0) for c in many) / len(many) for key in keys}


def top(counts: Mapping[Key, float], n: int = 3) -> list[tuple[Key, float]]:
    """The ``n`` largest entries, largest first (ties by key, so the order is stable)."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def describe(key: Key) -> str:
    """A request key as people write it: ``PATCH nodes/status``, ``LIST pods``."""
    verb, *rest = key
    what = "/".join(part for part in rest if part)
    return f"{verb} {what}".strip()


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``ys`` against ``xs``. Needs two distinct ``xs`` (else
    ``statistics.StatisticsError``, a ValueError)."""
    if len(xs) != len(ys):
        raise ValueError("xs and ys differ in length")
    return float(statistics.linear_regression(xs, ys).slope)


# What simulated kubelets send on their own, with the operator or without: node status and
# Lease heartbeats. The bench's operator runs without leader election and never writes a
# node's status, so none of these is its; what is left of them after the control is the
# noise of the subtraction (heartbeats are periodic, windows are not whole periods).
HEARTBEATS: frozenset[Key] = frozenset(
    {
        ("PATCH", "nodes", "status"),
        ("PUT", "nodes", "status"),
        ("GET", "leases", ""),
        ("PUT", "leases", ""),
    }
)


def buckets(
    after: Mapping[Key, float], before: Mapping[Key, float]
) -> dict[Key, dict[float, float]]:
    """What a window added to the :data:`DURATION` counts (keyed by verb, resource,
    subresource and bound), as one histogram per request key: upper bound (seconds; ``inf``
    last) -> requests within it. A bound that gained nothing is kept (at 0): the quantiles
    interpolate from it."""
    out: dict[Key, dict[float, float]] = {}
    for (*key, le), count in after.items():
        out.setdefault(tuple(key), {})[float(le)] = count - before.get((*key, le), 0.0)
    return {key: counts for key, counts in out.items() if max(counts.values()) > 0}


def merged(
    histograms: Iterable[Mapping[Key, Mapping[float, float]]],
) -> dict[Key, dict[float, float]]:
    """Several windows' histograms as one (their buckets added), for rounds pooled."""
    out: dict[Key, dict[float, float]] = {}
    for histogram in histograms:
        for key, counts in histogram.items():
            mine = out.setdefault(key, {})
            for bound, count in counts.items():
                mine[bound] = mine.get(bound, 0.0) + count
    return out


def histogram_quantile(q: float, cumulative: Mapping[float, float]) -> float:
    """The ``q``-quantile of a histogram's cumulative buckets (upper bound -> count), as
    Prometheus's ``histogram_quantile`` gives it: linear within the bucket it falls in (from
    0 in the first); the highest finite bound when it falls in the ``+Inf`` bucket; NaN for
    an empty histogram."""
    bounds = sorted(cumulative)
    total = cumulative[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return math.nan
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = cumulative[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def split_heartbeats(counts: Mapping[Key, float]) -> tuple[Counts, float]:
    """(the counts without the heartbeat keys, the total of those keys)."""
    rest = {k: v for k, v in counts.items() if k not in HEARTBEATS}
    return rest, float(sum(v for k, v in counts.items() if k in HEARTBEATS))


def request_key(method: str, url: str) -> Key:
    """(verb, resource, subresource) of one HTTP request, as the API server's
    ``apiserver_request_total`` labels it: a GET of a collection is LIST, with ``watch``
    set it is WATCH; a DELETE of a collection is DELETECOLLECTION. A request outside
    ``/api`` and ``/apis`` (``/metrics``, ``/readyz``) has no resource and its path as
    subresource, as the API server records it."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    query = parse_qs(parts.query)
    method = method.upper()
    if segments[:1] == ["api"] and len(segments) >= 2:
        rest = segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 3:
        rest = segments[3:]
    else:
        return (method, "", parts.path or "/")
    if not rest:  # discovery: /api/v1, /apis/group/version
        return (method, "", parts.path)
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]  # a namespaced resource: drop "namespaces/<ns>"
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 else ""
    verb = method
    if method == "GET" and query.get("watch", ["false"])[0] in ("true", "1"):
        verb = "WATCH"
    elif method == "GET" and not name:
        verb = "LIST"
    elif method == "DELETE" and not name:
        verb = "DELETECOLLECTION"
    return (verb, resource, subresource)


def count_keys(keys: Iterable[Key]) -> Counts:
    out: Counts = {}
    for key in keys:
        out[key] = out.get(key, 0.0) + 1
    return out
