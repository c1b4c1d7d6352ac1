"""A failure inside an outage — more than half of the nodes of the whole cluster, or of the
failed node's zone, going NotReady together, whoever holds them — trips the breaker even
when the job's own count is within its limit: a control plane cut off from every kubelet,
or a zone's network cut, is no failure of the nodes each job holds there. The job's one
failure is no longer "always answered" then: quarantined, the fleet would wait for a person
for a bad minute. A rack going dark is no outage: each job answers its share."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import DeletePod, JobRef, NodeInfo, QuarantineNode
from tests.core.builders import LONG_AGO, Cluster, node, owned, phase, spec, with_ready
from tests.core.builders import events as said
from tests.core.builders import of_type as of_kind


def _mass(cluster: Cluster):
    return next(c for c in cluster.status.conditions if c.type == "MassFailure")


def _down(cluster: Cluster, names: list[str], since=None) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, since or cluster.now)


def _up(cluster: Cluster, names: list[str]) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)


def _others(n: NodeInfo, job: str) -> NodeInfo:
    """``n`` as another job's active node (labels only: this job leaves it alone)."""
    other = JobRef(namespace="ml", name=job, uid=f"uid-{job}", generation=1, created=LONG_AGO)
    return owned(n, NodeRole.ACTIVE, other)


def test_a_control_plane_cut_off_from_every_kubelet_quarantines_no_node_of_a_one_node_job():
    # Five nodes: the job runs on one. Every kubelet's status goes stale at once (the node
    # lifecycle controller marks all Unknown) for two minutes; training runs on meanwhile.
    nodes = {f"n{i}": node(f"n{i}", rack=f"r{i % 3}") for i in range(5)}
    cluster = Cluster(spec(phase("train", 1, 1)), nodes)
    cluster.settle()
    (worker,) = cluster.running()
    _down(cluster, sorted(cluster.nodes))
    seen: list[str] = []
    for _ in range(24):
        cluster.advance(5)
        plan = cluster.step()
        seen += said(plan)
        assert of_kind(plan, QuarantineNode) == [] and of_kind(plan, DeletePod) == []
        if "MassFailure" in said(plan):
            message = _mass(cluster).message
            assert "5 of the 5 nodes of the cluster went NotReady together" in message
    assert _mass(cluster).status == "True"
    assert cluster.status.state == JobState.RECOVERING
    _up(cluster, sorted(cluster.nodes))
    for _ in range(4):
        cluster.advance(5)
        seen += said(cluster.step())
    assert [e for e in seen if e.startswith("MassFailure")] == ["MassFailure", "MassFailureCleared"]
    assert cluster.status.failures == [] and cluster.held(NodeRole.QUARANTINED) == []
    assert cluster.status.restarts == 0 and cluster.status.worker_restarts == 0
    assert cluster.running() == [worker] and cluster.status.state == JobState.RUNNING


def _rack_and_zone_cluster() -> Cluster:
    """The job holds ten nodes of zone z1, one of them in rack r9; beside it in r9, two nodes
    of another job and a free one; ten more nodes in zone z2."""
    nodes = {f"a{i}": node(f"a{i}", rack="r1") for i in range(9)}
    nodes["a9"] = node("a9", rack="r9")
    cluster = Cluster(spec(phase("train", 10, 10), spares=1), nodes)
    cluster.settle()
    assert len(cluster.held(NodeRole.ACTIVE)) == 10
    for i in range(10):
        cluster.nodes[f"c{i}"] = node(f"c{i}", rack="r2", block="b2", zone="z2")
    cluster.nodes["b0"] = _others(node("b0", rack="r9"), "other")
    cluster.nodes["b1"] = _others(node("b1", rack="r9"), "other")
    cluster.nodes["f0"] = node("f0", rack="r9")
    return cluster


def test_a_rack_going_dark_is_answered_by_each_job_onto_nodes_elsewhere():
    # Its switch dies: the rack's four nodes go dark together, one of ten for this job.
    cluster = _rack_and_zone_cluster()
    _down(cluster, ["a9", "b0", "b1", "f0"])
    cluster.advance(31)
    plan = cluster.step()
    assert [a.node for a in of_kind(plan, QuarantineNode)] == ["a9"]
    assert _mass(cluster).status == "False"


def test_a_zone_going_dark_holds_this_jobs_nodes_there():
    # The zone's network is cut: its 14 nodes go NotReady together; the job's own count
    # (14 of its 11, all its nodes) would trip too, so take a job that holds few of them.
    nodes = {f"a{i}": node(f"a{i}", rack="r1") for i in range(2)}
    cluster = Cluster(spec(phase("train", 1, 1), spares=1), nodes)
    cluster.settle()
    for i in range(6):
        cluster.nodes[f"o{i}"] = _others(node(f"o{i}", rack="r3"), "other")
    for i in range(6):
        cluster.nodes[f"c{i}"] = node(f"c{i}", rack="r2", block="b2", zone="z2")
    (active,) = cluster.held(NodeRole.ACTIVE)
    _down(cluster, [active, *(f"o{i}" for i in range(6))])  # 7 of zone z1's 8
    cluster.advance(31)
    plan = cluster.step()
    assert of_kind(plan, QuarantineNode) == [] and of_kind(plan, DeletePod) == []
    assert _mass(cluster).status == "True"
    assert "7 of the 8 nodes of zone z1 went NotReady together" in _mass(cluster).message
    assert [h.node for h in cluster.status.breaker.held] == [active]


def test_a_failure_beside_nodes_long_down_for_repair_is_still_answered():
    # Two of five nodes have been NotReady for a day (machines in repair): they did not go
    # down together with the job's node, whose lone failure is answered as ever.
    nodes = {f"n{i}": node(f"n{i}", rack="r1") for i in range(5)}
    cluster = Cluster(spec(phase("train", 1, 1)), nodes)
    cluster.settle()
    (active,) = cluster.held(NodeRole.ACTIVE)
    broken = [n for n in sorted(cluster.nodes) if n != active][:2]
    _down(cluster, broken, since=LONG_AGO)
    _down(cluster, [active])
    cluster.advance(31)
    plan = cluster.step()
    assert [a.node for a in of_kind(plan, QuarantineNode)] == [active]
    assert _mass(cluster).status == "False"


def test_a_lone_failure_in_a_sound_cluster_is_answered():
    nodes = {f"n{i}": node(f"n{i}", rack=f"r{i % 2}") for i in range(6)}
    cluster = Cluster(spec(phase("train", 1, 1)), nodes)
    cluster.settle()
    (active,) = cluster.held(NodeRole.ACTIVE)
    _down(cluster, [active])
    cluster.advance(31)
    plan = cluster.step()
    assert [a.node for a in of_kind(plan, QuarantineNode)] == [active]


def test_the_job_at_a_hundred_percent_answers_even_inside_an_outage():
    # maxFailedPercent 100 turns the breaker off; an outage does not turn it back on.
    nodes = {f"n{i}": node(f"n{i}", rack="r1") for i in range(4)}
    policy = {"massFailure": {"maxFailedPercent": 100}}
    cluster = Cluster(spec(phase("train", 1, 1), failurePolicy=policy), nodes)
    cluster.settle()
    _down(cluster, sorted(cluster.nodes))
    cluster.advance(31)
    plan = cluster.step()
    assert len(of_kind(plan, QuarantineNode)) == 1


def test_an_outage_is_judged_from_when_the_failures_began_not_from_now():
    # notReadyGrace (10m) is longer than massFailure.window (5m): the failures are found ten
    # minutes after every node went dark together, and that is still an outage.
    nodes = {f"n{i}": node(f"n{i}", rack=f"r{i % 3}") for i in range(5)}
    policy = {"notReadyGrace": "10m", "massFailure": {"window": "5m"}}
    cluster = Cluster(spec(phase("train", 1, 1), failurePolicy=policy), nodes)
    cluster.settle()
    _down(cluster, sorted(cluster.nodes))
    for _ in range(22):
        cluster.advance(30)
        plan = cluster.step()
        assert of_kind(plan, QuarantineNode) == [] and of_kind(plan, DeletePod) == []
    assert _mass(cluster).status == "True" and cluster.status.failures == []


def test_nodes_an_autoscaler_is_still_bringing_up_are_no_outage():
    # Ten nodes join at once and are NotReady until their kubelets are up: they never went
    # dark. The job's lone failure among them is answered.
    nodes = {f"n{i}": node(f"n{i}", rack="r1") for i in range(5)}
    cluster = Cluster(spec(phase("train", 1, 1)), nodes)
    cluster.settle()
    (active,) = cluster.held(NodeRole.ACTIVE)
    for i in range(10):
        fresh = replace(node(f"j{i}", rack="r1"), created=cluster.now)
        cluster.nodes[fresh.name] = with_ready(fresh, False, cluster.now)
    _down(cluster, [active])
    cluster.advance(31)
    plan = cluster.step()
    assert [a.node for a in of_kind(plan, QuarantineNode)] == [active]
