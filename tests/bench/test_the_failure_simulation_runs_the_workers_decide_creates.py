"""The failure simulation keeps the pods decide creates as the operator reads them back from
the API server: a worker names the job as its controller, or decide does not count it as
one. The simulation kept only a pod's name and labels; once workers had to name their job,
decide saw none of its pods and created the generation again at every pass, unnoticed."""

from __future__ import annotations

from bench.failure_sim import JOB, Setup, Sim

from phased.api.v1alpha1 import JobState, parse_spec
from phased.core.podlabels import made_by_job


def test_the_gang_decide_creates_is_the_one_that_runs() -> None:
    spec = parse_spec(
        {
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 4, "max": 4},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "expectedDuration": "1d",
                }
            ],
            "template": {"image": "registry.example/llm:1"},
            "spares": {"count": 1},
        }
    )
    sim = Sim(spec, Setup(rate="published", spares=1, grace="30s", seed=1))
    sim.events.clear()  # no random failures
    sim.reconcile()
    created = list(sim.pods.values())
    assert len(created) == 4
    assert all(made_by_job(JOB, p) for p in created)
    for pod in created:
        sim._start_pod(pod.name)
    sim.reconcile()
    assert sim.status.state == JobState.RUNNING
    assert sorted(sim.pods) == sorted(p.name for p in created)  # no generation made again
