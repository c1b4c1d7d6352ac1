"""Crash safety: what the cluster shows is enough to rebuild the ledger and the position."""

from dataclasses import replace

from phased.api.v1alpha1 import FailureRecord, JobState, NodeRole, PhaseState, TrainingJobStatus
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import CreatePod, EmitEvent, PodPhase, SetNodeRole
from phased.core.quarantine import QuarantineNote, decode_quarantine, encode_quarantine
from phased.core.times import format_time
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    Cluster,
    at,
    landed,
    node,
    nodes,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)


def _quarantined(name, detected):
    note = QuarantineNote.for_action(JOB.uid, "NodeNotReady", "gone", detected, detected)
    return replace(
        owned(node(name), NodeRole.QUARANTINED),
        unschedulable=True,
        annotations={labels.ANNOTATION_QUARANTINE: encode_quarantine(note)},
    )


def test_the_note_round_trips():
    note = QuarantineNote.for_action("u", "GPUFault", "xid", at(-5), T0)
    assert decode_quarantine(encode_quarantine(note)) == note
    assert decode_quarantine("not json") is None and decode_quarantine('{"job": "u"}') is None


def test_a_quarantined_node_without_an_entry_gets_exactly_one():
    snap = snapshot(
        spec(phase("train", 1, 1)),
        [owned(node("a0"), NodeRole.ACTIVE), _quarantined("q0", at(-30))],
    )
    plan = decide(snap, SETTINGS, T0)
    assert [(f.id, f.node, f.detected) for f in plan.status.failures] == [
        (1, "q0", format_time(at(-30)))
    ]
    again = decide(replace(snap, status=plan.status), SETTINGS, at(1))
    assert len(again.status.failures) == 1


def test_an_existing_entry_is_not_duplicated():
    entry = FailureRecord(id=7, node="q0", reason="NodeNotReady", detected=format_time(at(-30)))
    status = TrainingJobStatus(failures=[entry])
    snap = snapshot(spec(phase("train", 1, 1)), [_quarantined("q0", at(-30))], status=status)
    assert [f.id for f in decide(snap, SETTINGS, T0).status.failures] == [7]


def test_a_node_that_fails_again_is_a_new_entry():
    entry = FailureRecord(id=1, node="q0", reason="NodeNotReady", detected=format_time(at(-900)))
    snap = snapshot(
        spec(phase("train", 1, 1)),
        [_quarantined("q0", at(-30))],
        status=TrainingJobStatus(failures=[entry]),
    )
    assert [f.id for f in decide(snap, SETTINGS, T0).status.failures] == [1, 2]


def test_the_phase_index_follows_the_pods_when_the_status_lagged():
    the_spec = spec(phase("prep", 1, 1), phase("train", 2, 2))
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    pods = [
        pod("llm-prep-g0-0", "prep", 0, node_name="a00", state=PodPhase.SUCCEEDED),
        pod("llm-train-g0-0", "train", 0, world=2, node_name="a00"),
        pod("llm-train-g0-1", "train", 1, world=2, node_name="a01"),
    ]
    status = TrainingJobStatus(phase="prep", phase_index=0, state=JobState.RUNNING)
    plan = decide(snapshot(the_spec, held, pods, status, service_exists=True), SETTINGS, T0)
    assert plan.status.phase == "train" and plan.status.phase_index == 1
    assert plan.status.phases[0].state == PhaseState.SUCCEEDED
    assert of_type(plan, CreatePod) == []


def test_a_generation_created_before_the_crash_is_not_created_again():
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    pods = [
        pod(f"llm-train-g3-{i}", "train", i, generation=3, world=2, node_name=f"a0{i}")
        for i in range(2)
    ]
    status = TrainingJobStatus(phase="train", restart_generation=2, state=JobState.RUNNING)
    plan = decide(
        snapshot(spec(phase("train", 2, 2)), held, pods, status, service_exists=True), SETTINGS, T0
    )
    assert plan.status.restart_generation == 3 and of_type(plan, CreatePod) == []


def test_a_phase_start_lost_with_the_status_write_is_read_back_from_its_first_worker():
    """The pass that created the workers recorded the phase's start, and its status write
    was lost: the start is the first worker's creation, not a later pass's clock."""
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    pods = [
        replace(pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a0{i}"), created=at(i))
        for i in range(2)
    ]
    status = TrainingJobStatus(phase="train", world_size=2, state=JobState.RUNNING)
    the_spec = spec(phase("train", 2, 2))
    plan = decide(snapshot(the_spec, held, pods, status, service_exists=True), SETTINGS, at(60))
    record = plan.status.phases[0]
    assert record.start_time == format_time(T0) and record.state == PhaseState.RUNNING
    assert not [e for e in of_type(plan, EmitEvent) if e.reason == "PhaseStarted"]  # said then
    again = decide(
        snapshot(the_spec, held, pods, plan.status, service_exists=True), SETTINGS, at(90)
    )
    assert again.status.phases[0].start_time == format_time(T0)


def test_a_rank_whose_create_was_lost_is_created_alone():
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 3)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=3, node_name=f"a0{i}") for i in range(2)]
    status = TrainingJobStatus(phase="train", world_size=3, state=JobState.RUNNING)
    plan = decide(
        snapshot(spec(phase("train", 3, 3)), held, pods, status, service_exists=True), SETTINGS, T0
    )
    assert [c.manifest["metadata"]["name"] for c in of_type(plan, CreatePod)] == ["llm-train-g0-2"]
    assert plan.status.restarts == 0


def test_the_world_size_lost_with_the_status_write_is_read_back_from_the_workers():
    """The pass that created the workers recorded their world size, and its status write
    was lost (or a create was refused, which writes the status as it was): the size is the
    one the workers were made with, not the 0 from before."""
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 3)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=3, node_name=f"a0{i}") for i in range(2)]
    status = TrainingJobStatus(phase="train", state=JobState.PENDING)
    plan = decide(
        snapshot(spec(phase("train", 2, 4)), held, pods, status, service_exists=True), SETTINGS, T0
    )
    created = of_type(plan, CreatePod)
    assert [c.manifest["metadata"]["name"] for c in created] == ["llm-train-g0-2"]
    assert created[0].manifest["metadata"]["labels"][labels.LABEL_WORLD_SIZE] == "3"
    assert plan.status.world_size == 3
    assert plan.status.message == "phase train running on 3 nodes"


def test_a_crash_between_quarantine_and_promotion_still_promotes_and_restarts():
    """The cordon and the pod deletion happened, the promotion and the status write did not:
    the rebuilt entry's swap is finished on the next pass, not left with a pending rank."""
    held = [owned(node("a00"), NodeRole.ACTIVE), owned(node("a01"), NodeRole.ACTIVE)]
    held += [owned(node("s00"), NodeRole.SPARE), _quarantined("q0", at(-20))]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=3, node_name=f"a0{i}") for i in range(2)]
    status = TrainingJobStatus(phase="train", world_size=3, state=JobState.RUNNING)
    the_spec = spec(phase("train", 3, 3), spares=1)
    snap = snapshot(the_spec, held, pods, status, service_exists=True)
    plan = decide(snap, SETTINGS, T0)
    promoted = [a for a in of_type(plan, SetNodeRole) if a.role == NodeRole.ACTIVE]
    assert [a.node for a in promoted] == ["s00"]
    assert plan.status.restart_generation == 1  # the gang restarts, with the spare in it
    assert len(of_type(landed(snap, plan).decide(), CreatePod)) == 3  # the survivors gone
    entry = next(f for f in plan.status.failures if f.node == "q0")
    assert entry.replaced_by == "s00"


def test_a_replacement_lost_with_the_status_write_is_read_back_from_the_spare():
    """The operator promoted a spare and restarted, then its status write was lost: the
    rebuilt entry names the spare that replaced the node, and when."""
    c = Cluster(
        spec(phase("train", 2, 2), spares=1, failurePolicy={"notReadyGrace": "5s"}),
        {n.name: n for n in nodes("n", 3)},
    )
    c.settle()
    (active, _), (spare,) = c.held(NodeRole.ACTIVE), c.held(NodeRole.SPARE)
    before = c.status
    c.nodes[active] = with_ready(c.nodes[active], False, c.now)
    c.advance(6)
    c.step()
    c.status = before  # the write after the swap never landed
    c.settle()
    (entry,) = c.status.failures
    assert (entry.node, entry.replaced_by) == (active, spare)
    assert entry.replaced == format_time(at(6)) and entry.resumed is not None
