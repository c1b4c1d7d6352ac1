from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import CreatePod, DeletePod, PodPhase, ReleaseNode
from tests.core.builders import (
    SETTINGS,
    T0,
    events,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)


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
    plan = decide(_snap("Gang"), SETTINGS, T0)
    assert sorted(d.name for d in of_type(plan, DeletePod)) == [
        f"llm-train-g0-{i}" for i in range(3)
    ]
    created = of_type(plan, CreatePod)
    assert sorted(c.manifest["metadata"]["name"] for c in created) == [
        f"llm-train-g1-{i}" for i in range(3)
    ]
    env = {e["name"]: e["value"] for e in created[0].manifest["spec"]["containers"][0]["env"]}
    assert env["PHASED_RESUME"] == "true" and env["PHASED_RESTART_GENERATION"] == "1"
    assert plan.status.restarts == 1 and plan.status.phases[0].restarts == 1
    assert "WorkersRestarted" in events(plan)


def test_worker_scope_replaces_only_that_rank_under_a_new_name():
    plan = decide(_snap("Worker"), SETTINGS, T0)
    assert [d.name for d in of_type(plan, DeletePod)] == ["llm-train-g0-1"]
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
