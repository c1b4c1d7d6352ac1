"""``restartBudget`` counts workers failing on healthy nodes, the code's fault. When a node of
the generation has failed or is in trouble, the workers on the healthy nodes beside it often
fail first (their collective with the lost peer errors out before the node's grace runs
out): their failure is the node's doing. The gang restarts, counted in ``restarts``, but the
restart budget is not spent; with a budget of 0 the job does not fail on a node failure."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole, parse_spec
from phased.core.model import PodPhase
from tests.core.builders import Cluster, events, node, phase, spec, with_ready


def _running_job(budget: int = 0) -> Cluster:
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}") for i in range(12)}
    policy = {"restartBudget": budget}
    cluster = Cluster(spec(phase("train", 4, 8), spares=2, failurePolicy=policy), the_nodes)
    cluster.settle()
    assert len(cluster.running()) == 8
    return cluster


def _peers_fail(cluster: Cluster, lost: str) -> None:
    for pod in cluster.running():
        if pod.node_name != lost:
            cluster.pods[pod.name] = replace(pod, phase=PodPhase.FAILED, exit_code=1)


def _go_dark(cluster: Cluster) -> str:
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now)
    return lost


def test_peers_failing_while_their_node_is_within_its_grace_spend_no_restart_budget():
    cluster = _running_job()
    lost = _go_dark(cluster)
    cluster.advance(5)
    cluster.step()  # a suspect: waited for
    _peers_fail(cluster, lost)
    cluster.advance(5)
    cluster.step()
    assert cluster.status.state != JobState.FAILED, cluster.status.message
    assert cluster.status.worker_restarts == 0
    assert cluster.status.restarts == 1
    cluster.advance(60)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING and len(cluster.running()) == 8
    assert lost not in cluster.held(NodeRole.ACTIVE)


def test_peers_that_failed_before_their_nodes_failure_was_found_spend_no_restart_budget():
    cluster = _running_job()
    lost = _go_dark(cluster)
    _peers_fail(cluster, lost)
    cluster.advance(31)  # the first pass since: the grace has run out
    cluster.step()
    assert cluster.status.state != JobState.FAILED, cluster.status.message
    assert cluster.status.worker_restarts == 0 and cluster.status.restarts == 1
    assert [f.node for f in cluster.status.failures] == [lost]
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING and len(cluster.running()) == 8


def test_a_worker_failing_with_no_node_in_trouble_still_spends_it():
    cluster = _running_job(budget=1)
    victim = cluster.running()[0]
    cluster.pods[victim.name] = replace(victim, phase=PodPhase.FAILED, exit_code=1)
    cluster.step()
    assert cluster.status.worker_restarts == 1 and cluster.status.restarts == 1


def _reboot(cluster: Cluster, names: list[str]) -> None:
    """The nodes come back Ready; the workers they ran ended with them (restartPolicy Never)."""
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    for pod in list(cluster.pods.values()):
        if pod.node_name in names and pod.phase == PodPhase.RUNNING:
            cluster.pods[pod.name] = replace(pod, phase=PodPhase.FAILED, exit_code=137)


def test_workers_that_died_with_a_rack_the_breaker_held_spend_no_restart_budget():
    cluster = _running_job()
    dark = cluster.held(NodeRole.ACTIVE)[:3]  # 3 of 10: the breaker holds them
    for name in dark:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    cluster.step()
    assert [h.node for h in cluster.status.breaker.held] == dark
    cluster.advance(600)
    cluster.step()
    _reboot(cluster, dark)
    cluster.advance(5)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING, cluster.status.message
    assert cluster.status.worker_restarts == 0 and cluster.status.restarts == 1
    assert len(cluster.running()) == 8


def test_a_worker_that_died_in_a_blip_within_the_grace_spends_no_restart_budget():
    cluster = _running_job()
    blip = _go_dark(cluster)
    cluster.advance(10)
    cluster.step()
    cluster.advance(5)
    _reboot(cluster, [blip])
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING, cluster.status.message
    assert cluster.status.worker_restarts == 0 and cluster.status.restarts == 1


def test_peers_failing_as_a_lowered_max_meets_their_nodes_failure_spend_no_restart_budget():
    cluster = _running_job(budget=0)
    lost = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[lost] = with_ready(cluster.nodes[lost], False, cluster.now - timedelta(0, 600))
    _peers_fail(cluster, lost)
    raw = cluster.the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["phases"][0]["nodes"] = {"min": 4, "max": 4}
    cluster.the_spec = parse_spec(raw)
    plan = cluster.step()
    assert "PoolShrinking" in events(plan) and "RestartBudgetExceeded" not in events(plan)
    assert plan.status.state != JobState.FAILED and plan.status.worker_restarts == 0
    assert plan.status.restarts == 1
