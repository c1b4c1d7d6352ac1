"""``nodes.max`` lowered while the running generation's workers have already succeeded (the
boundary waits for their final checkpoint): the phase's work is done, so the gang is not
restarted at the new size — that would run the finished phase again. The boundary sizes the
next phase anew; nothing of the phase's history or accounting moves."""

from __future__ import annotations

from typing import Any

from phased.api.v1alpha1 import JobState
from phased.core.model import CreatePod, DeletePod
from phased.core.reports import Report, ReportKind, report_token
from phased.core.settings import ReportSettings, Settings
from tests.core.builders import JOB, Cluster, events, nodes, phase, spec
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit

SETTINGS = Settings(reports=ReportSettings(url="http://phased.test:8082", key_file="/k"))


def _report(cluster: Cluster, step: int, **kw: Any) -> None:
    cluster.report(
        Report(
            kind=ReportKind.CHECKPOINT,
            step=step,
            time=cluster.now,
            phase=cluster.status.phase or "",
            generation=cluster.status.restart_generation,
            attempt=0,
            rank=0,
            path=f"/checkpoints/llm/step-{step}",
            **kw,
        )
    )


def test_a_finished_generation_waiting_for_its_final_checkpoint_is_not_run_again() -> None:
    the_spec = spec(
        phase("train", 4, 4),
        phase("validate", 2, 2),
        spares=1,
        checkpoint={"report": True, "interval": "1h", "volume": {"size": "1Ti"}},
    )
    cluster = Cluster(
        the_spec,
        {n.name: n for n in nodes("h", 6)},
        settings=SETTINGS,
        report_token=report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid),
    )
    cluster.settle()
    cluster.advance(30)
    _report(cluster, 100)
    cluster.settle()
    cluster.advance(30)
    cluster.finish_workers("train")
    assert "WaitingForFinalCheckpoint" in events(cluster.step())

    cluster.the_spec = _edit(
        cluster.the_spec, lambda raw: raw["phases"][0].update(nodes={"min": 2, "max": 2})
    )
    cluster.advance(5)
    plans = cluster.settle()
    done = [a for p in plans for a in p.actions if isinstance(a, CreatePod | DeletePod)]
    assert done == []  # no second run of the finished phase
    assert "PoolShrinking" not in [e for p in plans for e in events(p)]
    assert cluster.status.restart_generation == 0 and cluster.status.phase == "train"

    cluster.advance(10)
    _report(cluster, 200, final=True)  # the final checkpoint: the boundary is crossed
    cluster.settle()
    assert cluster.status.phase == "validate" and cluster.status.state == JobState.RUNNING
    assert cluster.status.phases[0].restarts == 0
    assert len([p for p in cluster.running() if p.phase_name == "validate"]) == 2
