"""A node that blips — NotReady for a few seconds, its worker dying with it, Ready again —
never outlasts its grace, so it never failed, and every blip restarted the whole gang,
without bound. The job remembers when troubles began on its nodes (``status.troubles``), and
a node whose trouble begins for the ``failurePolicy.flapping.troubles``-th time (default 3)
within ``flapping.window`` (default 24h) has failed as ``NodeFlapping``: quarantined, in the
ledger, swapped for a spare, through the breaker like any failure."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import (
    FailurePolicy,
    FailureReason,
    JobState,
    NodeRole,
    TroubleStart,
)
from phased.core.flapping import MAX_TROUBLES, remember
from phased.core.model import PodPhase, QuarantineNode
from phased.core.times import format_time, parse_time
from tests.core.builders import Cluster, at, events, node, of_type, phase, spec, with_ready

HOUR = 3600.0


def _job(size: int = 12, spares: int = 2, **policy: object) -> Cluster:
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}", rack=f"r{i % 4}") for i in range(size)}
    cluster = Cluster(spec(phase("train", 4, 8), spares=spares, failurePolicy=policy), the_nodes)
    cluster.settle()
    assert len(cluster.running()) == 8
    return cluster


def _blip(cluster: Cluster, names: list[str], seen: bool = True) -> list[str]:
    """``names`` go NotReady for 5 s, their workers die with them, they come back Ready.
    Returns the events of the passes meanwhile and after."""
    said: list[str] = []
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    if seen:  # a pass runs while they are down (their Ready change triggers one)
        cluster.advance(1)
        said += events(cluster.step())
    cluster.advance(4)
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    for pod in list(cluster.pods.values()):
        if pod.node_name in names and pod.phase == PodPhase.RUNNING:
            cluster.pods[pod.name] = replace(pod, phase=PodPhase.FAILED, exit_code=137)
    cluster.advance(1)
    for plan in cluster.settle():
        said += events(plan)
    return said


def _active(cluster: Cluster) -> str:
    return cluster.held(NodeRole.ACTIVE)[0]


def test_the_third_blip_within_the_window_fails_the_node_as_flapping():
    cluster = _job()
    flappy = _active(cluster)
    for _ in range(2):
        said = _blip(cluster, [flappy])
        assert "NodeFailed" not in said and flappy in cluster.held(NodeRole.ACTIVE)
        cluster.advance(HOUR)
    assert [t.node for t in cluster.status.troubles] == [flappy, flappy]
    said = _blip(cluster, [flappy])
    assert flappy in cluster.held(NodeRole.QUARANTINED)
    (entry,) = cluster.status.failures
    assert entry.node == flappy and entry.reason == FailureReason.NODE_FLAPPING.value
    assert "3 troubles that stopped its workers began within 24h" in entry.message
    assert entry.detected == cluster.status.troubles[-1].since  # when the third began
    assert entry.replaced_by in cluster.held(NodeRole.ACTIVE) and entry.resumed is not None
    for reason in ("NodeFailed", "NodeQuarantined", "SparePromoted"):
        assert said.count(reason) == 1, reason
    assert cluster.status.state == JobState.RUNNING and len(cluster.running()) == 8
    assert cluster.status.worker_restarts == 0


def test_a_node_flapping_on_and_on_restarts_the_gang_at_most_troubles_times():
    cluster = _job()
    flappy = _active(cluster)
    for _ in range(8):
        if flappy in cluster.held(NodeRole.ACTIVE):
            _blip(cluster, [flappy])
        cluster.advance(600)
    assert cluster.status.restarts == 3
    assert flappy in cluster.held(NodeRole.QUARANTINED)


def test_a_blip_no_pass_saw_counts_by_the_ready_condition_turning_true_again():
    cluster = _job()
    flappy = _active(cluster)
    for _ in range(3):
        _blip(cluster, [flappy], seen=False)
        cluster.advance(600)
    assert [f.reason for f in cluster.status.failures] == ["NodeFlapping"]
    assert cluster.status.restarts == 3


def test_blips_further_apart_than_the_window_are_not_flapping():
    cluster = _job()
    flappy = _active(cluster)
    for _ in range(4):
        _blip(cluster, [flappy])
        cluster.advance(13 * HOUR)
    assert cluster.status.failures == [] and flappy in cluster.held(NodeRole.ACTIVE)
    assert len(cluster.status.troubles) == 2  # the older ones left the window


def test_the_count_and_the_window_are_the_jobs_and_a_zero_window_turns_it_off():
    strict = _job(flapping={"troubles": 2, "window": "1h"})
    flappy = _active(strict)
    _blip(strict, [flappy])
    strict.advance(600)
    _blip(strict, [flappy])
    assert [f.reason for f in strict.status.failures] == ["NodeFlapping"]
    off = _job(flapping={"window": "0s"})
    flappy = _active(off)
    for _ in range(5):
        _blip(off, [flappy])
    assert off.status.failures == [] and off.status.troubles == []
    assert off.status.restarts == 5


def test_the_memory_is_in_the_status_so_a_restarted_operator_counts_on():
    cluster = _job()
    flappy = _active(cluster)
    earlier = [
        TroubleStart(
            node=flappy, reason="NodeNotReady", since=format_time(cluster.now - d), restarted=True
        )
        for d in (timedelta(hours=5), timedelta(hours=2))
    ]
    cluster.status = cluster.status.model_copy(update={"troubles": earlier})
    # A new operator: nothing but the status and the cluster to go on.
    cluster.nodes[flappy] = with_ready(cluster.nodes[flappy], False, cluster.now)
    cluster.advance(1)
    plan = cluster.step()
    assert [q.node for q in of_type(plan, QuarantineNode)] == [flappy]
    assert plan.status.failures[0].reason == "NodeFlapping"


def test_one_trouble_lasting_or_several_at_once_count_once():
    cluster = _job()
    flappy = _active(cluster)
    cluster.nodes[flappy] = with_ready(cluster.nodes[flappy], False, cluster.now)
    for _ in range(5):  # NotReady, then silent (Unknown), seen by pass after pass
        cluster.advance(3)
        cluster.step()
    gpus = {**cluster.nodes[flappy].allocatable, "nvidia.com/gpu": 0}
    cluster.nodes[flappy] = replace(
        with_ready(cluster.nodes[flappy], True, cluster.now), allocatable=gpus
    )
    cluster.advance(2)
    cluster.step()  # Ready again but short of GPUs: still the same trouble
    assert len(cluster.status.troubles) == 1


def test_many_nodes_flapping_together_trip_the_breaker_like_any_failures():
    cluster = _job()
    rack = cluster.held(NodeRole.ACTIVE)[:3]  # 3 of 10: more than 20 %
    for _ in range(2):
        _blip(cluster, rack)
        cluster.advance(HOUR)
    said = _blip(cluster, rack)
    assert "MassFailure" in said and "NodeQuarantined" not in said
    held = cluster.status.breaker.held
    assert [(h.node, h.reason) for h in held] == [(n, "NodeFlapping") for n in rack]
    # Healthy since, they count as flapping until the first of their troubles leaves the
    # window: then every held node has recovered.
    first = min(parse_time(t.since) for t in cluster.status.troubles)
    cluster.advance((first + timedelta(hours=24) - cluster.now).total_seconds() - 1)
    assert "MassFailureCleared" not in events(cluster.step())
    assert len(cluster.status.breaker.held) == 3
    cluster.advance(2)
    assert "MassFailureCleared" in events(cluster.step())
    cluster.settle()
    assert cluster.status.breaker.held == [] and cluster.status.failures == []
    assert cluster.status.state == JobState.RUNNING and len(cluster.running()) == 8


def test_a_flapping_node_returns_to_the_spares_only_once_its_troubles_age_out():
    cluster = _job(nodeReturn="ReturnToSpares", healthyBeforeReturn="10m")
    flappy = _active(cluster)
    for _ in range(3):
        _blip(cluster, [flappy])
        cluster.advance(HOUR)
    assert flappy in cluster.held(NodeRole.QUARANTINED)
    cluster.advance(HOUR)
    plan = cluster.step()
    assert flappy in cluster.held(NodeRole.QUARANTINED)  # healthy for 2 h, still flapping
    assert plan.requeue_after is not None and plan.requeue_after <= 22 * HOUR
    cluster.advance(22 * HOUR)
    cluster.settle()
    assert flappy not in cluster.held(NodeRole.QUARANTINED)


def test_the_memory_keeps_only_the_window_the_jobs_nodes_and_a_bounded_count():
    policy = FailurePolicy()
    now = at(0)
    roles = {f"n{i:03d}": NodeRole.ACTIVE for i in range(400)} | {"q": NodeRole.QUARANTINED}

    def start(name: str, hours_ago: float) -> TroubleStart:
        return TroubleStart(
            node=name, reason="NodeNotReady", since=format_time(now - timedelta(hours=hours_ago))
        )

    def kept(history: list[TroubleStart]) -> list[TroubleStart]:
        return remember(
            history,
            troubled=(),
            troubled_before=set(),
            pool_before=set(),
            written=now,
            nodes={},
            roles=roles,
            policy=policy,
            now=now,
        )

    history = [start("n000", 30), start("gone", 1), start("q", 1)]
    history += [start("n001", h) for h in (5, 4, 3, 2, 1)]
    assert kept(history) == [start("n001", 3), start("n001", 2), start("n001", 1), start("q", 1)]
    crowd = [start(f"n{i:03d}", 10 - i / 100) for i in range(2, 400)]
    assert kept(crowd) == crowd[-MAX_TROUBLES:]  # the newest, however large the pool


def test_blips_the_workers_live_through_count_for_nothing():
    """A control plane briefly out of reach makes every kubelet NotReady at once, and the
    workers run on: five such blips of the whole pool in an hour fail no node, trip no
    breaker and restart nothing."""
    cluster = _job()
    pool = cluster.held(NodeRole.ACTIVE) + cluster.held(NodeRole.SPARE)
    for _ in range(5):
        for name in pool:
            cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
        cluster.advance(1)
        said = events(cluster.step())
        cluster.advance(4)
        for name in pool:
            cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
        cluster.advance(1)
        for plan in cluster.settle():
            said += events(plan)
        assert not {"NodeFailed", "MassFailure", "WorkersRestarted"} & set(said), said
        cluster.advance(600)
    assert cluster.status.failures == [] and cluster.status.restarts == 0
    assert not any(t.restarted for t in cluster.status.troubles)
    assert len(cluster.running()) == 8


def test_a_held_flapping_node_whose_workers_lived_through_its_trouble_recovers_with_it():
    """The breaker holds nodes that would fail as flapping with the trouble they are in now
    (the third): nothing is answered, so that trouble stops no worker by itself. When they
    are Ready again with their workers still running, it was one the workers lived through
    and counts for nothing: the breaker clears, and the job is charged nothing beyond it.
    Before, the trouble was marked as one that stopped the workers as the breaker tripped,
    and the nodes were held as flapping (the job Recovering, its interruption growing) until
    their first trouble left the window, a day later."""
    cluster = _job()
    rack = cluster.held(NodeRole.ACTIVE)[:3]  # 3 of 10: more than 20 %
    for _ in range(2):
        _blip(cluster, rack)
        cluster.advance(HOUR)
    for name in rack:  # a third trouble, which the workers live through
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(1)
    assert "MassFailure" in events(cluster.step())
    assert [h.node for h in cluster.status.breaker.held] == rack
    cluster.advance(4)
    for name in rack:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.advance(1)
    said = [e for plan in cluster.settle() for e in events(plan)]
    assert "MassFailureCleared" in said and "WorkersRestarted" not in said
    assert cluster.status.breaker.held == [] and cluster.status.failures == []
    assert cluster.status.state == JobState.RUNNING and len(cluster.running()) == 8
    assert [t.restarted for t in cluster.status.troubles if t.node == rack[0]] == [
        True,
        True,
        False,
    ]
