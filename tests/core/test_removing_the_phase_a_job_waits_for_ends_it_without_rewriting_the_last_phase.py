"""The job waits for capacity for its next phase (not started: the edit is allowed) and the
user removes that phase: the job has nothing left to run and succeeds. The phase that ran
last keeps its history — its end time is when it completed, not when the edit came, and it
is not announced as completed a second time."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, PhaseState
from tests.core.builders import events, phase
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit, _training


def test_the_job_succeeds_and_the_last_phase_keeps_its_end() -> None:
    cluster = _training(0, 6, phase("preprocess", 2, 2), phase("train", 4, 4), phase("big", 8, 8))
    cluster.advance(3600)
    cluster.finish_workers("train")
    plans = cluster.settle()
    assert [e for p in plans for e in events(p)].count("PhaseCompleted") == 1
    assert cluster.status.phase == "big" and cluster.status.state == JobState.WAITING
    train = cluster.status.phases[1]
    assert train.state == PhaseState.SUCCEEDED and train.end_time is not None

    cluster.advance(600)
    cluster.the_spec = _edit(cluster.the_spec, lambda raw: raw.update(phases=raw["phases"][:2]))
    plans = cluster.settle()
    said = [e for p in plans for e in events(p)]
    assert "JobSucceeded" in said and "PhaseCompleted" not in said
    assert cluster.status.state == JobState.SUCCEEDED
    assert cluster.status.phases[1].end_time == train.end_time
    assert cluster.status.phases[1].restarts == train.restarts
