"""Others' pods that reach one of the job's active nodes while no worker holds it — between
the generations of a gang restart, at a phase boundary, before a rank's replacement, when the
old workers are gone and the new ones not yet placed — are guests, as on a node that becomes
active: once a worker of the job has waited ``PLACE_SECONDS`` unplaced, each active node on which
no pod of the job holds the GPUs is marked ``clearing-since``, and pods there that came after
the node's claim (one that tolerates every taint, the pool's too) are evicted, then deleted
past ``guestEvictionTimeout``; the mark stays while the worker waits. Before, only a node that
had just become active was cleared: such a pod kept the node's GPUs, and the new worker waited
Pending there until ``pendingGrace`` failed the start.

A pod that was there before the claim is still left alone, and while the workers are placed
as they should be no node is marked (the common case costs no request)."""

from dataclasses import replace
from datetime import datetime, timedelta

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import (
    DeletePod,
    EmitEvent,
    EvictPod,
    FinishClearing,
    PodPhase,
    StartClearing,
)
from phased.core.times import format_time
from tests.core.builders import Cluster, node_pod, nodes, phase, spec


def _running(claimed: datetime | None = None) -> Cluster:
    c = Cluster(spec(phase("train", 2, 2)), {n.name: n for n in nodes("h", 2)})
    c.settle()
    assert c.held(NodeRole.ACTIVE) == ["h00", "h01"] and len(c.running()) == 2
    for name in ("h00", "h01"):  # as the claim writes it
        n = c.nodes[name]
        at = format_time(claimed or c.now)
        c.nodes[name] = replace(n, annotations={**n.annotations, labels.ANNOTATION_CLAIMED_AT: at})
    return c


def _restart_with_a_guest_landing(c: Cluster, created: datetime) -> None:
    """A worker fails; once the gang restart stopped the old workers, another's pod that
    tolerates everything lands on h00 before the next generation is placed."""
    c.advance(600)
    failed = next(p.name for p in c.pods.values() if p.node_name == "h01")
    c.pods[failed] = replace(c.pods[failed], phase=PodPhase.FAILED, exit_code=1)
    for _ in range(4):
        c.advance(5)
        plan = c.decide()
        if any(isinstance(a, DeletePod) for a in plan.actions):
            c.apply(plan)
            break
        c.apply(plan)
        c.schedule()
    c.guests["h00"] = [node_pod("tolerates-all", "h00", created=created)]


def _walk(c: Cluster, steps: int) -> None:
    for _ in range(steps):
        c.advance(5)
        c.step()


def test_a_pod_that_landed_on_an_active_node_between_generations_is_evicted():
    c = _running()
    _restart_with_a_guest_landing(c, c.now + timedelta(seconds=600))
    _walk(c, 8)
    assert [a.name for a in c.log if isinstance(a, EvictPod)] == ["tolerates-all"]
    assert any(isinstance(a, EmitEvent) and a.reason == "GuestsEvicted" for a in c.log)
    assert sorted(p.node_name or "" for p in c.running() if p.generation == 1) == ["h00", "h01"]
    assert not any(labels.ANNOTATION_CLEARING in c.nodes[n].annotations for n in ("h00", "h01"))


def test_a_pod_there_before_the_claim_is_left_alone_between_generations():
    c = _running()
    _restart_with_a_guest_landing(c, c.now - timedelta(hours=1))
    _walk(c, 8)
    assert not [a for a in c.log if isinstance(a, EvictPod)]
    assert any(isinstance(a, EmitEvent) and a.reason == "GuestsLeftAlone" for a in c.log)


def test_no_node_is_marked_while_the_workers_are_placed_as_they_should_be():
    c = _running()
    c.advance(600)
    failed = next(p.name for p in c.pods.values() if p.node_name == "h01")
    c.pods[failed] = replace(c.pods[failed], phase=PodPhase.FAILED, exit_code=1)
    _walk(c, 8)
    assert sorted(p.node_name or "" for p in c.running() if p.generation == 1) == ["h00", "h01"]
    assert not [a for a in c.log if isinstance(a, EvictPod | StartClearing | FinishClearing)]


def test_the_mark_stays_while_the_worker_still_waits_and_goes_once_it_is_placed():
    c = _running()
    _restart_with_a_guest_landing(c, c.now + timedelta(seconds=600))
    c.guests["h00"][0] = replace(c.guests["h00"][0], deleting=True)  # leaving on its own
    _walk(c, 4)
    assert labels.ANNOTATION_CLEARING in c.nodes["h00"].annotations  # looked at, kept
    assert not [a for a in c.log if isinstance(a, EvictPod)]
    c.guests["h00"] = []  # gone
    _walk(c, 3)
    assert sorted(p.node_name or "" for p in c.running() if p.generation == 1) == ["h00", "h01"]
    assert labels.ANNOTATION_CLEARING not in c.nodes["h00"].annotations
    assert [a.node for a in c.log if isinstance(a, StartClearing)] == ["h00"]


def test_a_pod_that_took_a_failed_ranks_node_before_its_replacement_is_evicted():
    the_spec = spec(
        phase("train", 2, 2),
        failurePolicy={"restartScope": "Worker"},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    c = Cluster(the_spec, {n.name: n for n in nodes("h", 2)})
    c.settle()
    for name in ("h00", "h01"):
        n = c.nodes[name]
        at = format_time(c.now)
        c.nodes[name] = replace(n, annotations={**n.annotations, labels.ANNOTATION_CLAIMED_AT: at})
    c.advance(600)
    failed = next(p.name for p in c.pods.values() if p.node_name == "h01")
    c.pods[failed] = replace(c.pods[failed], phase=PodPhase.FAILED, exit_code=1)
    c.guests["h01"] = [node_pod("tolerates-all", "h01", created=c.now)]
    _walk(c, 8)
    assert c.status.restart_generation == 0  # the rank alone was replaced
    assert [a.name for a in c.log if isinstance(a, EvictPod)] == ["tolerates-all"]
    assert sorted(p.node_name or "" for p in c.running()) == ["h00", "h01"]
