"""Phased cordons only the nodes it quarantines. A node the job holds that someone else had
cordoned (a person who found it suspicious, a drain for maintenance) and that then fails is
quarantined as any failed node, and its quarantine note says the cordon was there before
(``cordonedBefore``). Healed under ``ReturnToSpares``, it is never made a spare again and
never uncordoned by Phased: it is released to the cluster still cordoned, and the event
says so. Before, the return uncordoned it and made it a spare, undoing a person's cordon."""

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import EmitEvent, UnquarantineNode
from phased.core.quarantine import decode_quarantine
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

RETURN = {"nodeReturn": "ReturnToSpares", "healthyBeforeReturn": "10m"}


def _failed(cordoned_first: bool) -> Cluster:
    """h00 (cordoned by a person first, or not) fails and is quarantined; h02, the spare,
    takes its place, and the spares are short with no free node left."""
    c = Cluster(
        spec(phase("train", 2, 2), spares=1, failurePolicy=RETURN),
        {n.name: n for n in nodes("h", 3)},
    )
    c.settle()
    if cordoned_first:
        c.nodes["h00"] = replace(c.nodes["h00"], unschedulable=True)
    c.nodes["h00"] = with_ready(c.nodes["h00"], False, c.now)
    for _ in range(3):
        c.advance(60)
        c.step()
    assert c.held(NodeRole.QUARANTINED) == ["h00"] and c.nodes["h00"].unschedulable
    return c


def _heal(c: Cluster) -> list[str]:
    c.nodes["h00"] = with_ready(c.nodes["h00"], True, c.now)
    for _ in range(15):
        c.advance(60)
        c.step()
    return [a.message for a in c.log if isinstance(a, EmitEvent) and "h00 healthy" in a.message]


def test_the_note_says_the_cordon_was_someone_elses():
    c = _failed(cordoned_first=True)
    note = decode_quarantine(c.nodes["h00"].annotations[labels.ANNOTATION_QUARANTINE])
    assert note is not None and note.cordoned_before


def test_healed_it_is_released_still_cordoned_and_never_made_a_spare():
    c = _failed(cordoned_first=True)
    said = _heal(c)
    assert "h00" not in c.held(NodeRole.SPARE) + c.held(NodeRole.ACTIVE)
    assert labels.LABEL_JOB_UID not in c.nodes["h00"].labels
    assert c.nodes["h00"].unschedulable  # the person's cordon stays
    assert len(said) == 1 and "still cordoned" in said[0]


def test_a_node_phased_cordoned_itself_returns_as_a_spare_uncordoned():
    c = _failed(cordoned_first=False)
    note = decode_quarantine(c.nodes["h00"].annotations[labels.ANNOTATION_QUARANTINE])
    assert note is not None and not note.cordoned_before
    said = _heal(c)
    assert c.held(NodeRole.SPARE) == ["h00"] and not c.nodes["h00"].unschedulable
    assert said == ["node h00 healthy again: back as a spare"]
    assert [a.node for a in c.log if isinstance(a, UnquarantineNode)] == ["h00"]
