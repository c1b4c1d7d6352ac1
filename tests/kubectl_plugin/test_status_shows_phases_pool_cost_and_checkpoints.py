"""`kubectl phased status`: the status of a run as a person reads it, and as JSON."""

from __future__ import annotations

import json

from phased.cli import views
from tests.kubectl_plugin.jobs import JOB, NOW, job


def test_the_view_holds_every_phase_with_its_figures() -> None:
    view = views.status_view(JOB, NOW)
    assert (view["namespace"], view["name"], view["state"], view["phase"]) == (
        "ml",
        "llm",
        "Running",
        "train",
    )
    names = [p["name"] for p in view["phases"]]
    assert names == ["preprocess", "train", "validate"]  # the spec's order, pending ones too
    pre, train, val = view["phases"]
    assert pre["durationSeconds"] == 1800.0 and pre["cost"] == 1.2
    # a running phase has run until now
    assert train["durationSeconds"] == 5400.0
    assert (train["minNodes"], train["maxNodes"], train["nodes"]) == (8, 10, 10)
    assert (train["gpuHours"], train["spareGpuHours"], train["restarts"]) == (120.0, 20.0, 1)
    assert val["state"] == "Pending" and val["startTime"] is None
    assert view["pool"]["spare"] == ["h100-011"] and view["pool"]["quarantined"] == ["h100-003"]
    assert len(view["pool"]["active"]) == 10
    assert (view["cost"], view["estimatedRemainingCost"], view["currency"]) == (
        301.2,
        4500.0,
        "USD",
    )
    assert view["checkpoint"] == {"interval": "30m", "path": "/ckpt/llm"}
    assert view["elapsedSeconds"] == 7200.0
    assert (view["failures"], view["openFailures"]) == (1, 0)
    json.dumps(view)  # what -o json prints


def test_the_text_reads_as_a_summary_then_a_phase_table() -> None:
    text = views.render_status(views.status_view(JOB, NOW))
    lines = text.splitlines()
    assert lines[0] == "TrainingJob ml/llm: Running, phase train (2 of 3)"
    assert "started 2026-03-01 00:00:00 (UTC), 2h so far" in text
    assert "cost so far 301.20 USD" in text and "estimated remaining 4,500.00 USD" in text
    assert "4.1s of a 2h budget (0.1%); 1 failure(s), 1 restart(s)" in text
    header = next(line for line in lines if line.strip().startswith("PHASE "))
    assert header.split() == [
        "PHASE", "STATE", "GPU", "MIN-MAX", "NODES", "STARTED", "ENDED", "TOOK", "RESTARTS",
        "GPU-HOURS", "COST", "(USD)",
    ]  # fmt: skip
    train = next(line for line in lines if line.strip().startswith("train "))
    assert train.split() == [
        "train", "Running", "H100", "8-10", "10", "2026-03-01", "00:30:00", "-", "1h30m", "1",
        "120.00", "300.00",
    ]  # fmt: skip
    pre = next(line for line in lines if line.strip().startswith("preprocess "))
    assert pre.split()[2] == "CPU"
    validate = next(line for line in lines if line.strip().startswith("validate "))
    assert validate.split()[1:4] == ["Pending", "-", "4-6"]
    # columns line up: every row of the table is as wide as its header at the cost column
    rows = [line for line in lines if line.startswith("  ") and line.split()[0] in
            ("PHASE", "preprocess", "train")]  # fmt: skip
    assert len({len(r) for r in rows}) == 1, rows


def test_the_pool_is_shown_by_role_with_the_spares_wanted() -> None:
    text = views.render_status(views.status_view(JOB, NOW))
    assert "POOL (phase train)" in text
    assert "  spare           1  h100-011  (2 wanted)" in text
    assert "  quarantined     1  h100-003" in text
    assert "every 30m to /ckpt/llm" in text and "restart generation 1" in text


def test_true_conditions_and_a_pointer_to_the_timeline_are_shown() -> None:
    text = views.render_status(views.status_view(JOB, NOW))
    assert "SparesExhausted=True (NoSpare) since 2026-03-01 01:10:00: 1 of 2 spares held" in text
    assert "MassFailure" not in text  # False, without a message
    assert "kubectl phased timeline llm -n ml" in text


def test_a_finished_job_says_how_long_it_took() -> None:
    done = job(state="Succeeded", completionTime="2026-03-01T01:00:00Z", failures=[])
    text = views.render_status(views.status_view(done, NOW))
    assert "ended 2026-03-01 01:00:00, took 1h" in text
    assert "timeline" not in text  # no failures to look at


def test_a_job_the_operator_has_not_seen_yet() -> None:
    fresh = {"metadata": {"name": "new", "namespace": "ml"}, "spec": JOB["spec"]}
    view = views.status_view(fresh, NOW)
    assert view["state"] == "Pending" and view["elapsedSeconds"] is None
    text = views.render_status(view)
    assert text.startswith("TrainingJob ml/new: Pending\n  not started yet\n")
    assert [p["state"] for p in view["phases"]] == ["Pending"] * 3


def test_durations_read_as_people_write_them() -> None:
    assert views.duration(None) == "-"
    assert views.duration(0) == "0s"
    assert views.duration(0.25) == "0.2s" or views.duration(0.25) == "0.3s"
    assert views.duration(4.1) == "4.1s"
    assert views.duration(42) == "42s"
    assert views.duration(3725) == "1h2m"
    assert views.duration(2 * 86400 + 4 * 3600 + 65) == "2d4h"
