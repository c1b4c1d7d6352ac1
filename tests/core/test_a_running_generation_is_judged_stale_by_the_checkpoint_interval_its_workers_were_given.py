"""``checkpoint.interval`` edited while a phase runs: the running generation's workers were
told the interval when they were made (``PHASED_CHECKPOINT_INTERVAL_SECONDS``) and checkpoint
at it until the next generation, so staleness judges them by that interval
(``phased.dev/checkpoint-interval`` on each worker), and the edit from the next generation on.
Before, a lowered interval made a healthy gang checkpointing on time ``CheckpointStale`` for
most of each of its intervals (a Warning for nothing), and a raised one hid a stuck gang past
the interval it had been told."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core.conditions import find
from phased.core.model import CreatePod
from phased.core.reports import Report, ReportKind, report_token
from phased.core.settings import ReportSettings, Settings
from tests.core.builders import JOB, Cluster, events, node, phase, spec, with_ready
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit

SETTINGS = Settings(reports=ReportSettings(url="http://phased.test:8082", key_file="/k"))


def _cluster(interval: str) -> Cluster:
    the_spec = spec(
        phase("train", 2, 2), spares=1, checkpoint={"report": True, "interval": interval}
    )
    cluster = Cluster(
        the_spec,
        {n.name: n for n in [node(f"n{i}") for i in range(4)]},
        settings=SETTINGS,
        report_token=report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid),
    )
    cluster.settle()
    assert len(cluster.running()) == 2
    return cluster


def _checkpoint(cluster: Cluster, step: int) -> None:
    fields: dict[str, Any] = {"phase": "train", "attempt": 0, "rank": 0}
    cluster.report(
        Report(
            kind=ReportKind.CHECKPOINT,
            step=step,
            time=cluster.now,
            generation=cluster.status.restart_generation,
            path=f"/checkpoints/llm/step-{step}",
            **fields,
        )
    )


def _set_interval(cluster: Cluster, interval: str) -> None:
    """A person's edit: the spec changes and so does metadata.generation."""
    cluster.the_spec = _edit(
        cluster.the_spec, lambda raw: raw["checkpoint"].update(interval=interval)
    )
    cluster.job = replace(cluster.job, generation=cluster.job.generation + 1)


def _stale(cluster: Cluster) -> bool:
    cond = find(cluster.status.conditions, "CheckpointStale")
    return cond is not None and cond.status == "True"


def test_a_lowered_interval_does_not_make_a_gang_checkpointing_at_its_own_stale() -> None:
    cluster = _cluster("1h")
    cluster.advance(600)
    _checkpoint(cluster, 100)
    cluster.settle()
    _set_interval(cluster, "10m")
    said: list[str] = []
    for step in (200, 300):  # the gang checkpoints hourly, as it was told
        for _ in range(5):
            cluster.advance(700)
            said += [e for p in cluster.settle() for e in events(p)]
            assert not _stale(cluster)
        cluster.advance(100)
        _checkpoint(cluster, step)
        said += [e for p in cluster.settle() for e in events(p)]
    assert "CheckpointStale" not in said

    # The next generation is made with the edit, and judged by it.
    victim = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[victim] = with_ready(cluster.nodes[victim], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    assert cluster.status.restart_generation == 1 and len(cluster.running()) == 2
    made = [a for a in cluster.log if isinstance(a, CreatePod)][-1].manifest
    env = {e["name"]: e["value"] for e in made["spec"]["containers"][0]["env"]}
    assert env["PHASED_CHECKPOINT_INTERVAL_SECONDS"] == "600"
    cluster.advance(601)
    cluster.settle()
    assert _stale(cluster)


def test_a_raised_interval_still_finds_a_gang_stale_past_the_interval_it_was_told() -> None:
    cluster = _cluster("10m")
    cluster.advance(300)
    _checkpoint(cluster, 100)
    cluster.settle()
    _set_interval(cluster, "2h")
    cluster.advance(601)
    plans = cluster.settle()
    assert _stale(cluster)
    assert "CheckpointStale" in [e for p in plans for e in events(p)]
