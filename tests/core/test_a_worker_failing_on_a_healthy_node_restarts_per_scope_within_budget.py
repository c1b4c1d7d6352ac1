from dataclasses import replace

import pytest

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import CreatePod, DeletePod, PodPhase, ReleaseNode
from tests.core.builders import (
    SETTINGS,
    T0,
    at,
    events,
    landed,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)

# Deleted with a grace that ran out a minute before the pass: stuck, no longer waited for.
STUCK = at(-60)


def _snap(scope="Gang", budget=3, used=0):
    held = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(3)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=3, node_name=f"a{i}") for i in range(3)]
    pods[1] = pod("llm-train-g0-1", "train", 1, world=3, node_name="a1", state=PodPhase.FAILED)
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=3,
        worker_restarts=used,
        restarts=used,
        pool={"active": ["a0", "a1", "a2"]},
    )
    the_spec = spec(
        phase("train", 3, 3),
        failurePolicy={"restartScope": scope, "restartBudget": budget},
        launcher={"type": "Torchrun", "rendezvous": "C10d" if scope == "Worker" else "Static"},
    )
    return snapshot(the_spec, held, pods, status)


def test_gang_scope_starts_a_new_generation_that_resumes():
    snap = _snap("Gang")
    plan = decide(snap, SETTINGS, T0)
    # the failed worker stays, the record of the restart; the others are stopped
    assert sorted(d.name for d in of_type(plan, DeletePod)) == ["llm-train-g0-0", "llm-train-g0-2"]
    assert of_type(plan, CreatePod) == []  # not beside the survivors still stopping
    created = of_type(landed(snap, plan).decide(), CreatePod)
    assert sorted(c.manifest["metadata"]["name"] for c in created) == [
        f"llm-train-g1-{i}" for i in range(3)
    ]
    env = {e["name"]: e["value"] for e in created[0].manifest["spec"]["containers"][0]["env"]}
    assert env["PHASED_RESUME"] == "true" and env["PHASED_RESTART_GENERATION"] == "1"
    assert plan.status.restarts == 1 and plan.status.phases[0].restarts == 1
    assert "WorkersRestarted" in events(plan)


def test_worker_scope_replaces_only_that_rank_under_a_new_name():
    plan = decide(_snap("Worker"), SETTINGS, T0)
    assert of_type(plan, DeletePod) == []  # the failed worker stays, the record of the restart
    (created,) = of_type(plan, CreatePod)
    meta = created.manifest["metadata"]
    assert meta["name"] == "llm-train-g0-1-a1"
    assert created.manifest["spec"]["hostname"] == "llm-train-g0-1"  # DNS stays put
    assert plan.status.restart_generation == 0


def test_a_spent_budget_fails_the_job_and_releases_its_nodes():
    plan = decide(_snap("Gang", budget=2, used=2), SETTINGS, T0)
    assert plan.status.state == JobState.FAILED
    (cond,) = [c for c in plan.status.conditions if c.type == "Failed"]
    assert cond.reason == "RestartBudgetExceeded"
    assert "RestartBudgetExceeded" in events(plan)
    assert sorted(r.node for r in of_type(plan, ReleaseNode)) == ["a0", "a1", "a2"]
    assert of_type(plan, CreatePod) == []


def _absorbed(snap, plan, **pods_by_name):
    """The snapshot once the cluster took the plan's pods, but the status write was lost."""
    deleted = {d.name for d in of_type(plan, DeletePod)}
    kept = [p for p in snap.pods if p.name not in deleted]
    made = [
        pod(
            c.manifest["metadata"]["name"],
            "train",
            int(c.manifest["metadata"]["labels"]["phased.dev/rank"]),
            world=3,
            generation=int(c.manifest["metadata"]["labels"]["phased.dev/restart-generation"]),
            attempt=int(c.manifest["metadata"]["labels"]["phased.dev/attempt"]),
            node_name=f"a{c.manifest['metadata']['labels']['phased.dev/rank']}",
            **pods_by_name,
        )
        for c in of_type(plan, CreatePod)
    ]
    labelled = []
    for c, p in zip(of_type(plan, CreatePod), made, strict=True):
        extra = {k: v for k, v in c.manifest["metadata"]["labels"].items()}
        labelled.append(replace(p, labels={**p.labels, **extra}))
    return replace(snap, pods=tuple(kept + labelled))


@pytest.mark.parametrize("scope", ["Gang", "Worker"])
def test_a_lost_status_write_after_a_restart_neither_forgets_it_nor_repeats_it(scope):
    snap = _snap(scope, budget=5, used=2)
    plan = decide(snap, SETTINGS, T0)
    assert plan.status.worker_restarts == 3
    after = _absorbed(snap, plan)  # the status still says 2 restarts
    again = decide(after, SETTINGS, at(5))
    assert again.status.worker_restarts == 3 and again.status.restarts == 3
    if scope == "Worker":
        assert of_type(again, CreatePod) == [] and "WorkersRestarted" not in events(again)
    else:  # the new generation was not created yet: it is now, once
        names = sorted(c.manifest["metadata"]["name"] for c in of_type(again, CreatePod))
        assert names == [f"llm-train-g1-{i}" for i in range(3)]
        final = decide(_absorbed(after, again), SETTINGS, at(6))
        assert final.status.worker_restarts == 3 and of_type(final, CreatePod) == []


def test_a_gang_whose_workers_all_went_starts_a_generation_never_used_before():
    held = [owned(node(f"a{i}"), NodeRole.ACTIVE) for i in range(3)]
    gone = [
        replace(pod(f"llm-train-g0-{i}", "train", i, world=3, node_name=f"a{i}"), stop_by=STUCK)
        for i in range(3)
    ]
    status = TrainingJobStatus(phase="train", state=JobState.RUNNING, world_size=3)
    snap = snapshot(spec(phase("train", 3, 3)), held, gone, status, service_exists=True)
    plan = decide(snap, SETTINGS, T0)
    names = sorted(c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod))
    assert names == [f"llm-train-g1-{i}" for i in range(3)]
    assert plan.status.restart_generation == 1
