"""A spare promoted to replace a failed node is marked ``clearing-since`` by the patch that
makes it active, and keeps the mark until the new worker is placed on it: while the gang
restart's survivors stop, while the pass that creates the new generation runs, and while
the new worker waits to be placed. A guest that reaches it meanwhile (a pod that tolerates
every taint, the pool's too) is evicted before the worker needs the node.

Before, the job's next pass found the node clear and dropped the mark while the survivors
were still stopping: a guest that came after that kept the new worker out until it had
waited ``PLACE_SECONDS`` unplaced, and at thousands of nodes that pass (a node patch) often
ran just as the last survivor left, so the pass that creates the new workers waited
behind it."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import CreatePod, DeletePod, EvictPod, FinishClearing, Plan, SetNodeRole
from phased.core.times import format_time
from tests.core.builders import (
    SETTINGS,
    T0,
    Cluster,
    at,
    landed,
    node,
    node_pod,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)

A, S = NodeRole.ACTIVE, NodeRole.SPARE
GRACE = 20  # failurePolicy.survivorGracePeriod


def _answered() -> Cluster:
    """Three workers on a0..a2 and the spare s0; a0 NotReady past its grace. The answer
    landed: a0 quarantined, s0 promoted and marked as the kube layer marks it, the
    survivors on a1 and a2 stopping (Terminating) within their grace."""
    held = [owned(node(f"a{i}"), A) for i in range(3)] + [owned(node("s0"), S)]
    held[0] = with_ready(held[0], False, at(-60))
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=3, node_name=f"a{i}") for i in range(3)]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=3,
        pool={"active": ["a0", "a1", "a2"], "spares": ["s0"]},
    )
    the_spec = spec(
        phase("train", 3, 3), spares=1, failurePolicy={"survivorGracePeriod": f"{GRACE}s"}
    )
    snap = snapshot(the_spec, held, pods, status, service_exists=True)
    plan = decide(snap, SETTINGS, T0)
    assert [a.node for a in of_type(plan, SetNodeRole) if a.role == A] == ["s0"]
    cluster = landed(snap, plan)
    s0 = cluster.nodes["s0"]
    marks = {
        labels.ANNOTATION_CLEARING: format_time(T0),
        labels.ANNOTATION_CLAIMED_AT: format_time(T0 - timedelta(hours=1)),
    }
    cluster.nodes["s0"] = replace(s0, annotations={**s0.annotations, **marks})
    was = {p.name: p for p in snap.pods}
    for d in of_type(plan, DeletePod):
        if not d.force:  # a0's worker went at once: its kubelet is gone
            cluster.pods[d.name] = replace(was[d.name], stop_by=at(GRACE))
    return cluster


def _marked(cluster: Cluster) -> bool:
    return labels.ANNOTATION_CLEARING in cluster.nodes["s0"].annotations


def _finishes(plan: Plan) -> list[str]:
    return [a.node for a in of_type(plan, FinishClearing)]


def test_the_mark_stays_while_the_survivors_stop_and_the_workers_are_created_and_placed():
    cluster = _answered()
    cluster.advance(1)
    plan = cluster.step()  # the survivors still stopping: nothing to create yet
    assert of_type(plan, CreatePod) == [] and _finishes(plan) == []
    assert _marked(cluster)

    for name in ("llm-train-g0-1", "llm-train-g0-2"):
        cluster.pods.pop(name)  # the survivors are gone
    cluster.advance(1)
    plan = cluster.decide()  # creates the new generation; its workers are still to come
    assert len(of_type(plan, CreatePod)) == 3 and _finishes(plan) == []
    cluster.apply(plan)
    assert _marked(cluster)

    cluster.schedule()  # each new worker placed, one of them on s0
    assert any(p.node_name == "s0" and p.generation == 1 for p in cluster.running())
    cluster.advance(1)
    assert _finishes(cluster.step()) == ["s0"]
    assert not _marked(cluster)


def test_a_guest_that_reaches_the_promoted_spare_while_the_survivors_stop_is_evicted():
    cluster = _answered()
    cluster.advance(1)
    cluster.step()  # found clear: before, the mark went here
    cluster.guests["s0"] = [node_pod("tolerates-all", "s0", created=cluster.now)]
    cluster.advance(1)
    plan = cluster.step()
    assert [a.name for a in of_type(plan, EvictPod)] == ["tolerates-all"]
    assert _marked(cluster)
