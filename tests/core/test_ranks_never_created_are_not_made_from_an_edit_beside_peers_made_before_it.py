"""Ranks of a generation never created — a crash between its creates, or creates the API
server refused — are created at the next pass. When the running phase's worker was edited
meanwhile (the image, the launcher port...), they are not made from the edit beside peers made
before it: the gang restarts, every rank from the edit, counted in ``restarts`` only (its
peers never trained: no restart budget, no ledger entry, no stop). Before, the missing ranks
ran the new template beside peers running the old one, a gang of two templates.
"""

from __future__ import annotations

from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, TrainingJobSpec, parse_spec
from phased.core import labels
from phased.core.model import CreatePod, DeletePod
from phased.core.workers import worker_spec
from tests.core.builders import Cluster, events, nodes, of_type, phase, spec

SPEC_LABEL = "phased.dev/worker-spec"


def _cut_between_creates(scope: str, schedule: bool) -> Cluster:
    """A job of 4 ranks whose first generation's pass was cut short after 2 of its creates
    (the status it would have written is not written)."""
    cluster = Cluster(
        spec(
            phase("train", 4, 4),
            failurePolicy={"restartScope": scope},
            launcher={"type": "Torchrun", "rendezvous": "C10d" if scope == "Worker" else "Static"},
        ),
        {n.name: n for n in nodes("h", 5)},
    )
    for _ in range(10):
        plan = cluster.decide()
        if of_type(plan, CreatePod):
            break
        cluster.apply(plan)
        cluster.schedule()
    else:
        raise AssertionError("no generation was created")
    created = 0
    for action in plan.actions:
        if isinstance(action, CreatePod):
            created += 1
            if created > 2:
                break
        cluster._apply(action)
    if schedule:
        cluster.schedule()
    assert len(cluster.pods) == 2
    return cluster


def _image(the_spec: TrainingJobSpec, image: str) -> TrainingJobSpec:
    raw: dict[str, Any] = the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["template"]["image"] = image
    return parse_spec(raw)


def _digest(cluster: Cluster) -> str:
    return worker_spec(cluster.the_spec, cluster.the_spec.phases[0])


@pytest.mark.parametrize("scope", ["Gang", "Worker"])
@pytest.mark.parametrize("schedule", [True, False], ids=["peers running", "peers pending"])
def test_ranks_left_uncreated_restart_the_gang_from_an_edit_made_meanwhile(
    scope: str, schedule: bool
) -> None:
    cluster = _cut_between_creates(scope, schedule)
    old = set(cluster.pods)
    cluster.the_spec = _image(cluster.the_spec, "registry.example/llm:2")

    plan = cluster.step()
    # Nothing made into the old generation: what is created (at once, when the peers it
    # replaces never reached a node) is the next generation, every rank from the edit.
    for made in of_type(plan, CreatePod):
        assert made.manifest["metadata"]["labels"][labels.LABEL_GENERATION] == "1"
        assert made.manifest["metadata"]["labels"][SPEC_LABEL] == _digest(cluster)
    assert {a.name for a in of_type(plan, DeletePod)} == old
    assert events(plan) == ["WorkersRestarted"]
    assert plan.status.restart_generation == 1
    assert plan.status.restarts == 1  # counted once, and not to the restart budget
    assert plan.status.worker_restarts == 0
    assert plan.status.failures == [] and plan.status.interruption.stops == []

    cluster.settle()
    workers = sorted(cluster.running(), key=lambda p: p.rank or 0)
    assert [p.rank for p in workers] == [0, 1, 2, 3]
    assert {p.generation for p in workers} == {1}
    assert {p.labels[SPEC_LABEL] for p in workers} == {_digest(cluster)}
    assert cluster.status.state == JobState.RUNNING and cluster.status.restarts == 1


def test_ranks_left_uncreated_with_no_edit_meanwhile_join_their_generation() -> None:
    cluster = _cut_between_creates("Gang", True)
    old = set(cluster.pods)
    cluster.settle()
    workers = cluster.running()
    assert old < {p.name for p in workers} and len(workers) == 4
    assert {p.generation for p in workers} == {0}
    assert {p.labels[SPEC_LABEL] for p in workers} == {_digest(cluster)}
    assert cluster.status.restarts == 0
