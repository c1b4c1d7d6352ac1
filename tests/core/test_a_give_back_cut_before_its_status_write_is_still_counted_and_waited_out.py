"""A pool given back for a lasting refusal is counted in ``status.poolReturns`` and waited
out even when the operator is killed between the give-back's actions and its status write.

The give-back is written before the nodes go: its pass stops the workers and writes the
return (``WorkersRefused`` False, ``PoolReturned``, ``poolReturns`` + 1) with the pool still
listed; the next pass releases the nodes, as a pass after any give-back cut short does.
Before, the pass released the nodes and then wrote the status: cut in between, nothing in
the cluster said the pool had been given back, so the next pass formed it again at once,
with no wait and the return uncounted (and the next wait, after the next refusal, too short).
"""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.conditions import ConditionType, find
from phased.core.model import ClaimNode, EmitEvent
from tests.core.builders import Cluster, nodes, phase, spec
from tests.core.test_workers_refused_for_the_pending_grace_give_the_pool_back_and_try_again_later import (  # noqa: E501
    GRACE,
    Refusing,
)

EVERY = 30


def _job() -> Cluster:
    return Cluster(spec(phase("train", 4, 4), spares=1), {n.name: n for n in nodes("h", 6)})


def _held(cluster: Cluster) -> list[str]:
    return cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)


def _cut(cluster: Cluster) -> list[str]:
    """One pass whose actions all land and whose status write is lost (the operator killed
    in between); the reasons of the events it would have posted."""
    plan = cluster.decide()
    for action in plan.actions:
        cluster.log.append(action)
        cluster._apply(action)
    cluster.schedule()
    return [a.reason for a in plan.actions if isinstance(a, EmitEvent)]


def _until_the_give_back(api: Refusing) -> None:
    cluster = api.cluster
    for _ in range(2 * GRACE // EVERY):
        plan = cluster.decide()
        if any(a.reason == "PoolReturned" for a in plan.actions if isinstance(a, EmitEvent)):
            return
        api.step()
        cluster.advance(EVERY)
    raise AssertionError("the pool was never given back")


def test_a_give_back_whose_status_write_was_lost_is_counted_once_and_waited_out() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=0)
    _until_the_give_back(api)
    assert len(_held(cluster)) == 5
    assert "PoolReturned" in _cut(cluster)  # killed before the status write

    # The operator comes back: the return is counted once and the job waits a grace out,
    # holding nothing, claiming nothing.
    claimed: list[str] = []
    for _ in range((GRACE - 2 * EVERY) // EVERY):
        before = len(cluster.log)
        api.step()
        claimed += [a.node for a in cluster.log[before:] if isinstance(a, ClaimNode)]
        cluster.advance(EVERY)
    assert _held(cluster) == [] and claimed == []
    assert cluster.status.pool_returns == 1
    cond = find(cluster.status.conditions, ConditionType.WORKERS_REFUSED)
    assert cond is not None and (cond.status, cond.reason) == ("False", "PoolReturned")


def test_the_give_back_pass_writes_the_return_before_any_node_goes() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=0)
    _until_the_give_back(api)
    plan = cluster.decide()
    assert plan.status.pool_returns == 1
    released = [a for a in plan.actions if type(a).__name__ == "ReleaseNode"]
    assert released == []
    cluster.apply(plan)
    cluster.schedule()
    assert plan.requeue_after is not None and plan.requeue_after <= 1
    after = cluster.decide()
    assert sorted(a.node for a in after.actions if type(a).__name__ == "ReleaseNode") == sorted(
        _held(cluster)
    )
    assert after.status.pool_returns == 1
