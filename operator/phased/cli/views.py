"""What ``kubectl phased`` shows, as pure functions: API objects in, plain values and text out.

Each command has a *view* (a JSON-ready dict or list, what ``-o json`` prints) and a *render*
(the view as text for a terminal). No I/O and no clock: ``now`` is a parameter. Times are UTC.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from phased.api.durations import format_duration
from phased.api.v1alpha1 import FailureRecord, PhaseRecord, TrainingJobStatus
from phased.core import labels
from phased.core.quarantine import decode_quarantine
from phased.core.times import format_time, parse_time

JSON = dict[str, Any]

# Events whose story the status already tells (with exact times that never expire): the
# timeline takes these from the status and leaves the events out.
TOLD_BY_STATUS = frozenset(
    {"PhaseStarted", "PhaseCompleted", "JobSucceeded", "NodeFailed", "NodeQuarantined",
     "SparePromoted"}
)  # fmt: skip
ROLES = ("active", "spare", "quarantined")


# -- small formatters ------------------------------------------------------------------------


def duration(seconds: float | None) -> str:
    """``2.4s`` under ten seconds, else ``12m5s``, ``3h2m``, ``2d4h`` (two units at most)."""
    if seconds is None:
        return "-"
    if seconds <= 0:
        return "0s"
    if seconds < 10:
        return f"{seconds:.1f}s"
    text = format_duration(seconds)
    units = [u for u in "dhms" if u in text]
    if len(units) <= 2:
        return text
    # keep the two largest units, rounded down: 1d2h3m4s -> 1d2h
    head = text[: text.index(units[1]) + 1]
    return head


def when(text: str | None) -> str:
    """An instant as ``2026-12-01 05:30:12`` (tenths of a second when the status has them)."""
    moment = parse_time(text)
    if moment is None:
        return "-"
    shown = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        shown += f".{moment.microsecond // 100000}"
    return shown


def _seconds(start: str | None, end: str | None) -> float | None:
    a, b = parse_time(start), parse_time(end)
    if a is None or b is None:
        return None
    return max((b - a).total_seconds(), 0.0)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], right: set[int]) -> list[str]:
    """Columns padded to their widest cell; ``right`` holds the columns aligned right."""
    cells = [list(header), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        parts = [
            row[i].rjust(widths[i]) if i in right else row[i].ljust(widths[i])
            for i in range(len(row))
        ]
        lines.append("  ".join(parts).rstrip())
    return lines


def to_json(view: Any) -> str:
    return json.dumps(view, indent=2, sort_keys=False)


# -- kubectl phased status ---------------------------------------------------------------------


def _status(job: Mapping[str, Any]) -> TrainingJobStatus:
    return TrainingJobStatus.model_validate(job.get("status") or {})


def _spec_phases(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    phases = (job.get("spec") or {}).get("phases") or []
    return [p for p in phases if isinstance(p, Mapping) and p.get("name")]


def _phase_row(
    name: str, spec: Mapping[str, Any] | None, record: PhaseRecord | None, until: str
) -> JSON:
    nodes = (spec or {}).get("nodes") or {}
    row: JSON = {
        "name": name,
        "state": record.state.value if record else "Pending",
        "gpuType": (record.gpu_type if record else None) or None,
        "acceptedGpuTypes": list((spec or {}).get("gpuTypes") or []),
        "minNodes": nodes.get("min"),
        "maxNodes": nodes.get("max"),
        "nodes": record.nodes if record else 0,
        "maxNodesSeen": record.max_nodes_seen if record else 0,
        "startTime": record.start_time if record else None,
        "endTime": record.end_time if record else None,
        "durationSeconds": None,
        "restarts": record.restarts if record else 0,
        "gpuHours": record.gpu_hours if record else 0.0,
        "activeGpuHours": record.active_gpu_hours if record else 0.0,
        "spareGpuHours": record.spare_gpu_hours if record else 0.0,
        "busyGpuHours": record.busy_gpu_hours if record else 0.0,
        "cost": record.cost if record else 0.0,
        "waitingSeconds": record.waiting_seconds if record else 0.0,
    }
    if record and record.start_time:
        row["durationSeconds"] = _seconds(record.start_time, record.end_time or until)
    return row


def status_view(job: Mapping[str, Any], now: datetime) -> JSON:
    """Everything ``kubectl phased status`` shows, as plain values (``-o json``)."""
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    status = _status(job)
    until = status.completion_time or format_time(now)
    records = {r.name: r for r in status.phases}
    phases = [_phase_row(p["name"], p, records.get(p["name"]), until) for p in _spec_phases(job)]
    listed = {p["name"] for p in phases}
    phases += [_phase_row(r.name, None, r, until) for r in status.phases if r.name not in listed]
    checkpoint = spec.get("checkpoint") or {}
    acc = status.accounting
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "state": status.state.value,
        "phase": status.phase,
        "message": status.message,
        "startTime": status.start_time,
        "completionTime": status.completion_time,
        "elapsedSeconds": _seconds(status.start_time, until),
        "restarts": status.restarts,
        "restartGeneration": status.restart_generation,
        "worldSize": status.world_size,
        "phases": phases,
        "pool": {
            "active": list(status.pool.active),
            "spare": list(status.pool.spares),
            "quarantined": list(status.pool.quarantined),
        },
        "sparesWanted": int((spec.get("spares") or {}).get("count") or 0),
        "gpuHours": acc.gpu_hours,
        "busyGpuHours": acc.busy_gpu_hours,
        "cost": acc.cost,
        "estimatedRemainingCost": acc.estimated_remaining_cost,
        "currency": acc.currency,
        "accountedAt": acc.accounted_at,
        "utilizationPercent": {
            "allocation": status.utilization.allocation,
            "active": status.utilization.active,
            "current": status.utilization.current,
        },
        "interruption": {
            "usedSeconds": status.interruption.used_seconds,
            "budgetSeconds": status.interruption.budget_seconds,
            "openSince": status.interruption.open_since,
        },
        "failures": len(status.failures),
        "openFailures": sum(1 for f in status.failures if not f.resumed),
        "checkpoint": {
            "interval": checkpoint.get("interval", "1h"),
            "path": checkpoint.get("path", "/checkpoints"),
        },
        "conditions": [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "since": c.last_transition_time,
            }
            for c in status.conditions
        ],
    }


def _money(amount: float, currency: str) -> str:
    return f"{amount:,.2f} {currency}"


def render_status(view: Mapping[str, Any]) -> str:
    """The status view as text for a terminal."""
    cur = view["currency"]
    lines = [f"TrainingJob {view['namespace']}/{view['name']}: {view['state']}"]
    phases = view["phases"]
    if view["phase"]:
        index = next((i for i, p in enumerate(phases) if p["name"] == view["phase"]), None)
        where = f" ({index + 1} of {len(phases)})" if index is not None else ""
        lines[0] += f", phase {view['phase']}{where}"
    if view["message"]:
        lines.append(f"  {view['message']}")
    took = duration(view["elapsedSeconds"])
    if not view["startTime"]:
        ran = "not started yet"
    elif view["completionTime"]:
        ran = f"ended {when(view['completionTime'])}, took {took}"
    else:
        ran = f"{took} so far"
    lines.append(
        f"  started {when(view['startTime'])} (UTC), {ran}" if view["startTime"] else f"  {ran}"
    )
    lines.append(
        f"  GPU-hours {view['gpuHours']:,.2f} (busy {view['busyGpuHours']:,.2f}), "
        f"cost so far {_money(view['cost'], cur)}, "
        f"estimated remaining {_money(view['estimatedRemainingCost'], cur)}"
    )
    util = view["utilizationPercent"]
    lines.append(
        f"  utilization: {util['allocation']:.1f}% of reserved GPU time, "
        f"{util['active']:.1f}% of the active pool's, {util['current']:.1f}% now"
    )
    inter = view["interruption"]
    budget = inter["budgetSeconds"]
    share = f" ({100 * inter['usedSeconds'] / budget:.1f}%)" if budget else ""
    open_now = f"; interrupted since {when(inter['openSince'])}" if inter["openSince"] else ""
    lines.append(
        f"  interruptions: {duration(inter['usedSeconds'])} of a {duration(budget)} budget"
        f"{share}; {view['failures']} failure(s), {view['restarts']} restart(s){open_now}"
    )

    lines += ["", "PHASES (UTC)"]
    rows = []
    for p in phases:
        size = f"{p['minNodes']}-{p['maxNodes']}" if p["minNodes"] is not None else "-"
        started = p["startTime"] is not None
        rows.append(
            [
                p["name"],
                p["state"],
                p["gpuType"] or ("CPU" if started and not p["acceptedGpuTypes"] else "-"),
                size,
                str(p["nodes"]) if started else "-",
                when(p["startTime"]),
                when(p["endTime"]),
                duration(p["durationSeconds"]),
                str(p["restarts"]) if started else "-",
                f"{p['gpuHours']:,.2f}" if started else "-",
                f"{p['cost']:,.2f}" if started else "-",
            ]
        )
    header = ["PHASE", "STATE", "GPU", "MIN-MAX", "NODES", "STARTED", "ENDED", "TOOK", "RESTARTS",
              "GPU-HOURS", f"COST ({cur})"]  # fmt: skip
    lines += ["  " + line for line in _table(header, rows, right={4, 8, 9, 10})]

    pool = view["pool"]
    title = f"POOL (phase {view['phase']})" if view["phase"] else "POOL"
    lines += ["", title]
    wanted = {"spare": f"  ({view['sparesWanted']} wanted)"} if view["sparesWanted"] else {}
    for role in ROLES:
        names = pool[role]
        shown = ", ".join(names) if names else "-"
        lines.append(f"  {role:<12} {len(names):>4}  {shown}{wanted.get(role, '')}")

    ck = view["checkpoint"]
    lines += [
        "",
        f"CHECKPOINTS  every {ck['interval']} to {ck['path']} (written by the workers); after a "
        f"restart they resume from the latest (restart generation {view['restartGeneration']})",
    ]
    notable = [c for c in view["conditions"] if c["status"] == "True" or c["message"]]
    if notable:
        lines += ["", "CONDITIONS"]
        for c in notable:
            text = f": {c['message']}" if c["message"] else ""
            lines.append(f"  {c['type']}={c['status']} ({c['reason']}) since {when(c['since'])}"
                         f"{text}")  # fmt: skip
    if view["failures"]:
        lines += [
            "",
            f"See the failures in order: kubectl phased timeline {view['name']} "
            f"-n {view['namespace']}",
        ]
    return "\n".join(lines) + "\n"


# -- kubectl phased timeline -------------------------------------------------------------------


def _entry(
    time: str | None, kind: str, text: str, *, source: str = "status", **extra: Any
) -> JSON | None:
    if parse_time(time) is None:
        return None
    return {"time": time, "kind": kind, "text": text, "source": source, **extra}


def _failure_entries(f: FailureRecord) -> list[JSON | None]:
    where: dict[str, Any] = {"node": f.node, "failure": f.id, "phase": f.phase or None}
    detail = f": {f.message}" if f.message else ""
    after = _seconds
    entries = [
        _entry(f.detected, "NodeFailed", f"node {f.node} failed, {f.reason}{detail}", **where),
        _entry(
            f.cordoned,
            "NodeCordoned",
            f"node {f.node} cordoned and quarantined "
            f"(+{duration(after(f.detected, f.cordoned))} after detection)",
            **where,
        ),
    ]
    if f.replaced_by:
        since = f.cordoned or f.detected
        before = (replaced := parse_time(f.replaced)) is not None and replaced < (
            parse_time(since) or replaced
        )
        # A node in trouble swapped out before its grace ran out was replaced before it
        # was cordoned (it failed as a spare).
        how = "while it was in trouble" if before else f"(+{duration(after(since, f.replaced))})"
        entries.append(
            _entry(
                f.replaced,
                "SpareSwappedIn",
                f"spare {f.replaced_by} swapped in for {f.node} {how}",
                replacedBy=f.replaced_by,
                **where,
            )
        )
    entries.append(
        _entry(
            f.resumed,
            "TrainingResumed",
            f"training resumed after the loss of {f.node}: "
            f"interrupted {duration(after(f.detected, f.resumed))}",
            **where,
        )
    )
    return entries


def _event_entry(event: Mapping[str, Any]) -> JSON | None:
    reason = str(event.get("reason") or "")
    if reason in TOLD_BY_STATUS:
        return None
    stamp = event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp")
    text = str(event.get("message") or "")
    count = int(event.get("count") or 1)
    if count > 1:
        text += f" (x{count})"
    return _entry(
        str(stamp) if stamp else None,
        reason or "Event",
        text,
        source="event",
        type=str(event.get("type") or "Normal"),
    )


def timeline_view(job: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """The run in time order: phases, every failure as detect → cordon → swap → resume,
    restarts and the other events. Entries at the same instant keep their causal order."""
    status = _status(job)
    found: list[JSON | None] = [_entry(status.start_time, "JobStarted", "job started")]
    for r in status.phases:
        gpu = r.gpu_type or "CPU"
        where: dict[str, Any] = {"phase": r.name}
        found.append(
            _entry(r.start_time, "PhaseStarted", f"phase {r.name} started on {gpu} nodes", **where)
        )
        took = duration(_seconds(r.start_time, r.end_time))
        found.append(
            _entry(
                r.end_time,
                "PhaseEnded",
                f"phase {r.name} {r.state.value} after {took}: up to {r.max_nodes_seen} nodes, "
                f"{r.restarts} restart(s), {r.gpu_hours:,.2f} GPU-hours, "
                f"{r.cost:,.2f} {status.accounting.currency}",
                **where,
            )
        )
    for f in status.failures:
        found += _failure_entries(f)
    found += [_event_entry(e) for e in events]
    if status.completion_time:
        end = f"job {status.state.value}" + (f": {status.message}" if status.message else "")
        found.append(_entry(status.completion_time, f"Job{status.state.value}", end))
    entries = [e for e in found if e is not None]
    # sorted() is stable: the order above (cause before effect) settles equal instants.
    return sorted(entries, key=_instant)


def _instant(entry: Mapping[str, Any]) -> datetime:
    moment = parse_time(entry["time"])
    assert moment is not None  # _entry keeps only entries with a readable time
    return moment


def render_timeline(job: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> str:
    meta = job.get("metadata") or {}
    start = parse_time((job.get("status") or {}).get("startTime"))
    lines = [f"TrainingJob {meta.get('namespace')}/{meta.get('name')}: timeline (UTC)"]
    rows = []
    for e in entries:
        moment = parse_time(e["time"])
        offset = (
            "+" + duration((moment - start).total_seconds())
            if start is not None and moment is not None and moment >= start
            else ""
        )
        stage = e["kind"] in ("NodeCordoned", "SpareSwappedIn", "TrainingResumed")
        marker = "!" if e["kind"] == "NodeFailed" or e.get("type") == "Warning" else " "
        text = ("    " if stage else "") + e["text"]
        rows.append([when(e["time"]), offset, f"{marker} {e['kind']}", text])
    lines += ["  " + line for line in _table(["TIME", "SINCE START", "  WHAT", ""], rows, {1})]
    if not any(e["source"] == "event" for e in entries):
        lines.append("  (no events: the API server keeps them for an hour by default; the "
                     "status history above is complete)")  # fmt: skip
    return "\n".join(lines) + "\n"


# -- kubectl phased nodes ----------------------------------------------------------------------


def _ready(node: Mapping[str, Any]) -> str:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status", "Unknown"))
    return "Unknown"


def _accelerators(node: Mapping[str, Any]) -> dict[str, str]:
    """Extended resources the node offers (``nvidia.com/gpu: 8``), hugepages aside."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return {
        k: str(v)
        for k, v in sorted(allocatable.items())
        if "/" in k and not k.startswith("hugepages-")
    }


def nodes_view(nodes: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """One row per Node Phased holds or quarantined: owner, role, health, why quarantined."""
    rows = []
    for node in nodes:
        meta = node.get("metadata") or {}
        node_labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        note = decode_quarantine(annotations.get(labels.ANNOTATION_QUARANTINE))
        rows.append(
            {
                "name": meta.get("name", ""),
                "role": node_labels.get(labels.LABEL_ROLE, ""),
                "job": {
                    "namespace": node_labels.get(labels.LABEL_JOB_NAMESPACE, ""),
                    "name": node_labels.get(labels.LABEL_JOB, ""),
                    "uid": node_labels.get(labels.LABEL_JOB_UID, ""),
                },
                "ready": _ready(node),
                "cordoned": bool((node.get("spec") or {}).get("unschedulable", False)),
                "accelerators": _accelerators(node),
                "claimedAt": annotations.get(labels.ANNOTATION_CLAIMED_AT),
                "installation": node_labels.get(labels.LABEL_INSTALLATION, ""),
                # A worker never started there (when, what it did): promoted last.
                "stalled": annotations.get(labels.ANNOTATION_STALLED),
                "quarantine": None
                if note is None
                else {
                    "reason": note.reason,
                    "message": note.message,
                    "detected": format_time(note.detected),
                    "cordoned": format_time(note.cordoned) if note.cordoned else None,
                },
            }
        )
    return sorted(rows, key=lambda r: (r["job"]["namespace"], r["job"]["name"], r["name"]))


def _owner(row: Mapping[str, Any]) -> str:
    job = row["job"]
    return f"{job['namespace']}/{job['name']}" if job["name"] else "-"


def render_nodes(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "No node is held or quarantined by Phased.\n"
    roles = Counter(r["role"] for r in rows)
    jobs = Counter(_owner(r) for r in rows)
    summary = ", ".join(f"{roles[r]} {r}" for r in ROLES if roles[r])
    lines = [f"{len(rows)} node(s): {summary}; held for {len(jobs)} job(s)", ""]
    table = [
        [
            r["name"],
            _owner(r),
            r["role"],
            r["ready"],
            "yes" if r["cordoned"] else "no",
            ", ".join(f"{k}: {v}" for k, v in r["accelerators"].items()) or "-",
            when(r["claimedAt"]),
        ]
        for r in rows
    ]
    header = ["NODE", "JOB", "ROLE", "READY", "CORDONED", "ACCELERATORS", "CLAIMED (UTC)"]
    lines += _table(header, table, right=set())
    stalled = [r for r in rows if r.get("stalled")]
    if stalled:
        lines += ["", "PROMOTED LAST (a worker never started there while its peers did)"]
        lines += [f"  {r['name']} ({_owner(r)}): {r['stalled']}" for r in stalled]
    quarantined = [r for r in rows if r["role"] == "quarantined"]
    if quarantined:
        lines += ["", "QUARANTINED (kept cordoned until a person releases them)"]
        for r in quarantined:
            q = r["quarantine"]
            if q is None:
                lines.append(f"  {r['name']} ({_owner(r)}): no quarantine note on the node")
                continue
            cordoned = f", cordoned {when(q['cordoned'])}" if q["cordoned"] else ""
            lines.append(
                f"  {r['name']} ({_owner(r)}): {q['reason']}, detected {when(q['detected'])}"
                f"{cordoned}"
            )
            if q["message"]:
                lines.append(f"      {q['message']}")
        # release-node leaves another installation's nodes alone: each hint names the one
        # that marked its nodes (none for nodes marked before installations)
        by_installation: dict[str, list[str]] = {}
        for r in quarantined:
            by_installation.setdefault(r.get("installation") or "", []).append(r["name"])
        for installation, names in sorted(by_installation.items()):
            flag = f"--installation {installation} " if installation else ""
            lines.append(f"  release when repaired: phased release-node {flag}{' '.join(names)}")
    return "\n".join(lines) + "\n"
