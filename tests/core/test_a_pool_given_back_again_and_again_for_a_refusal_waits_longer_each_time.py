"""A namespace that refuses a job's workers for days (a quota spent by others, a webhook
denying them) must not make the job churn the line: claim nodes, be refused, hold them for
``pendingGrace``, give them back and try again every ``pendingGrace`` for ever. Each time the
pool is given back in a row, the job waits twice as long before it tries again — from
``pendingGrace`` to at most eight times it — counted in ``status.poolReturns``, so a restarted
operator keeps the same wait; once the namespace admits its workers, the count starts over.
Before, the wait was ``pendingGrace`` every time."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.conditions import ConditionType, find
from phased.core.model import ClaimNode
from phased.core.times import format_time, parse_time
from tests.core.builders import Cluster, nodes, of_type, phase, spec
from tests.core.test_workers_refused_for_the_pending_grace_give_the_pool_back_and_try_again_later import (  # noqa: E501
    GRACE,
    Refusing,
)

EVERY = 60


def _job() -> Cluster:
    return Cluster(spec(phase("train", 4, 4), spares=1), {n.name: n for n in nodes("h", 6)})


def _claims(api: Refusing, seconds: int) -> list[float]:
    """When the job claimed its pool (seconds from now), over ``seconds`` of refusal."""
    cluster = api.cluster
    start = cluster.now
    times: list[float] = []
    for _ in range(seconds // EVERY):
        before = len(cluster.log)
        api.step()
        if any(isinstance(a, ClaimNode) for a in cluster.log[before:]):
            times.append((cluster.now - start).total_seconds())
        cluster.advance(EVERY)
    return times


def _waits(claims: list[float]) -> list[float]:
    """The time out of the pool before each new claim: the claim cycle less the hold."""
    return [b - a - GRACE for a, b in pairwise(claims)]


def test_each_give_back_in_a_row_doubles_the_wait_up_to_eight_times_the_grace() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=0)
    claims = _claims(api, 40 * GRACE)
    waits = _waits(claims)
    # Held a grace, then out for 1, 2, 4, 8, 8 ... graces (within a pass or two).
    expected = [GRACE * min(2**i, 8) for i in range(len(waits))]
    assert len(waits) >= 5
    for got, want in zip(waits, expected, strict=True):
        assert want <= got <= want + 3 * EVERY, (waits, expected)
    assert cluster.status.pool_returns == len(claims) - (0 if not _held(cluster) else 1)


def test_the_wait_is_read_from_the_status_after_a_restart() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=0)
    _claims(api, 5 * GRACE)  # given back twice: out for two graces now
    assert cluster.status.pool_returns == 2 and not _held(cluster)
    cond = find(cluster.status.conditions, ConditionType.WORKERS_REFUSED)
    assert cond is not None and cond.reason == "PoolReturned"
    since = parse_time(cond.last_transition_time)
    assert since is not None
    again = since + timedelta(seconds=2 * GRACE)
    assert f"tries again at {format_time(again)}" in cond.message
    # Whatever operator decides next (all it knows is the status), not before then ...
    cluster.now = again - timedelta(seconds=1)
    assert not of_type(cluster.decide(), ClaimNode)
    cluster.now = again + timedelta(seconds=1)
    assert of_type(cluster.decide(), ClaimNode)


def test_workers_admitted_start_the_count_over() -> None:
    cluster = _job()
    api = Refusing(cluster, admitted=0)
    _claims(api, 6 * GRACE)
    assert cluster.status.pool_returns >= 2
    api.admitted = 100
    api.run(4 * GRACE)
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.pool_returns == 0


def _held(cluster: Cluster) -> list[str]:
    return cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)
