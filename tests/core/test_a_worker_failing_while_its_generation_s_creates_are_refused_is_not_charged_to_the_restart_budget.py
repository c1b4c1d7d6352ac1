"""A worker that fails while the namespace refuses the creates of its generation's other
ranks (``WorkersRefused`` True: a quota admitting only some of them) is not charged to
``restartBudget``: the workers that did get created wait at the rendezvous for peers that
never come and fail at its timeout, on healthy nodes, through no fault of their code. The
restart is counted in ``restarts``; the budget is for the code's failures. Before, such a
failure within ``pendingGrace`` was taken for the code's, and a small budget failed the job
with ``RestartBudgetExceeded`` for what was the namespace's refusal."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState
from phased.core import labels
from phased.core.conditions import ConditionType, find
from phased.core.model import CreatePod, PodPhase
from phased.core.refusals import refused
from tests.core.builders import Cluster, nodes, phase, spec

WHY = 'pods "llm-train-g0-2" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=8'


def _job() -> Cluster:
    the_spec = spec(phase("train", 4, 4), spares=1, failurePolicy={"restartBudget": 0})
    return Cluster(the_spec, {n.name: n for n in nodes("h", 6)})


def _step(cluster: Cluster, admitted: int) -> None:
    """As the reconciler: the plan's creates land up to ``admitted`` workers of a generation,
    then the namespace refuses the next and the status as it was is written with
    ``WorkersRefused`` True."""
    plan = cluster.decide()
    gens = {p.generation for p in cluster.pods.values()}
    made = {g: sum(1 for p in cluster.pods.values() if p.generation == g) for g in gens}
    for action in plan.actions:
        if isinstance(action, CreatePod):
            meta = action.manifest["metadata"]
            gen = int(meta["labels"][labels.LABEL_GENERATION])
            if made.get(gen, 0) >= admitted:
                status, _ = refused(cluster.status, WHY, cluster.now, 1)
                cluster.status = status
                cluster.schedule()
                return
            made[gen] = made.get(gen, 0) + 1
        cluster.log.append(action)
        cluster._apply(action)
    cluster.status = plan.status
    cluster.finished = plan.finished
    cluster.schedule()


def _fail_the_created_workers(cluster: Cluster) -> None:
    """They time out at the rendezvous, waiting for the ranks that were refused."""
    for name, p in list(cluster.pods.items()):
        if p.phase == PodPhase.RUNNING:
            cluster.pods[name] = replace(p, phase=PodPhase.FAILED, exit_code=1)


def test_workers_failing_for_peers_the_namespace_refused_spend_no_restart_budget() -> None:
    cluster = _job()
    for _ in range(4):
        _step(cluster, admitted=2)
        cluster.advance(30)
    assert len(cluster.running()) == 2
    cond = find(cluster.status.conditions, ConditionType.WORKERS_REFUSED)
    assert cond is not None and cond.status == "True"

    _fail_the_created_workers(cluster)
    for _ in range(3):
        _step(cluster, admitted=2)
        cluster.advance(30)
        assert cluster.status.state != JobState.FAILED, cluster.status.message
        assert cluster.status.worker_restarts == 0
    for _ in range(4):  # the quota was raised: the rest of the workers are created
        _step(cluster, admitted=4)
        cluster.advance(30)
    assert cluster.status.state == JobState.RUNNING and len(cluster.running()) == 4
    assert {p.generation for p in cluster.running()} == {1}
    assert cluster.status.restarts == 1  # counted, but not to the code
    assert cluster.status.worker_restarts == 0


def test_a_worker_failing_once_every_rank_was_created_is_charged_as_before() -> None:
    cluster = _job()
    for _ in range(4):
        _step(cluster, admitted=4)
        cluster.advance(30)
    assert len(cluster.running()) == 4

    name = sorted(p.name for p in cluster.running())[0]
    cluster.pods[name] = replace(cluster.pods[name], phase=PodPhase.FAILED, exit_code=1)
    _step(cluster, admitted=4)
    assert cluster.status.state == JobState.FAILED
    assert "restartBudget" in cluster.status.message
