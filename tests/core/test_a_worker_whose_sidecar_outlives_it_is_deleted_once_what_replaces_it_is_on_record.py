"""A worker whose ``worker`` container ended while a sidecar of its pod runs on (lingering)
has ended, but its pod holds its node and GPUs as long as the sidecar runs. It is deleted
once what takes over from it is on record (a new generation, a newer attempt of its rank, the
next phase, the job's end), and no new worker is made on the job's nodes until it is gone.
While it is still what the job is judged by (a rank that succeeded before its peers) it is
kept. Before, such a worker was never seen to end (the pod said Running), and once read as
ended it would have been kept forever beside the workers that needed its node."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import JobState
from phased.core.model import CreatePod, DeletePod, PodPhase
from tests.core.builders import Cluster, nodes, of_type, phase, spec


def _running(*phases: dict[str, object]) -> Cluster:
    cluster = Cluster(spec(*phases), {n.name: n for n in nodes("h", 4)})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    cluster.advance(600)
    return cluster


def _end(cluster: Cluster, rank: int, ended: PodPhase) -> str:
    pod = next(p for p in cluster.running() if p.rank == rank)
    cluster.pods[pod.name] = replace(pod, phase=ended, lingering=True)
    return pod.name


def test_a_failed_worker_lingering_is_deleted_before_the_next_generation_is_made() -> None:
    cluster = _running(phase("train", 2, 2))
    failed = _end(cluster, 1, PodPhase.FAILED)
    cluster.advance(10)
    plans = cluster.settle()
    assert cluster.status.restarts == 1
    assert failed not in cluster.pods
    deleted_at = next(
        i for i, p in enumerate(plans) if failed in [a.name for a in of_type(p, DeletePod)]
    )
    assert not any(of_type(p, CreatePod) for p in plans[: deleted_at + 1])
    assert sorted(p.generation for p in cluster.running()) == [1, 1]


def test_a_worker_that_succeeded_first_is_kept_until_its_peers_have() -> None:
    cluster = _running(phase("train", 2, 2))
    done = _end(cluster, 1, PodPhase.SUCCEEDED)
    cluster.advance(10)
    cluster.settle()
    assert done in cluster.pods
    assert cluster.status.restarts == 0
    assert cluster.status.state == JobState.RUNNING

    last = _end(cluster, 0, PodPhase.SUCCEEDED)
    cluster.advance(10)
    cluster.settle()
    assert cluster.status.state == JobState.SUCCEEDED
    assert done not in cluster.pods and last not in cluster.pods


def test_the_next_phase_waits_for_the_lingering_workers_of_the_one_before() -> None:
    cluster = _running(phase("pre", 2, 2), phase("post", 2, 2))
    ended = [_end(cluster, r, PodPhase.SUCCEEDED) for r in (0, 1)]
    cluster.advance(10)
    plans = cluster.settle()
    assert cluster.status.phase == "post"
    deleted = [a.name for p in plans for a in of_type(p, DeletePod)]
    assert sorted(deleted) == sorted(ended)
    last_delete = max(
        i for i, p in enumerate(plans) if any(a.name in ended for a in of_type(p, DeletePod))
    )
    assert not any(of_type(p, CreatePod) for p in plans[: last_delete + 1])
    assert sorted(p.phase_name for p in cluster.running()) == ["post", "post"]
