"""Two nodes failing one after the other, the second while the first's restart is under
way: each ledger entry gets its own spare, whatever moment the second failure lands in."""

import pytest

from phased.api.v1alpha1 import NodeRole
from phased.core.model import PodPhase
from tests.core.builders import Cluster, nodes, phase, spec, with_ready


def _running_cluster() -> Cluster:
    c = Cluster(
        spec(
            phase("train", 4, 4),
            spares=2,
            failurePolicy={"notReadyGrace": "10s", "massFailure": {"maxFailedPercent": 50}},
        ),
        {n.name: n for n in nodes("n", 6)},
    )
    c.settle()
    assert len(c.running()) == 4 and len(c.held(NodeRole.SPARE)) == 2
    return c


def _fail(c: Cluster, name: str) -> None:
    c.nodes[name] = with_ready(c.nodes[name], False, c.now)


@pytest.mark.parametrize(
    "second_lands",
    [
        "before the new generation is scheduled",
        "after the new generation is scheduled",
    ],
)
def test_each_failure_gets_its_own_spare(second_lands):
    c = _running_cluster()
    first, second = c.held(NodeRole.ACTIVE)[:2]
    _fail(c, first)
    c.advance(11)
    c.apply(c.decide())  # quarantine, promote, gang restart: the new generation is Pending
    if second_lands == "after the new generation is scheduled":
        c.schedule()
    _fail(c, second)
    c.advance(11)
    c.settle()
    ledger = c.status.failures
    assert [e.node for e in ledger] == [first, second]
    assert all(e.replaced_by for e in ledger), ledger
    assert len({e.replaced_by for e in ledger}) == 2
    assert all(e.resumed for e in ledger)
    assert len(c.running()) == 4
    assert all(p.node_name not in (first, second) for p in c.running())


def test_a_pending_worker_whose_node_left_waits_for_the_promoted_spare():
    c = _running_cluster()
    victim = c.held(NodeRole.ACTIVE)[0]
    _fail(c, c.held(NodeRole.ACTIVE)[1])
    c.advance(11)
    c.apply(c.decide())
    # the new generation is Pending; the node one of its workers was meant for fails
    _fail(c, victim)
    c.advance(11)
    plan = c.decide()
    c.apply(plan)
    assert len(c.held(NodeRole.ACTIVE)) == 4
    c.schedule()
    assert sorted(p.phase for p in c.pods.values() if p.generation == 1) == [PodPhase.RUNNING] * 4
