"""Workers the API server refuses (a quota spent, an admission webhook denying them) for
``failurePolicy.pendingGrace`` give the pool back: the job stops the workers that did get
created (they wait for peers that never come), releases its nodes, leaves the line and waits
as long before it forms its pool and tries again — said by ``WorkersRefused`` False with
reason ``PoolReturned`` and one ``PoolReturned`` event. Once the namespace admits them, the
job starts as any job does. Before, a refused job held its nodes idle for as long as the
refusal lasted, however long."""

from __future__ import annotations

from phased.api.v1alpha1 import Condition, JobState, NodeRole
from phased.core import labels
from phased.core.conditions import ConditionType, find
from phased.core.model import CreatePod, EmitEvent, Plan, ReleaseNode
from phased.core.refusals import refused
from tests.core.builders import Cluster, nodes, phase, spec

WHY = 'pods "llm-train-g0-2" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=8'
GRACE = 600  # pendingGrace's default


class Refusing:
    """The reconciler's part: the plan's actions land in order until a create the namespace
    refuses (``admitted`` creates land first); then the status as it was is written with
    ``WorkersRefused``."""

    def __init__(self, cluster: Cluster, admitted: int) -> None:
        self.cluster = cluster
        self.admitted = admitted
        self.events: list[EmitEvent] = []

    def step(self) -> Plan:
        cluster = self.cluster
        plan = cluster.decide()
        creates = [a for a in plan.actions if isinstance(a, CreatePod)]
        already = sum(1 for p in cluster.pods.values() if p.generation == self._gen(creates))
        if not creates or already + len(creates) <= self.admitted:
            cluster.apply(plan)
            self.events += [a for a in plan.actions if isinstance(a, EmitEvent)]
        else:
            landed = 0
            for action in plan.actions:
                if isinstance(action, CreatePod):
                    if already + landed >= self.admitted:
                        break
                    landed += 1
                cluster.log.append(action)
                cluster._apply(action)
            status, event = refused(cluster.status, WHY, cluster.now, 1)
            cluster.status = status
            self.events += [event] if event else []
        cluster.schedule()
        return plan

    @staticmethod
    def _gen(creates: list[CreatePod]) -> int | None:
        if not creates:
            return None
        return int(creates[0].manifest["metadata"]["labels"][labels.LABEL_GENERATION])

    def run(self, seconds: int, every: int = 30) -> None:
        for _ in range(seconds // every):
            plan = self.step()
            if plan.requeue_after is not None and plan.requeue_after < 1:
                self.step()  # a pass asked for at once (the release after a give-back)
            self.cluster.advance(every)


def _job(total: int = 6) -> Cluster:
    return Cluster(spec(phase("train", 4, 4), spares=1), {n.name: n for n in nodes("h", total)})


def _refused(cluster: Cluster) -> Condition:
    cond = find(cluster.status.conditions, ConditionType.WORKERS_REFUSED)
    assert cond is not None
    return cond


def _state(cluster: Cluster) -> JobState:
    return cluster.status.state


def _held(cluster: Cluster) -> list[str]:
    return cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)


def test_a_job_whose_every_worker_is_refused_gives_its_pool_back_after_the_grace() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=0)
    api.run(GRACE - 60)
    assert len(_held(cluster)) == 5 and cluster.pods == {}
    assert _refused(cluster).status == "True"

    api.run(120)
    assert _held(cluster) == []
    cond = _refused(cluster)
    assert (cond.status, cond.reason) == ("False", "PoolReturned")
    assert "given back" in cond.message and "exceeded quota" in cond.message
    assert cluster.status.state == JobState.WAITING
    assert cluster.status.message == cond.message
    assert cluster.status.waiting_for == {}
    assert [e.reason for e in api.events].count("PoolReturned") == 1

    api.run(GRACE - 120)  # it waits out the grace holding nothing
    assert _held(cluster) == [] and cluster.status.state == JobState.WAITING

    api.admitted = 4  # the quota was raised: it tries again and starts
    api.run(240)
    assert len(cluster.running()) == 4 and _state(cluster) == JobState.RUNNING
    assert _refused(cluster).reason == "Created"


def test_workers_created_before_the_refusal_are_stopped_with_the_pool_given_back() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=2)
    api.run(GRACE + 60)
    assert _held(cluster) == []
    assert [p.name for p in cluster.pods.values()] == []  # stopped, nothing left on them
    assert cluster.status.restarts == 0  # nothing trained: no restart counted

    api.admitted = 100
    api.run(GRACE + 240)
    assert len(cluster.running()) == 4
    assert {p.generation for p in cluster.running()} == {1}  # a new generation, not g0 again


def test_a_refusal_that_ends_within_the_grace_keeps_the_pool() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=0)
    api.run(GRACE // 2)
    held = _held(cluster)
    api.admitted = 4
    api.run(120)
    assert _held(cluster) == held and len(cluster.running()) == 4


def test_a_give_back_killed_half_way_is_finished_by_the_next_pass() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=0)
    api.run(GRACE - 60)
    while cluster.status.pool_returns == 0:  # the give-back: written, the pool still held
        api.step()
        cluster.advance(30)
    assert len(_held(cluster)) == 5 and _refused(cluster).reason == "PoolReturned"
    plan = cluster.decide()
    releases = [a for a in plan.actions if isinstance(a, ReleaseNode)]
    assert len(releases) == 5
    for action in releases[:2]:  # killed after two releases; its status write is lost
        cluster._apply(action)
    assert len(_held(cluster)) == 3
    api.step()
    assert _held(cluster) == []
    assert _refused(cluster).reason == "PoolReturned"
    assert cluster.status.pool_returns == 1
