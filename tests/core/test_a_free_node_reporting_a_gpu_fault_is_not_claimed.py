"""A free node on which one of the job's ``gpuFaultConditions`` is True is not claimed: not to
form a pool, not as a spare. Claimed, it failed at the next pass, counted from the fault's own
start long before the claim: a new job's ledger opened with a day-long interruption, the
interruption budget spent before training began, the node quarantined by a job it never
served, and a few such nodes among the free ones tripped the breaker on a brand new pool."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import NodeCondition
from tests.core.builders import LONG_AGO, Cluster, node, phase, spec, with_ready

XID = NodeCondition("GPUXidError", "True", LONG_AGO, reason="Xid79")
CLEARED = NodeCondition("GPUXidError", "False", LONG_AGO)


def _cluster(faulty: set[int], count: int = 14) -> Cluster:
    the_nodes = {
        f"n{i:02d}": node(f"n{i:02d}", extra=(XID,) if i in faulty else (CLEARED,))
        for i in range(count)
    }
    return Cluster(spec(phase("train", 4, 8), spares=2), the_nodes)


def _names(indices: set[int]) -> set[str]:
    return {f"n{i:02d}" for i in indices}


def test_a_new_pool_leaves_the_faulty_free_nodes_alone():
    faulty = {0, 1, 2}
    cluster = _cluster(faulty)
    cluster.settle()
    held = set(cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE))
    assert not held & _names(faulty)
    assert len(cluster.held(NodeRole.ACTIVE)) == 8 and len(cluster.held(NodeRole.SPARE)) == 2
    assert cluster.status.failures == [] and cluster.held(NodeRole.QUARANTINED) == []
    assert cluster.status.state == JobState.RUNNING
    assert cluster.status.interruption.used_seconds == 0
    assert not [c for c in cluster.status.conditions if c.status == "True"]


def test_a_spare_refill_after_a_failure_leaves_a_faulty_free_node_alone():
    cluster = _cluster(set(), count=12)
    cluster.settle()
    free = sorted(
        set(cluster.nodes) - set(cluster.held(NodeRole.ACTIVE)) - set(cluster.held(NodeRole.SPARE))
    )
    faulty, healthy = free
    cluster.nodes[faulty] = replace(
        cluster.nodes[faulty],
        conditions=(*[c for c in cluster.nodes[faulty].conditions if c.type != "GPUXidError"], XID),
    )
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    cluster.advance(31)
    cluster.settle()
    assert healthy in cluster.held(NodeRole.SPARE)
    assert faulty not in cluster.held(NodeRole.SPARE) + cluster.held(NodeRole.QUARANTINED)
    assert [f.node for f in cluster.status.failures] == [lost]
