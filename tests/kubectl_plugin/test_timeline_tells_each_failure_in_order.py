"""`kubectl phased timeline`: the run in time order, each failure as detect → cordon → swap →
resume, from the status (complete) and the events (while the API server keeps them)."""

from __future__ import annotations

from phased.cli import views
from tests.kubectl_plugin.jobs import JOB, event, job


def kinds(entries: list[dict[str, object]]) -> list[object]:
    return [e["kind"] for e in entries]


def test_phases_and_the_failure_from_the_status_alone() -> None:
    entries = views.timeline_view(JOB, [])
    assert kinds(entries) == [
        "JobStarted",
        "PhaseStarted",
        "PhaseEnded",
        "PhaseStarted",
        "NodeFailed",
        "NodeCordoned",
        "SpareSwappedIn",
        "TrainingResumed",
    ]
    failed, cordoned, swapped, resumed = entries[4:]
    assert failed["text"] == (
        "node h100-003 failed, NodeNotReady: node h100-003 NotReady (KubeletNotReady) for 30s"
    )
    assert cordoned["text"] == "node h100-003 cordoned and quarantined (+0.2s after detection)"
    assert swapped["text"] == "spare h100-010 swapped in for h100-003 (+0.3s)"
    assert resumed["text"] == "training resumed after the loss of h100-003: interrupted 4.1s"
    assert {e["node"] for e in entries[4:]} == {"h100-003"}
    assert all(e["source"] == "status" for e in entries)


def test_events_add_restarts_and_what_the_status_does_not_tell() -> None:
    events = [
        event(
            "WorkersRestarted", "phase train: generation 0 -> 1 (node lost)", "2026-03-01T01:10:01Z"
        ),
        event("SparesRefilled", "claimed 1 spare node(s); 2 of 2 held", "2026-03-01T01:10:02Z"),
        # told by the status already, with finer times: left out
        event("NodeFailed", "node h100-003 NotReady", "2026-03-01T01:10:00Z", "Warning"),
        event("SparePromoted", "spare h100-010 promoted", "2026-03-01T01:10:00Z"),
    ]
    entries = views.timeline_view(JOB, events)
    assert kinds(entries)[4:] == [
        "NodeFailed",
        "NodeCordoned",
        "SpareSwappedIn",
        "WorkersRestarted",
        "SparesRefilled",
        "TrainingResumed",
    ]
    restart = entries[7]
    assert restart["source"] == "event" and "generation 0 -> 1" in restart["text"]


def test_equal_instants_keep_cause_before_effect() -> None:
    same = "2026-03-01T01:10:00Z"
    entry = {**JOB["status"]["failures"][0], "cordoned": same, "replaced": same, "resumed": same}
    entries = views.timeline_view(job(failures=[entry]), [])
    assert kinds(entries)[4:] == ["NodeFailed", "NodeCordoned", "SpareSwappedIn", "TrainingResumed"]


def test_an_open_failure_stops_where_it_is_and_a_deleted_node_is_never_cordoned() -> None:
    open_entry = {
        "id": 2,
        "node": "h100-007",
        "reason": "NodeDeleted",
        "detected": "2026-03-01T01:50:00Z",
    }
    entries = views.timeline_view(job(failures=[open_entry]), [])
    assert kinds(entries)[-1] == "NodeFailed"
    assert "NodeCordoned" not in kinds(entries)


def test_the_end_of_the_job_closes_the_timeline() -> None:
    done = job(
        state="Failed",
        message="workers failed 21 times on healthy nodes; restartBudget is 20",
        completionTime="2026-03-01T01:30:00Z",
    )
    entries = views.timeline_view(done, [])
    assert entries[-1]["kind"] == "JobFailed"
    assert entries[-1]["text"].endswith("restartBudget is 20")


def test_the_text_has_a_row_per_entry_with_the_time_since_start() -> None:
    text = views.render_timeline(JOB, views.timeline_view(JOB, []))
    lines = text.splitlines()
    assert lines[0] == "TrainingJob ml/llm: timeline (UTC)"
    failed = next(line for line in lines if "NodeFailed" in line)
    assert failed.split()[:4] == ["2026-03-01", "01:10:00", "+1h10m", "!"]
    cordon = next(line for line in lines if "NodeCordoned" in line)
    assert cordon.split()[:3] == ["2026-03-01", "01:10:00.2", "+1h10m"]
    assert "    node h100-003 cordoned" in cordon  # the stages are indented under the failure
    assert "no events" in lines[-1]


def test_a_warning_event_is_marked() -> None:
    events = [
        event("MassFailure", "3 of 6 nodes failed within 5m", "2026-03-01T01:20:00Z", "Warning")
    ]
    text = views.render_timeline(JOB, views.timeline_view(JOB, events))
    line = next(line for line in text.splitlines() if "MassFailure" in line)
    assert "! MassFailure" in line
    assert "no events" not in text


def test_a_node_swapped_out_in_trouble_before_it_failed_is_told_in_that_order() -> None:
    """A node in trouble swapped out before its grace ran out fails as a spare: the spare
    that took its place did so before it was cordoned, and the timeline says so."""
    entry = {
        "id": 2,
        "node": "h100-004",
        "reason": "NodeNotReady",
        "phase": "train",
        "detected": "2026-03-01T01:20:00Z",
        "replacedBy": "h100-011",
        "replaced": "2026-03-01T01:20:29.900Z",
        "cordoned": "2026-03-01T01:20:30.100Z",
        "resumed": "2026-03-01T01:20:00Z",
        "interruptionSeconds": 0.0,
    }
    entries = [e for e in views.timeline_view(job(failures=[entry]), []) if e.get("failure") == 2]
    assert kinds(entries) == ["NodeFailed", "TrainingResumed", "SpareSwappedIn", "NodeCordoned"]
    (swapped,) = [e for e in entries if e["kind"] == "SpareSwappedIn"]
    assert swapped["text"] == "spare h100-011 swapped in for h100-004 while it was in trouble"
