"""Workers stuck Pending past ``pendingGrace`` are a failed start, retried
``pendingRestarts`` times per phase before the job fails. A start stuck on workers made from
a worker spec the job no longer has — the person fixed the image (or the pull secret, the
resources...) while they waited — is not a failed start of the spec as it is: it is retried
from the edit, and spends no retry; and while none of the generation's workers has started,
at once, not at the grace. Before, the job failed at the grace of the second stuck start
though its fix had never been tried.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import JobState, TrainingJobSpec, parse_spec
from phased.core.model import PodPhase
from phased.core.workers import worker_spec
from tests.core.builders import Cluster, events, node, phase, spec

GRACE = 600  # the default pendingGrace


def _edit(the_spec: TrainingJobSpec, image: str) -> TrainingJobSpec:
    raw: dict[str, Any] = the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["template"]["image"] = image
    return parse_spec(raw)


class _Pulls:
    """A cluster whose nodes cannot pull the workers made from ``bad`` specs."""

    def __init__(self) -> None:
        self.cluster = Cluster(
            spec(phase("train", 2, 2), template={"image": "registry.example/llm:typo"}),
            {f"n{i}": node(f"n{i}") for i in range(3)},
        )
        self.bad = {self._digest()}

    def _digest(self) -> str:
        return worker_spec(self.cluster.the_spec, self.cluster.the_spec.phases[0])

    def step(self) -> list[str]:
        plan = self.cluster.step()
        for name, p in list(self.cluster.pods.items()):
            if p.labels.get("phased.dev/worker-spec") in self.bad and p.phase == PodPhase.RUNNING:
                self.cluster.pods[name] = replace(
                    p, phase=PodPhase.PENDING, waiting_reason="ImagePullBackOff"
                )
        return events(plan)

    def steps(self, count: int = 3) -> list[str]:
        return [e for _ in range(count) for e in self.step()]

    def edit(self, image: str, bad: bool) -> None:
        self.cluster.the_spec = _edit(self.cluster.the_spec, image)
        if bad:
            self.bad.add(self._digest())


def test_a_fix_made_while_the_last_retry_waits_is_tried_and_runs() -> None:
    pulls = _Pulls()
    pulls.steps()
    pulls.cluster.advance(GRACE + 1)
    assert "WorkersStuckPending" in pulls.steps()  # the one retry allowed is spent
    cluster = pulls.cluster
    assert cluster.status.phases[0].pending_restarts == 1
    assert cluster.status.restart_generation == 1

    cluster.advance(GRACE / 2)
    pulls.edit("registry.example/llm:1", bad=False)  # fixed while the retry waits
    said = pulls.steps()  # tried at once: none of the workers has started
    assert cluster.status.state != JobState.FAILED, cluster.status.message
    assert "WorkersRestarted" in said
    assert cluster.status.restart_generation == 2
    assert cluster.status.state == JobState.RUNNING
    assert len(cluster.running()) == 2
    # The start from the edit ran: the phase has its retries back.
    assert cluster.status.phases[0].pending_restarts == 0


def test_an_edit_is_taken_at_once_only_while_no_worker_has_started() -> None:
    pulls = _Pulls()
    pulls.cluster.the_spec = _edit(pulls.cluster.the_spec, "registry.example/llm:1")
    pulls.bad.clear()
    pulls.steps()  # the edit before the first start: started from it, at once
    cluster = pulls.cluster
    assert len(cluster.running()) == 2
    generation = cluster.status.restart_generation
    pulls.edit("registry.example/llm:2", bad=False)  # an edit while the workers run
    pulls.steps()
    assert cluster.status.restart_generation == generation  # taken at the next generation
    assert len(cluster.running()) == 2


def test_an_edit_that_is_stuck_too_spends_the_retries_and_fails() -> None:
    pulls = _Pulls()
    pulls.steps()
    pulls.cluster.advance(GRACE + 1)
    pulls.steps()
    pulls.edit("registry.example/llm:typo2", bad=True)  # another bad image
    pulls.steps()  # the start stuck before the edit: retried from the edit at once, free
    assert pulls.cluster.status.state != JobState.FAILED
    assert pulls.cluster.status.restart_generation == 2
    pulls.cluster.advance(GRACE + 1)
    assert "WorkersStuckPending" in pulls.steps()  # the edit's own start: no retry left
    assert pulls.cluster.status.state == JobState.FAILED
