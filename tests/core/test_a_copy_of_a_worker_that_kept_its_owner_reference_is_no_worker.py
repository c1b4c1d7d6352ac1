"""A pod is a worker of the job only when the job is its controller *and* it carries the
name Phased gives the worker its labels describe (``<job>-<phase>-g<generation>-<rank>``,
``-a<n>`` for a replacement attempt). A worker's manifest copied with ``kubectl get -o yaml``
and created again under another name keeps the ownerReference that names the job as its
controller: before, such a copy was counted as a worker. A copy of rank 0 that exited 0
completed a RankZeroSucceeded phase and the job stopped its real workers; a pod naming the
job with a world-size label within ``[min, max]`` above the running world made the job read
that world for the generation's, and the running job went back to Pending. Neither pod has
a name Phased could have made (two pods cannot share a name in a namespace, so while the
worker exists no other pod is it), so now it is neither counted nor deleted by Phased (the
garbage collector still deletes it with the job, as the ownerReference asks)."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState
from phased.core import labels
from phased.core.model import CreatePod, DeletePod, PodInfo, PodPhase
from tests.core.builders import JOB, Cluster, nodes, phase, spec

RANK_ZERO = {"mode": "RankZeroSucceeded"}


def _running(hi: int = 2, **extra: object) -> Cluster:
    c = Cluster(
        spec(phase("train", 2, hi, **extra), phase("eval", 2, 2)),
        {n.name: n for n in nodes("h", 3)},
    )
    c.settle()
    assert len(c.running()) == min(hi, 3)
    return c


def _kept_copy(c: Cluster, rank: int, name: str, **changes: object) -> PodInfo:
    """A copy of the worker of ``rank`` under ``name``: its labels and its ownerReference."""
    worker = next(p for p in c.pods.values() if p.rank == rank)
    copy = replace(worker, name=name, **changes)
    assert copy.controller == JOB.uid
    c.pods[copy.name] = copy
    return copy


def test_a_copy_of_rank_zero_keeping_its_owner_reference_that_succeeds_completes_nothing():
    c = _running(completion=RANK_ZERO)
    workers = {p.name for p in c.running()}
    copy = _kept_copy(
        c, 0, "llm-train-g0-0-debug", node_name="h02", phase=PodPhase.SUCCEEDED, exit_code=0
    )
    c.advance(30)
    c.step()
    assert c.status.phase == "train" and c.status.state == JobState.RUNNING
    assert {p.name for p in c.running()} == workers
    assert not any(isinstance(a, DeletePod) for a in c.log)
    assert copy.name in c.pods


def test_a_pod_naming_the_job_with_another_world_size_restarts_nothing():
    c = _running(4)
    assert c.status.world_size == 3
    workers = {p.name for p in c.running()}
    before = list(c.log)
    _kept_copy(
        c,
        1,
        "llm-train-g0-1-eval",
        node_name=None,
        phase=PodPhase.PENDING,
        labels={**c.pods["llm-train-g0-1"].labels, labels.LABEL_WORLD_SIZE: "4"},
    )
    c.advance(30)
    c.settle()
    assert c.status.state == JobState.RUNNING
    assert c.status.restart_generation == 0 and c.status.world_size == 3
    assert {p.name for p in c.running() if p.name in workers} == workers
    assert not any(isinstance(a, DeletePod | CreatePod) for a in c.log[len(before) :])
