"""While the breaker holds, no held node's place is filled: not by promoting a spare, not by
a worker created again. A node deleted from the cluster (a rack's Node objects removed by a
cloud controller, say) is held like one that went NotReady; its worker is left as it is, or
as the pod garbage collector left it. A person's proceed then answers every held failure
once: a ledger entry each, the spares and free nodes as their replacements, one restart."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import ClaimNode, CreatePod, PodPhase, ReleaseNode, SetNodeRole
from phased.core.times import format_time
from tests.core.builders import Cluster, node, of_type, phase, spec, with_ready

BREAKER_EVENTS = {"MassFailure", "MassFailureCleared", "MassFailureReleased"}


def _running_job() -> Cluster:
    """Ten actives and two spares running, eight free nodes beside them."""
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}", rack=f"r{i // 4}") for i in range(20)}
    cluster = Cluster(spec(phase("train", 6, 10), spares=2), the_nodes)
    cluster.settle()
    assert len(cluster.held(NodeRole.ACTIVE)) == 10 and len(cluster.running()) == 10
    return cluster


def _delete(cluster: Cluster, names: list[str], pods_too: bool) -> None:
    for name in names:
        del cluster.nodes[name]
    if pods_too:  # the pod garbage collector removed the pods bound to them
        for pod in [p for p in cluster.pods.values() if p.node_name in names]:
            del cluster.pods[pod.name]


def _check_held(cluster: Cluster, gone: list[str], steps: int) -> None:
    actives = cluster.held(NodeRole.ACTIVE)
    spares = cluster.held(NodeRole.SPARE)
    names = {p.name for p in cluster.pods.values()}
    for _ in range(steps):
        plan = cluster.step()
        cluster.advance(20)
        assert [h.node for h in plan.status.breaker.held] == gone
        assert plan.status.state == JobState.RECOVERING
        assert of_type(plan, SetNodeRole) == [], "a spare took a held node's place"
        assert [c for c in of_type(plan, ClaimNode) if c.role == NodeRole.ACTIVE] == []
        assert of_type(plan, CreatePod) == [], "a held node's worker was created again"
        assert plan.status.failures == []
    assert cluster.held(NodeRole.ACTIVE) == actives and cluster.held(NodeRole.SPARE) == spares
    assert {p.name for p in cluster.pods.values()} == names


def _proceed(cluster: Cluster, gone: list[str]) -> None:
    cluster.annotations = {labels.ANNOTATION_PROCEED: format_time(cluster.now)}
    plans = cluster.settle()
    reasons = [e for p in plans for e in _events(p) if e in BREAKER_EVENTS]
    assert reasons == ["MassFailureReleased"]
    failures = cluster.status.failures
    assert sorted(f.node for f in failures) == gone  # each charged once
    assert all(f.reason == "NodeDeleted" and f.replaced_by for f in failures)
    assert len({f.replaced_by for f in failures}) == len(gone)
    assert cluster.status.restarts == 1
    assert len(cluster.held(NodeRole.ACTIVE)) == 10 and len(cluster.held(NodeRole.SPARE)) == 2
    running = cluster.running()
    assert len(running) == 10 and {p.generation for p in running} == {1}
    assert cluster.status.state == JobState.RUNNING


def _events(plan) -> list[str]:
    return [getattr(a, "reason", "") for a in plan.actions if type(a).__name__ == "EmitEvent"]


def test_three_of_ten_actives_deleted_with_their_pods_still_bound_are_held_in_place():
    cluster = _running_job()
    gone = cluster.held(NodeRole.ACTIVE)[:3]
    _delete(cluster, gone, pods_too=False)
    _check_held(cluster, gone, steps=5)
    _proceed(cluster, gone)


def test_three_of_ten_actives_deleted_with_their_pods_collected_are_held_in_place():
    cluster = _running_job()
    gone = cluster.held(NodeRole.ACTIVE)[:3]
    _delete(cluster, gone, pods_too=True)
    _check_held(cluster, gone, steps=5)
    survivors = [p for p in cluster.pods.values() if p.phase == PodPhase.RUNNING]
    assert len(survivors) == 7 and {p.generation for p in survivors} == {0}
    _proceed(cluster, gone)


def _fail_a_worker(cluster: Cluster, spared: list[str]) -> None:
    """A worker fails on a healthy node: the gang restarts while the breaker holds."""
    victim = next(p for p in cluster.running() if p.node_name not in spared)
    cluster.pods[victim.name] = replace(victim, phase=PodPhase.FAILED, exit_code=1)


def test_a_gang_restart_while_holding_does_not_fill_a_deleted_nodes_place():
    cluster = _running_job()
    gone = cluster.held(NodeRole.ACTIVE)[:3]
    _delete(cluster, gone, pods_too=True)
    cluster.step()
    _fail_a_worker(cluster, gone)
    actives, spares = cluster.held(NodeRole.ACTIVE), cluster.held(NodeRole.SPARE)
    plan = cluster.step()
    assert "WorkersRestarted" in _events(plan)
    assert (cluster.held(NodeRole.ACTIVE), cluster.held(NodeRole.SPARE)) == (actives, spares)
    _check_held(cluster, gone, steps=5)
    _proceed(cluster, gone)


def test_a_pool_formed_again_while_holding_gives_back_no_node_the_breaker_holds():
    # The whole cluster is the pool: three nodes go dark and a fourth is deleted, then a
    # worker fails on a healthy node. Re-forming the pool finds it short of nodes.min, but
    # the dark nodes are failures the breaker holds: giving them back would let them out
    # unquarantined and the breaker "clear" with nothing recovered.
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}") for i in range(8)}
    cluster = Cluster(spec(phase("train", 8, 8)), the_nodes)
    cluster.settle()
    dark = ["n00", "n01", "n02"]
    for name in dark:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    cluster.step()
    _delete(cluster, ["n03"], pods_too=True)
    cluster.step()
    _fail_a_worker(cluster, [*dark, "n03"])
    held = [*dark, "n03"]
    for _ in range(6):
        plan = cluster.step()
        cluster.advance(20)
        assert of_type(plan, ReleaseNode) == [] and of_type(plan, SetNodeRole) == []
        assert [h.node for h in plan.status.breaker.held] == held
        assert not {"MassFailureCleared", "MassFailureReleased"} & set(_events(plan))
    assert set(cluster.held(NodeRole.ACTIVE)) == set(the_nodes) - {"n03"}


def test_a_boundary_to_a_smaller_phase_while_holding_gives_back_only_what_it_does_not_hold():
    # The training phase's workers finish; three of its nodes go dark right after. The next
    # phase needs at most 3 nodes and 2 spares: the surplus goes back, the dark ones stay.
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}", rack=f"r{i // 4}") for i in range(16)}
    cluster = Cluster(spec(phase("train", 4, 8), phase("eval", 2, 3), spares=2), the_nodes)
    cluster.settle()
    cluster.finish_workers("train")
    dark = cluster.held(NodeRole.ACTIVE)[-3:]  # the farthest: the first a resize gives back
    for name in dark:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    for _ in range(4):
        plan = cluster.step()
        cluster.advance(20)
        assert plan.status.phase == "eval"
        assert [h.node for h in plan.status.breaker.held] == dark
        assert not set(dark) & {r.node for r in of_type(plan, ReleaseNode)}
        held = cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)
        assert len(held) <= 3 + 2 and set(dark) <= set(held)
        assert of_type(plan, CreatePod) == [] and of_type(plan, ClaimNode) == []


def test_the_hold_says_that_deleted_nodes_will_not_recover():
    cluster = _running_job()
    gone = cluster.held(NodeRole.ACTIVE)[:3]
    _delete(cluster, gone, pods_too=True)
    for _ in range(2):
        cluster.step()
        cluster.advance(20)
        (cond,) = [c for c in cluster.status.conditions if c.type == "MassFailure"]
        said = cond.message.split("; deleted, so they will not recover: ")[1]
        assert said == f"{', '.join(gone)} (only a proceed answers them)"
