"""A pod is a worker of the job only when the job is its controller: its controlling
ownerReference names the job's UID, as on every worker Phased makes. A pod that merely
carries the job's labels — a worker's manifest copied to debug it or to run an evaluation
beside it, another tool's pod — is not the job's: it never completes, fails or restarts a
phase, and Phased never deletes it, not at a gang restart, not when the job ends or is
deleted. Before, such a copy of rank 0 that exited 0 completed a phase whose completion
rule is rank 0 succeeding, and the job stopped its real workers."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import DeletePod, PodInfo, PodPhase
from tests.core.builders import JOB, SETTINGS, Cluster, nodes, phase, spec

RANK_ZERO = {"mode": "RankZeroSucceeded"}


def _running(**extra: object) -> Cluster:
    c = Cluster(
        spec(phase("train", 2, 2, **extra), phase("eval", 2, 2)), {n.name: n for n in nodes("h", 3)}
    )
    c.settle()
    assert len(c.running()) == 2
    return c


def _copy_of_rank(c: Cluster, rank: int, **changes: object) -> PodInfo:
    """A copy of the worker of ``rank``: its labels, no ownerReference to the job."""
    worker = next(p for p in c.pods.values() if p.rank == rank)
    copy = replace(worker, name=f"{worker.name}-copy", controller="", **changes)
    c.pods[copy.name] = copy
    return copy


def _deleted(c: Cluster, name: str) -> bool:
    return any(isinstance(a, DeletePod) and a.name == name for a in c.log)


def test_a_copy_of_rank_zero_that_succeeds_does_not_complete_the_phase():
    c = _running(completion=RANK_ZERO)
    copy = _copy_of_rank(c, 0, node_name="h02", phase=PodPhase.SUCCEEDED, exit_code=0)
    c.advance(30)
    c.step()
    assert c.status.phase == "train" and c.status.state == JobState.RUNNING
    assert len([p for p in c.running() if p.controller == JOB.uid]) == 2
    assert copy.name in c.pods and not _deleted(c, copy.name)


def test_a_gang_restart_stops_the_workers_and_leaves_a_copy_running():
    c = _running()
    copy = _copy_of_rank(c, 1, node_name="h02")
    name = next(p.name for p in c.pods.values() if p.rank == 0 and p.controller == JOB.uid)
    c.pods[name] = replace(c.pods[name], phase=PodPhase.FAILED, exit_code=1)
    c.advance(30)
    c.step()
    assert c.status.restart_generation == 1
    assert not _deleted(c, copy.name)


def test_a_copy_that_fails_restarts_nothing_and_spends_no_restart_budget():
    c = _running()
    _copy_of_rank(c, 0, node_name="h02", phase=PodPhase.FAILED, exit_code=1)
    c.pods = dict(reversed(list(c.pods.items())))  # the copy listed first
    c.advance(30)
    c.step()
    assert c.status.restart_generation == 0 and c.status.worker_restarts == 0


def test_deleting_the_job_deletes_its_workers_and_not_a_copy():
    c = _running()
    copy = _copy_of_rank(c, 0, node_name="h02")
    plan = decide(replace(c.snapshot(), job=replace(JOB, deleting=True)), SETTINGS, c.now)
    deleted = {a.name for a in plan.actions if isinstance(a, DeletePod)}
    assert deleted == {p.name for p in c.pods.values() if p.controller == JOB.uid}
    assert copy.name not in deleted


def test_a_job_that_ends_stops_its_workers_and_not_a_copy():
    c = _running()
    copy = _copy_of_rank(c, 0, node_name="h02")
    c.advance(30)
    c.finish_workers("train")
    c.pods[copy.name] = replace(c.pods[copy.name], phase=PodPhase.RUNNING)
    c.settle()
    c.advance(30)
    c.finish_workers("eval")
    c.pods[copy.name] = replace(c.pods[copy.name], phase=PodPhase.RUNNING)
    c.settle()
    assert c.status.state == JobState.SUCCEEDED
    assert not _deleted(c, copy.name)
    assert c.held(NodeRole.ACTIVE) == []
