"""The same snapshot twice: the second plan adds nothing once the first plan landed."""

import pytest

from phased.core.model import EmitEvent
from tests.core.builders import Cluster, nodes, phase, spec, with_ready


def _non_event(plan):
    return [a for a in plan.actions if not isinstance(a, EmitEvent)]


@pytest.mark.parametrize("spares", [0, 2])
def test_a_second_decide_on_the_absorbed_cluster_is_empty(spares):
    cluster = Cluster(spec(phase("train", 2, 3), spares=spares), {n.name: n for n in nodes("h", 6)})
    for _ in range(4):
        cluster.step()
    again = cluster.decide()
    assert again.actions == ()
    assert again.status == cluster.status


def test_deciding_twice_on_an_unchanged_snapshot_gives_the_same_plan():
    cluster = Cluster(spec(phase("train", 2, 3), spares=1), {n.name: n for n in nodes("h", 6)})
    first = cluster.decide()
    second = cluster.decide()
    assert first == second


def test_a_failure_is_answered_once():
    cluster = Cluster(spec(phase("train", 2, 2), spares=1), {n.name: n for n in nodes("h", 4)})
    cluster.settle()
    victim = cluster.running()[0].node_name
    cluster.nodes[victim] = with_ready(cluster.nodes[victim], False, cluster.now)
    cluster.advance(31)
    answered = cluster.step()
    assert "NodeFailed" in [a.reason for a in answered.actions if isinstance(a, EmitEvent)]
    nxt = cluster.step()
    assert [a.reason for a in nxt.actions if isinstance(a, EmitEvent)].count("NodeFailed") == 0
    final = cluster.decide()
    assert _non_event(final) == [] and final.actions == ()
    assert len(cluster.status.failures) == 1
