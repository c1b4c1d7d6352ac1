"""Edits of a running job on the simulator: what cannot be honoured holds the job untouched
(an edit that slipped past the CRD's rules), what can takes effect cleanly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobSpec, TrainingJobStatus, parse_spec
from phased.core.decide import decide
from phased.core.model import (
    ClaimNode,
    CreatePod,
    DeletePod,
    EmitEvent,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
)
from tests.core.builders import (
    SETTINGS,
    T0,
    Cluster,
    events,
    node,
    nodes,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)

PHASES = (
    phase("preprocess", 2, 2),
    phase("train", 4, 4),
    phase("validate", 2, 2),
)


def _training(spares: int = 1, count: int = 8, *phases: dict[str, Any]) -> Cluster:
    """A job whose preprocess phase ran and whose train phase runs on 4 nodes."""
    cluster = Cluster(
        spec(*(phases or PHASES), spares=spares), {n.name: n for n in nodes("h", count)}
    )
    cluster.settle()
    cluster.advance(3600)
    cluster.finish_workers("preprocess")
    cluster.settle()
    assert cluster.status.phase == "train" and cluster.status.state == JobState.RUNNING
    return cluster


def _edit(the_spec: TrainingJobSpec, change: Callable[[dict[str, Any]], None]) -> TrainingJobSpec:
    raw = the_spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    change(raw)
    return parse_spec(raw)


def _swap_last_two(raw: dict[str, Any]) -> None:
    raw["phases"] = [raw["phases"][0], raw["phases"][2], raw["phases"][1]]


def _drop_first(raw: dict[str, Any]) -> None:
    raw["phases"] = raw["phases"][1:]


def _rename_running(raw: dict[str, Any]) -> None:
    raw["phases"][1]["name"] = "pretrain"


def _more_gpus(raw: dict[str, Any]) -> None:
    raw["phases"][1]["gpusPerNode"] = 16


def _other_type(raw: dict[str, Any]) -> None:
    raw["phases"][1]["gpuTypes"] = ["H200"]


def _to_cpu(raw: dict[str, Any]) -> None:
    raw["phases"][1]["gpuTypes"] = []
    raw["phases"][1]["gpusPerNode"] = 0


REFUSED = [
    ("the running phase moved last (it used to end the job)", _swap_last_two, "moved"),
    ("a phase that ran removed", _drop_first, "'preprocess' has already started"),
    ("the running phase renamed", _rename_running, "'train' has already started"),
    ("the running phase's gpusPerNode raised", _more_gpus, "gpusPerNode 8 (now 16)"),
    ("the running phase's GPU type changed", _other_type, "gpuTypes ['H100'] (now ['H200'])"),
    ("the running phase made CPU-only", _to_cpu, "gpusPerNode 8 (now 0)"),
]


@pytest.mark.parametrize(("case", "change", "needle"), REFUSED, ids=[c[0] for c in REFUSED])
def test_an_edit_that_slipped_past_the_crd_holds_the_job_untouched(
    case: str, change: Callable[[dict[str, Any]], None], needle: str
) -> None:
    cluster = _training()
    before = cluster.status
    workers = sorted(p.name for p in cluster.running())
    original = cluster.the_spec
    cluster.the_spec = _edit(original, change)

    plan = cluster.step()
    assert [type(a) for a in plan.actions] == [EmitEvent], plan.actions
    assert events(plan) == ["InvalidSpec"]
    assert plan.status.state == JobState.INVALID
    (cond,) = [c for c in plan.status.conditions if c.type == "InvalidSpec"]
    assert cond.status == "True" and needle in cond.message
    # The position and the history are kept as they were.
    assert (plan.status.phase, plan.status.phase_index) == ("train", 1)
    assert plan.status.restart_generation == before.restart_generation
    assert plan.status.phases == before.phases
    assert plan.status.accounting == before.accounting
    assert sorted(p.name for p in cluster.running()) == workers

    again = cluster.step()  # held: nothing new, not even the event
    assert again.actions == ()

    cluster.the_spec = original  # put back: the job carries on where it was
    cluster.advance(60)
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, DeletePod | CreatePod)]
    assert cluster.status.state == JobState.RUNNING and cluster.status.phase == "train"
    assert sorted(p.name for p in cluster.running()) == workers
    invalid = [c for c in cluster.status.conditions if c.type == "InvalidSpec"]
    assert [c.status for c in invalid] == ["False"]


def test_a_finished_job_stays_finished_and_keeps_its_history_when_phases_are_removed() -> None:
    cluster = _training(1, 8, phase("preprocess", 2, 2), phase("train", 2, 2))
    cluster.advance(3600)
    cluster.finish_workers("train")
    cluster.settle()
    assert cluster.status.state == JobState.SUCCEEDED
    history = cluster.status.phases
    cluster.the_spec = _edit(cluster.the_spec, _drop_first)
    plan = cluster.step()
    assert plan.status.state == JobState.SUCCEEDED
    assert plan.status.phases == history
    assert events(plan) == ["InvalidSpec"]
    assert not of_type(plan, CreatePod)


def test_lowering_nodes_max_below_the_world_restarts_the_gang_at_the_new_size() -> None:
    cluster = _training(spares=1)
    old = {p.name for p in cluster.running()}
    assert len(old) == 4
    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(2, 2))

    plan = cluster.step()
    deleted = {a.name for a in of_type(plan, DeletePod)}
    assert deleted == old  # every worker of the old generation, ranks 2 and 3 included
    assert "PoolShrinking" in events(plan) and "WorkersRestarted" in events(plan)
    assert plan.status.restart_generation == 1
    # Not a failure: nothing quarantined, no ledger entry, no restart counted against budgets.
    assert not of_type(plan, QuarantineNode) and plan.status.failures == []
    assert plan.status.restarts == 0 and plan.status.worker_restarts == 0
    assert plan.status.suspects == []

    plan = cluster.step()  # the old workers are gone: the new generation, at the new size
    created = [a.manifest for a in of_type(plan, CreatePod)]
    assert len(created) == 2
    assert {m["metadata"]["labels"]["phased.dev/world-size"] for m in created} == {"2"}
    assert plan.status.restart_generation == 1 and plan.status.world_size == 2
    assert plan.status.restarts == 0 and plan.status.failures == []

    cluster.settle()
    assert len(cluster.held(NodeRole.ACTIVE)) == 2
    assert len(cluster.held(NodeRole.SPARE)) == 1  # max + spares: the rest went back
    assert len([p for p in cluster.running() if p.phase_name == "train"]) == 2
    assert cluster.status.state == JobState.RUNNING


def test_lowering_nodes_max_to_the_world_or_above_restarts_nothing() -> None:
    cluster = _training(spares=1)
    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(3, 4))
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, DeletePod | CreatePod)]


def test_raising_nodes_max_grows_the_pool_at_the_next_generation_not_at_once() -> None:
    cluster = _training(spares=1, count=10)
    cluster.the_spec = _edit(cluster.the_spec, _set_train_nodes(4, 6))
    plans = cluster.settle()
    assert not [a for p in plans for a in p.actions if isinstance(a, DeletePod | CreatePod)]
    assert len(cluster.held(NodeRole.ACTIVE)) == 4

    # The next natural point: a worker fails, the gang restarts, and the pool grows to max.
    name = next(p.name for p in cluster.running() if p.phase_name == "train")
    cluster.pods[name] = replace(cluster.pods[name], phase="Failed", exit_code=1)
    cluster.settle()
    assert cluster.status.restart_generation == 1
    assert cluster.status.world_size == 6
    assert len(cluster.held(NodeRole.ACTIVE)) == 6


def test_spares_follow_an_edit_of_their_count_while_the_phase_runs() -> None:
    cluster = _training(spares=1, count=10)
    cluster.the_spec = _edit(cluster.the_spec, lambda raw: raw.update(spares={"count": 3}))
    plan = cluster.step()
    assert [a.role for a in of_type(plan, ClaimNode)] == [NodeRole.SPARE] * 2
    assert "SparesRefilled" in events(plan)
    assert not of_type(plan, DeletePod)

    cluster.the_spec = _edit(cluster.the_spec, lambda raw: raw.update(spares={"count": 0}))
    plan = cluster.step()
    assert len(of_type(plan, ReleaseNode)) == 3
    assert not of_type(plan, DeletePod) and not of_type(plan, SetNodeRole)
    assert cluster.held(NodeRole.SPARE) == []


def test_a_later_phase_may_change_and_the_job_follows_the_new_spec() -> None:
    cluster = _training(spares=0)

    def change(raw: dict[str, Any]) -> None:
        raw["phases"][2]["nodes"] = {"min": 3, "max": 3}
        raw["phases"].append(phase("export", 1, 1))

    cluster.the_spec = _edit(cluster.the_spec, change)
    assert cluster.settle()[0].status.state == JobState.RUNNING
    for name in ("train", "validate"):
        cluster.advance(3600)
        cluster.finish_workers(name)
        cluster.settle()
    assert cluster.status.phase == "export"
    assert cluster.status.phases[2].max_nodes_seen == 3


def test_raising_gpus_per_node_before_the_phase_starts_gives_back_nodes_that_cannot_serve() -> None:
    """A phase not started yet holds 4-GPU nodes (left from before the edit); the edit asks
    for 8 GPUs: the small nodes are released (not taken for failed nodes, not quarantined)."""
    small = [owned(n, NodeRole.ACTIVE) for n in nodes("s", 2, gpus=4)]
    big = nodes("b", 1)
    status = TrainingJobStatus(phase="train", state=JobState.WAITING)
    plan = decide(
        snapshot(spec(phase("train", 4, 4, gpus=8)), [*small, *big], status=status),
        SETTINGS,
        T0,
    )
    released = {a.node for a in of_type(plan, ReleaseNode)}
    assert released == {n.name for n in small}
    assert not of_type(plan, QuarantineNode) and plan.status.suspects == []
    assert plan.status.state == JobState.WAITING


def test_a_boundary_to_a_phase_needing_more_gpus_per_node_releases_the_smaller_nodes() -> None:
    small = {n.name: n for n in nodes("s", 2, gpus=4)}
    big = {n.name: n for n in nodes("b", 2)}
    first = phase("warmup", 4, 4, gpus=4)
    cluster = Cluster(spec(first, phase("train", 2, 2, gpus=8)), {**small, **big})
    cluster.settle()
    assert set(cluster.held(NodeRole.ACTIVE)) == {*small, *big}
    cluster.advance(3600)
    cluster.finish_workers("warmup")
    plans = cluster.settle()
    assert {a.node for p in plans for a in p.actions if isinstance(a, ReleaseNode)} == set(small)
    assert not [a for p in plans for a in p.actions if isinstance(a, QuarantineNode)]
    assert all(not p.status.suspects for p in plans)
    assert set(cluster.held(NodeRole.ACTIVE)) == set(big)
    assert cluster.status.state == JobState.RUNNING and cluster.status.phase == "train"


def _set_train_nodes(lo: int, hi: int) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        raw["phases"][1]["nodes"] = {"min": lo, "max": hi}

    return change


def test_a_node_view_without_capacity_still_counts_allocatable_gpus() -> None:
    """Capacity missing from a node (an older view): the GPU count falls back to allocatable."""
    bare = replace(node("h00"), capacity={})
    cluster = Cluster(spec(phase("train", 1, 1)), {bare.name: bare})
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING


def test_a_world_size_left_from_the_previous_phase_restarts_nothing() -> None:
    """A transition's status write was lost: the status still names preprocess and its world
    of 8, the pods say train runs on 2 (its max). No resize restart."""
    the_spec = spec(phase("preprocess", 8, 8), phase("train", 2, 2))
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("h", 2)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"h0{i}") for i in range(2)]
    status = TrainingJobStatus(phase="preprocess", state=JobState.RUNNING, world_size=8)
    plan = decide(snapshot(the_spec, held, pods, status), SETTINGS, T0)
    assert not of_type(plan, DeletePod) and not of_type(plan, CreatePod)
    assert plan.status.phase == "train" and plan.status.restart_generation == 0
