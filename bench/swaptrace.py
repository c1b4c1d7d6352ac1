"""Where a swap's time goes: the operator's trace (``phased run --trace``) read against the
failures a bench injected.

The trace has three kinds of line (``phased.reconcile`` and ``phased.kube.client`` at DEBUG),
each stamped by the log to the millisecond:

- ``node NAME changed, waking NS/JOB``: a change of a node, as the operator took it;
- ``pass NS/JOB began|read|decided: ...|acted|ended in X ms``: the stages of one pass;
- ``METHOD PATH STATUS in X ms for NS/JOB``: one request, logged when its answer came;
- ``collection of generation N took X ms, ...`` (``phased.gc``): a stop of the garbage
  collector, logged as it ended.

For each failure (the node, its job, and the bench's own times: injected, seen NotReady in
the API, replacement pod seen), :func:`timeline` finds when the operator took the node's
change, the pass that answered it, and the first worker pod created after it (the pass
that sent it, the request's start and its answer). :func:`report` gives the median and p99
of each moment, measured from the failure seen in the API, and what the answering pass
spent its time on: its stages and its requests by kind; and the swaps that a periodic
relist of the Nodes or the worker Pods (:func:`relists`: a LIST of the collection sent for
no job) ran beside, apart from the others; and those a collector's stop fell inside
(:func:`collections`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from common import percentile, table

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) DEBUG (phased\.[\w.]+): (.*)$")
_NODE = re.compile(r"^node (\S+) changed, waking (.+)$")
_PASS = re.compile(r"^pass (\S+) (began|read|decided|acted|ended)\b(.*)$")
_REQUEST = re.compile(r"^(GET|POST|PUT|PATCH|DELETE) (\S+) (\S+) in ([\d.]+) ms(?: for (\S+))?$")
_COLLECTION = re.compile(r"^collection of generation (\d) took ([\d.]+) ms\b")


@dataclass(frozen=True)
class Line:
    at: float  # seconds since the epoch, as the log stamped it
    kind: str  # "node", "pass" or "request"
    job: str  # ns/name: the job woken, passed, or sent for ("" if none)
    what: str  # node: its name; pass: its stage; request: "METHOD kind"
    took: float = 0.0  # request: its time in seconds (it started at ``at - took``)
    detail: str = ""


@dataclass(frozen=True)
class Failure:
    """One failure as the bench made it: wall-clock times (``time.time()``)."""

    node: str
    job: str  # ns/name
    injected: float
    visible: float
    replaced: float | None  # the replacement pod seen; None: missed


@dataclass
class Timeline:
    """A failure's moments in seconds since it was visible in the API (None: not found)."""

    seen: float | None = None  # the operator took the node's change
    answer_began: float | None = None  # the first pass of the job after that
    answer_ended: float | None = None
    creating_began: float | None = None  # the pass that sent the first create
    create_sent: float | None = None
    create_answered: float | None = None
    replaced: float | None = None  # the bench saw the new pod
    stages: dict[str, float] = field(default_factory=dict)  # the answering pass's, seconds
    requests: dict[str, tuple[int, float]] = field(default_factory=dict)  # kind: (n, seconds)
    # The job's passes that began after the answering pass ended and before the creating one
    # (which waits behind each): what each decided and how long it took, seconds.
    between: list[tuple[str, float]] = field(default_factory=list)
    # A periodic relist (of the Nodes or the worker Pods) was in flight between the failure
    # seen and its first new worker asked for (:func:`relists`).
    relisted: bool = False
    # The answering pass's actions, seconds from its decide (:func:`_actions`).
    actions: dict[str, float] = field(default_factory=dict)
    # The collector's stops between the failure seen and the first create answered (the
    # bench's sight of the new pod without one): seconds stopped, and the oldest generation.
    stopped: float = 0.0
    generation: int | None = None


def resource_of(path: str) -> str:
    """``/api/v1/namespaces/ns/pods/x`` -> ``pods``; ``.../trainingjobs/x/status`` ->
    ``trainingjobs/status``; ``/api/v1/nodes/x`` -> ``nodes``."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts and parts[0] == "apis":
        parts = parts[3:]  # apis/group/version
    elif parts and parts[0] == "api":
        parts = parts[2:]  # api/v1
    if len(parts) >= 2 and parts[0] == "namespaces" and len(parts) > 2:
        parts = parts[2:]
    resource = parts[0] if parts else "?"
    return f"{resource}/{parts[2]}" if len(parts) > 2 else resource


def parse(text: str) -> list[Line]:
    """The trace lines of an operator's log, in the log's order."""
    lines: list[Line] = []
    for raw in text.splitlines():
        m = _STAMP.match(raw)
        if not m:
            continue
        at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        message = m.group(3)
        if m.group(2) == "phased.reconcile":
            node = _NODE.match(message)
            if node:
                for job in node.group(2).split(", "):
                    lines.append(Line(at, "node", job, node.group(1)))
                continue
            stage = _PASS.match(message)
            if stage:
                lines.append(Line(at, "pass", stage.group(1), stage.group(2), 0.0, stage.group(3)))
        elif m.group(2) == "phased.kube.client":
            request = _REQUEST.match(message)
            if request:
                method, path, _status, ms, job = request.groups()
                what = f"{method} {resource_of(path)}"
                lines.append(Line(at, "request", job or "", what, float(ms) / 1000, path))
        elif m.group(2) == "phased.gc":
            stop = _COLLECTION.match(message)
            if stop:
                what = f"generation {stop.group(1)}"
                lines.append(Line(at, "gc", "", what, float(stop.group(2)) / 1000))
    return lines


def collections(lines: Sequence[Line]) -> list[tuple[float, float, int]]:
    """The collector's stops in the trace, each as (its start, its end, its generation), in
    seconds since the epoch: logged as it ended, it began its time before."""
    return [(x.at - x.took, x.at, int(x.what.split()[-1])) for x in lines if x.kind == "gc"]


# A page of a full list: a LIST of the whole collection, sent for no job (the periodic
# relists and a watch's own lists; a pass's pod lists name their job).
_LISTS = re.compile(r"^/api/v1/(?:namespaces/[^/]+/)?(nodes|pods)$")
# Pages of one list follow one another within this (a relist may wait between them for the
# passes woken by a change: at most a second a page).
_PAGES_APART = 2.0
# After a page's answer, its conversion: counted as part of the list for this long.
_CONVERTING = 0.1


def relists(lines: Sequence[Line]) -> list[tuple[float, float]]:
    """The periodic lists in the trace, each as (its first page sent, its last page's
    answer and conversion), in seconds since the epoch."""
    spans: list[tuple[float, float]] = []
    for x in lines:
        if x.kind != "request" or x.job or not x.what.startswith("GET "):
            continue
        if not _LISTS.match(x.detail.split("?")[0]):
            continue
        start, end = x.at - x.took, x.at + _CONVERTING
        if spans and start - spans[-1][1] < _PAGES_APART:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return spans


def timeline(
    failure: Failure,
    lines: Sequence[Line],
    lists: Sequence[tuple[float, float]] = (),
    stops: Sequence[tuple[float, float, int]] = (),
) -> Timeline:
    """The moments of one failure, read from the trace lines after it was injected;
    ``lists``: the relists in the trace (:func:`relists`); ``stops``: the collector's
    (:func:`collections`)."""
    t = _moments(failure, lines, lists)
    # The swap, for the collector's stops: from the failure seen to its first create
    # answered, or to the bench's sight of the new pod when the trace has no create.
    seen = t.create_answered if t.create_answered is not None else t.replaced
    if seen is not None:
        _stops(t, failure.visible, failure.visible + seen, stops)
    return t


def _moments(
    failure: Failure, lines: Sequence[Line], lists: Sequence[tuple[float, float]]
) -> Timeline:
    t = Timeline()
    zero = failure.visible
    if failure.replaced is not None:
        t.replaced = failure.replaced - zero
    mine = [x for x in lines if x.job == failure.job and x.at >= failure.injected - 0.001]
    seen = next((x for x in mine if x.kind == "node" and x.what == failure.node), None)
    if seen is None:
        return t
    t.seen = seen.at - zero
    passes = [x for x in mine if x.kind == "pass" and x.at >= seen.at]
    began = next((x for x in passes if x.what == "began"), None)
    if began is None:
        return t
    t.answer_began = began.at - zero
    ended = next((x for x in passes if x.what == "ended" and x.at >= began.at), None)
    if ended is not None:
        t.answer_ended = ended.at - zero
        last = began.at
        for stage in (x for x in passes if began.at <= x.at <= ended.at and x.what != "began"):
            t.stages[stage.what] = t.stages.get(stage.what, 0.0) + stage.at - last
            last = stage.at
        for r in mine:
            if r.kind == "request" and began.at <= r.at <= ended.at:
                n, s = t.requests.get(r.what, (0, 0.0))
                t.requests[r.what] = (n + 1, s + r.took)
        t.actions = _actions(failure.node, mine, began.at, ended.at)
    create = next(
        (x for x in mine if x.kind == "request" and x.what == "POST pods" and x.at >= began.at),
        None,
    )
    if create is not None:
        t.create_sent = create.at - create.took - zero
        t.create_answered = create.at - zero
        sent = create.at - create.took
        t.relisted = any(a < sent and b > failure.visible for a, b in lists)
        creating = [x for x in passes if x.what == "began" and x.at <= create.at]
        if creating:
            t.creating_began = creating[-1].at - zero
            if ended is not None:
                t.between = _between(passes, ended, creating[-1])
    return t


def _stops(
    t: Timeline, begin: float, end: float, stops: Sequence[tuple[float, float, int]]
) -> None:
    """Add the collector's stops that overlap ``begin``-``end`` (seconds since the epoch)."""
    for start, stop, generation in stops:
        overlap = min(stop, end) - max(start, begin)
        if overlap > 0:
            t.stopped += overlap
            t.generation = max(generation, t.generation or 0)


def _actions(node: str, mine: Sequence[Line], began: float, ended: float) -> dict[str, float]:
    """When the answering pass's actions landed, in seconds from its ``decided`` line: the
    failed node's change answered (``quarantined``), the next node change sent (the
    promotion, once it landed: ``next_sent``), the last node change answered (``changed``),
    the last list of a node's pods answered (``looked``), the last pod deletion answered
    (``deleted``), and ``acted``; a moment the pass did not have is left out."""
    stages = [x for x in mine if x.kind == "pass" and began <= x.at <= ended]
    decided = next((x.at for x in stages if x.what == "decided"), None)
    acted = next((x.at for x in stages if x.what == "acted"), None)
    if decided is None or acted is None:
        return {}
    sent = [x for x in mine if x.kind == "request" and decided <= x.at <= acted]
    patches = [x for x in sent if x.what == "PATCH nodes"]
    failed = [x for x in patches if x.detail.split("?")[0] == f"/api/v1/nodes/{node}"]
    moments: dict[str, float] = {"acted": acted}
    if failed:
        moments["quarantined"] = failed[0].at
        later = [x.at - x.took for x in patches if x not in failed and x.at > failed[0].at]
        if later:
            moments["next_sent"] = min(later)
    for key, what in (
        ("changed", "PATCH nodes"),
        ("looked", "GET pods"),
        ("deleted", "DELETE pods"),
    ):
        answers = [x.at for x in sent if x.what == what]
        if answers:
            moments[key] = max(answers)
    return {key: at - decided for key, at in moments.items()}


def _between(passes: Sequence[Line], ended: Line, creating: Line) -> list[tuple[str, float]]:
    """The passes of ``passes`` (one job's, in the log's order) that began after the line
    ``ended`` and before ``creating`` began: each one's plan (what ``decided`` said) and
    time (from its ``ended in X ms``). By position in the log, not by stamp: a pass may
    begin in the millisecond the one before it ended."""
    start, stop = passes.index(ended), passes.index(creating)
    found: list[tuple[str, float]] = []
    plan = ""
    for line in passes[start + 1 : stop]:
        if line.what == "began":
            plan = ""
        elif line.what == "decided":
            plan = line.detail.lstrip(": ").strip()
        elif line.what == "ended":
            took = re.search(r"in ([\d.]+) ms", line.detail)
            found.append((plan or "?", float(took.group(1)) / 1000 if took else 0.0))
    return found


_MOMENTS = (
    ("the operator took the node's change", "seen"),
    ("the job's next pass began (the answer)", "answer_began"),
    ("that pass ended", "answer_ended"),
    ("the pass that creates the new workers began", "creating_began"),
    ("its first pod create sent", "create_sent"),
    ("... answered", "create_answered"),
    ("the bench saw the new pod", "replaced"),
)
_STAGES = (
    ("woken -> read (the job, its pods, ...)", "read"),
    ("read -> decided (decide; the claims' pod looks when it claims first)", "decided"),
    ("decided -> acted (the actions)", "acted"),
    ("acted -> ended (the status write; the events too where the pass waits for them)", "ended"),
)


def _ms(values: Iterable[float | None]) -> tuple[int, str, str]:
    got = [v for v in values if v is not None]
    if not got:
        return 0, "-", "-"
    med = sorted(got)[(len(got) - 1) // 2]
    return len(got), f"{1000 * med:.0f}", f"{1000 * percentile(got, 99):.0f}"


def report(timelines: Sequence[Timeline]) -> str:
    """The moments of a swap, the answering pass's stages, its requests by kind (per
    failure: how many, and their time added up — requests sent at once add up to more than
    the time they took together) and its actions as they landed, the job's passes between
    it and the creating pass, and the swaps a periodic relist or a stop of the collector
    fell inside."""
    rows: list[tuple[str, object, str, str]] = []
    for label, key in _MOMENTS:
        n, med, p99 = _ms(getattr(t, key) for t in timelines)
        rows.append((label, n, med, p99))
    text = table(("moment, from the failure seen in the API", "found", "median ms", "p99 ms"), rows)
    answered = [t for t in timelines if t.answer_ended is not None]
    rows = []
    for label, key in _STAGES:
        n, med, p99 = _ms(t.stages.get(key) for t in answered)
        rows.append((label, n, med, p99))
    text += "\n\n" + table(("the answering pass's stage", "passes", "median ms", "p99 ms"), rows)
    kinds = sorted({k for t in answered for k in t.requests})
    rows = []  # the same columns
    for kind in kinds:
        counts = sorted(t.requests.get(kind, (0, 0.0))[0] for t in answered)
        n, med, p99 = _ms(t.requests.get(kind, (0, 0.0))[1] for t in answered)
        rows.append((kind, f"{counts[(len(counts) - 1) // 2]}", med, p99))
    text += "\n\n" + table(
        ("the answering pass's requests", "median count", "median ms (summed)", "p99 ms"), rows
    )
    text += "\n\n" + _actions_report(answered)
    text += "\n\n" + _between_report(timelines) + "\n\n" + _relist_report(timelines)
    return text + "\n\n" + _stops_report(timelines)


def _stops_report(timelines: Sequence[Timeline]) -> str:
    """The swaps by the collector's stops the trace said inside them (a full collection;
    only a younger one of 5 ms or more; none): how many, the time stopped, the reaction."""
    found = [t for t in timelines if t.replaced is not None]
    rows: list[tuple[str, object, str, str, str, str]] = []
    for label, test in (
        ("a full collection (generation 2)", lambda t: t.generation == 2),
        ("only a younger one of 5 ms or more", lambda t: t.generation in (0, 1)),
        ("none", lambda t: t.generation is None),
    ):
        group = [t for t in found if test(t)]
        _, stopped, stopped99 = _ms(t.stopped if t.generation is not None else None for t in group)
        _, react, react99 = _ms(t.replaced for t in group)
        rows.append((label, len(group), stopped, stopped99, react, react99))
    return table(
        (
            "the collector stopped the operator between the failure and the first create",
            "swaps",
            "stopped, median ms",
            "p99 ms",
            "reaction median ms",
            "p99 ms",
        ),
        rows,
    )


_ACTIONS = (
    ("the failed node's change answered (the quarantine)", "quarantined"),
    ("the next node change sent (the promotion, once it landed)", "next_sent"),
    ("the last node change answered", "changed"),
    ("the last list of a node's pods answered", "looked"),
    ("the last pod deletion answered", "deleted"),
    ("the actions ended", "acted"),
)


def _actions_report(answered: Sequence[Timeline]) -> str:
    """The answering pass's actions as they landed, from its decide, and which kind of
    request the actions ended with: the node changes and the looks at nodes' pods (one
    after another: the quarantine, then the promotion and the refill's claim, then the
    looks that follow them), or the survivors' deletions (sent at once, beside them)."""
    rows: list[tuple[str, object, str, str]] = []
    for label, key in _ACTIONS:
        n, med, p99 = _ms(t.actions.get(key) for t in answered)
        rows.append((label, n, med, p99))
    text = table(
        ("the answering pass's actions, from its decide", "passes", "median ms", "p99 ms"), rows
    )
    both = [t.actions for t in answered if "deleted" in t.actions and "changed" in t.actions]
    nodes = sum(1 for a in both if max(a["changed"], a.get("looked", 0.0)) >= a["deleted"])
    return (
        text + f"\n\nThe actions ended with a node change or a look at a node's pods in {nodes} of "
        f"{len(both)} answering passes that had both, with a pod deletion in {len(both) - nodes}."
    )


def _relist_report(timelines: Sequence[Timeline]) -> str:
    """The swaps by whether a periodic relist (its pages asked for and converted) was in
    flight while they were answered: how many, and their reaction and first create sent."""
    found = [t for t in timelines if t.create_sent is not None]
    rows: list[tuple[str, object, str, str, str, str]] = []
    for label, flag in (("a relist in flight", True), ("none", False)):
        group = [t for t in found if t.relisted == flag]
        n, sent, sent99 = _ms(t.create_sent for t in group)
        _, react, react99 = _ms(t.replaced for t in group)
        rows.append((label, n, sent, sent99, react, react99))
    return table(
        (
            "a periodic relist (Nodes, worker Pods) between the failure and the first create",
            "swaps",
            "first create sent, median ms",
            "p99 ms",
            "reaction median ms",
            "p99 ms",
        ),
        rows,
    )


def _between_report(timelines: Sequence[Timeline]) -> str:
    """Two tables: the swaps by how many passes of their job ran between the answering pass
    and the one that created the new workers (each waits behind them), with the gap and
    the reaction; and those passes by what they decided."""
    found = [t for t in timelines if t.creating_began is not None and t.answer_ended is not None]
    groups: dict[str, list[Timeline]] = {}
    for t in found:
        n = len(t.between)
        groups.setdefault(str(n) if n < 3 else "3 or more", []).append(t)
    rows: list[tuple[str, object, str, str, str]] = []
    for key in sorted(groups):
        group = groups[key]
        _, gap, gap99 = _ms((t.creating_began or 0.0) - (t.answer_ended or 0.0) for t in group)
        _, react, _ = _ms(t.replaced for t in group)
        rows.append((key, len(group), gap, gap99, react))
    text = table(
        (
            "the job's passes between the answer and the creating pass",
            "swaps",
            "answer ended -> creating began, median ms",
            "p99 ms",
            "reaction median ms",
        ),
        rows,
    )
    plans: dict[str, list[float]] = {}
    for t in found:
        for plan, took in t.between:
            plans.setdefault(plan, []).append(took)
    rows2 = []
    for plan in sorted(plans, key=lambda p: (-len(plans[p]), p)):
        n, med, p99 = _ms(plans[plan])
        rows2.append((plan, n, med, p99))
    if rows2:
        text += "\n\n" + table(
            ("what those passes decided", "passes", "median ms", "p99 ms"), rows2
        )
    return text
