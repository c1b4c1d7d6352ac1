"""Only a quarantined node carries the ``phased.dev/quarantined`` taint: Phased puts it on in
the patch that makes a node quarantined and takes it off in the one that returns it. A node
whose role label a person set back to ``active`` or ``spare`` by hand while the taint stays
(``kubectl label --overwrite`` and ``kubectl uncordon``, the taint forgotten) has marks that
disagree: no job holds it. Its spare is never promoted — the workers, which do not tolerate
the quarantine taint, would wait Pending there — nor is it written on; it is left alone as
``PartialMarks``, named by ``NodesLeftAlone`` until a person removes the taint (then, the
marks agreeing again, it is the job's spare once more)."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import EmitEvent, NodeInfo, SetNodeRole, Taint
from phased.core.ownership import Kind, LeftAlone, holds, ownership
from tests.core.builders import JOB, SETTINGS, Cluster, node, nodes, owned, phase, spec, with_ready


def _returned_by_hand(n: NodeInfo, role: NodeRole) -> NodeInfo:
    """A quarantined node (with the quarantine taint the kube layer writes) that a person
    relabelled to ``role`` and uncordoned, removing the note but not the taint."""
    quarantined = owned(n, NodeRole.QUARANTINED)
    return replace(
        quarantined,
        labels={**quarantined.labels, labels.LABEL_ROLE: role.value},
        taints=(*quarantined.taints, Taint(labels.TAINT_QUARANTINE, JOB.uid)),
        annotations={},
        unschedulable=False,
    )


def test_marks_that_say_spare_and_quarantined_at_once_are_no_jobs() -> None:
    for role in (NodeRole.ACTIVE, NodeRole.SPARE):
        tampered = _returned_by_hand(node("m"), role)
        owner = ownership(tampered, SETTINGS.installation)
        assert (owner.kind, owner.reason) == (Kind.LEFT_ALONE, LeftAlone.PARTIAL_MARKS)
        assert not holds(tampered, JOB.uid, SETTINGS.installation)
    quarantined = owned(node("q"), NodeRole.QUARANTINED)
    quarantined = replace(
        quarantined, taints=(*quarantined.taints, Taint(labels.TAINT_QUARANTINE, JOB.uid))
    )
    assert holds(quarantined, JOB.uid, SETTINGS.installation)


def test_a_node_returned_as_a_spare_by_hand_with_the_taint_left_is_never_promoted() -> None:
    shared = {n.name: n for n in nodes("n", 4)}  # no free node once n00 is quarantined
    job = Cluster(spec(phase("train", 2, 2), spares=1), shared)
    job.settle()
    shared["n00"] = with_ready(shared["n00"], False, job.now)
    for _ in range(6):
        job.advance(60)
        job.step()
    assert job.held(NodeRole.QUARANTINED) == ["n00"]
    assert (job.held(NodeRole.ACTIVE), job.held(NodeRole.SPARE)) == (["n01", "n02"], ["n03"])
    healed = with_ready(shared["n00"], True, job.now)
    shared["n00"] = _returned_by_hand(healed, NodeRole.SPARE)  # a spare that sorts first
    before = len(job.log)

    shared["n01"] = with_ready(shared["n01"], False, job.now)
    for _ in range(8):
        job.advance(60)
        job.step()

    promoted = [a.node for a in job.log[before:] if isinstance(a, SetNodeRole)]
    assert promoted == ["n03"]
    assert not any(getattr(a, "node", None) == "n00" for a in job.log[before:])
    assert sorted(p.node_name or "" for p in job.running()) == ["n02", "n03"]
    said = [
        a.message
        for a in job.log[before:]
        if isinstance(a, EmitEvent) and a.reason == "NodesLeftAlone" and "n00" in a.message
    ]
    assert said and "n00 (PartialMarks)" in said[0]
