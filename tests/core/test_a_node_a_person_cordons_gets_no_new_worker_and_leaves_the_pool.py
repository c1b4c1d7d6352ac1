"""A held node that a person cordons (``kubectl cordon``, or ``kubectl drain``, which cordons
and then evicts) is never given a new worker: a cordoned spare is not promoted, and once no
worker of the job runs on a cordoned node it leaves the pool, still cordoned, and the pool
is made whole from spares and free nodes. A worker already running there is left alone: a
cordon stops new pods, not running ones."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import EmitEvent, PodPhase, QuarantineNode, ReleaseNode, SetNodeRole
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

TRAIN = spec(phase("train", 2, 2), spares=1)


def _running(free: int = 1) -> Cluster:
    """h00, h01 active and running, h02 the spare, ``free`` more nodes nobody holds."""
    c = Cluster(TRAIN, {n.name: n for n in nodes("h", 3 + free)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and c.held(NodeRole.SPARE) == ["h02"]
    assert len(c.running()) == 2
    return c


def _cordon(c: Cluster, name: str) -> None:
    c.nodes[name] = replace(c.nodes[name], unschedulable=True)


def _settle(c: Cluster) -> None:
    for _ in range(12):
        c.advance(30)
        plan = c.step()
        if not any(not isinstance(a, EmitEvent) for a in plan.actions):
            return
    raise AssertionError("not quiet")


def _workers_on(c: Cluster) -> dict[str, PodPhase]:
    return {p.node_name or p.name: p.phase for p in c.pods.values() if not p.deleting}


def _all_running_uncordoned(c: Cluster) -> None:
    live = [p for p in c.pods.values() if p.generation == c.status.restart_generation]
    assert len(live) == 2 and all(p.phase == PodPhase.RUNNING for p in live), _workers_on(c)
    assert not any(c.nodes[p.node_name].unschedulable for p in live if p.node_name)


def test_a_cordoned_spare_is_not_promoted_when_an_active_node_fails():
    c = _running(free=1)
    _cordon(c, "h02")
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    c.advance(600)  # past notReadyGrace
    _settle(c)
    promoted = [a.node for a in c.log if isinstance(a, SetNodeRole) and a.role == NodeRole.ACTIVE]
    assert "h02" not in promoted
    _all_running_uncordoned(c)
    assert c.status.state == JobState.RUNNING


def test_a_cordoned_spare_leaves_the_pool_still_cordoned_and_a_free_node_takes_its_place():
    c = _running(free=1)
    _cordon(c, "h02")
    _settle(c)
    assert c.held(NodeRole.SPARE) == ["h03"]
    assert "h02" not in c.held(NodeRole.ACTIVE)
    assert c.nodes["h02"].unschedulable and not c.nodes["h02"].owner_uid
    released = [e for e in c.log if isinstance(e, EmitEvent) and e.reason == "CordonedNodeReleased"]
    assert len(released) == 1 and "h02" in released[0].message
    assert len(c.running()) == 2  # nothing restarted


def test_a_drained_active_node_is_replaced_by_the_spare_and_leaves_the_pool():
    c = _running(free=0)
    _cordon(c, "h00")
    evicted = next(p.name for p in c.pods.values() if p.node_name == "h00")
    del c.pods[evicted]  # the drain's eviction
    _settle(c)
    assert "h00" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)
    assert c.nodes["h00"].unschedulable
    _all_running_uncordoned(c)
    assert sorted(p.node_name for p in c.running()) == ["h01", "h02"]


def test_a_cordon_alone_leaves_the_running_worker_and_the_node_be():
    c = _running(free=1)
    _cordon(c, "h00")
    _settle(c)
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"]
    assert c.status.restart_generation == 0 and len(c.running()) == 2
    assert not [a for a in c.log if isinstance(a, ReleaseNode) and a.node == "h00"]


def test_the_next_generation_is_not_placed_on_an_active_node_a_person_cordoned():
    c = _running(free=1)
    _cordon(c, "h00")
    # The worker on h01 fails: the gang restarts; the cordoned h00 gets no new worker.
    name = next(p.name for p in c.pods.values() if p.node_name == "h01")
    c.pods[name] = replace(c.pods[name], phase=PodPhase.FAILED, exit_code=1)
    _settle(c)
    assert c.status.restart_generation == 1
    _all_running_uncordoned(c)
    assert "h00" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)


def test_a_cordoned_node_in_trouble_is_still_answered_as_a_failure():
    c = _running(free=1)
    _cordon(c, "h00")
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    c.advance(600)
    _settle(c)
    assert [a.node for a in c.log if isinstance(a, QuarantineNode)] == ["h00"]
    assert [f.node for f in c.status.failures] == ["h00"]
    _all_running_uncordoned(c)


def test_a_worker_failing_on_a_cordoned_node_is_a_worker_failure_and_its_pod_is_kept():
    c = _running(free=1)
    _cordon(c, "h00")
    name = next(p.name for p in c.pods.values() if p.node_name == "h00")
    c.pods[name] = replace(c.pods[name], phase=PodPhase.FAILED, exit_code=1)
    _settle(c)
    assert c.status.worker_restarts == 1  # counted against restartBudget, as anywhere
    assert name in c.pods  # the failed worker stays, the record of why
    assert not [a for a in c.log if getattr(a, "name", None) == name]
    _all_running_uncordoned(c)
    assert "h00" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)


def test_a_rank_replaced_after_failing_on_a_cordoned_node_goes_to_the_spare():
    the_spec = spec(
        phase("train", 2, 2),
        spares=1,
        failurePolicy={"restartScope": "Worker"},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    c = Cluster(the_spec, {n.name: n for n in nodes("h", 4)})
    c.settle()
    _cordon(c, "h00")
    name = next(p.name for p in c.pods.values() if p.node_name == "h00")
    c.pods[name] = replace(c.pods[name], phase=PodPhase.FAILED, exit_code=1)
    _settle(c)
    assert c.status.worker_restarts == 1 and name in c.pods
    running = sorted(p.node_name or "" for p in c.running())
    assert running == ["h01", "h02"], _workers_on(c)
    assert "h00" not in c.held(NodeRole.ACTIVE) + c.held(NodeRole.SPARE)
