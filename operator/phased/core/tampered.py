"""A node of the job's pool whose marks someone else changed: said once, never touched.

Pool membership is on the Nodes (:mod:`phased.core.ownership`); the job's status keeps the
pool as the last pass left it (``status.pool``). A node named there that the job no longer
holds, though it is still in sight and still carries marks, was changed by someone else: a
person edited or removed a label (``job-uid``, ``role``, ``installation``), another
controller wrote a role Phased never writes, or a taint now disagrees with the label. The
job has already let go of it — its worker is moved as after any loss of a node, it is never
promoted, released or written on — and it is left alone with the reason its marks give.
This says so, once (the next pass's ``status.pool`` no longer names it), with a Warning
``NodeMarksChanged``: otherwise the only word was "node n00 failed", and a person looked for
a broken node and found a healthy one.

Not news: a node whose marks are all gone (a person released it by hand; or a claim the node
view has not delivered yet, which looks the same), a quarantined node no job holds (it
waits for a person whatever happened: ``Quarantined``), and a node another job of this
installation holds by the full set a claim writes, claimed (``claimed-at``) after the status
naming it in the pool was written: this job gave it back in a pass whose status write was
lost, and the other job claimed it, as Phased does.
"""

from __future__ import annotations

from datetime import datetime

from phased.core.draft import WARNING, Draft
from phased.core.labels import ANNOTATION_CLAIMED_AT
from phased.core.model import NodeInfo
from phased.core.ownership import Kind, LeftAlone, ownership
from phased.core.times import parse_time


def _claimed_since(node: NodeInfo, written: datetime | None) -> bool:
    """``node`` carries the ``claimed-at`` a claim writes with its marks, later than
    ``written`` (when the status naming it in the pool was written): claimed since this job
    last said it held the node. A person who edits the UID of a node the job holds, label and
    taint alike, leaves the job's own, earlier, ``claimed-at``."""
    claimed = parse_time(node.annotations.get(ANNOTATION_CLAIMED_AT))
    return claimed is not None and written is not None and claimed > written


def say_marks_changed(draft: Draft) -> None:
    """A Warning for each node of the last pass's pool that the job no longer holds because
    of marks Phased did not write (module docstring). Call before anything changes roles."""
    pool = draft.snap.status.pool
    written = parse_time(draft.snap.status.accounting.accounted_at)
    for name in sorted({*pool.active, *pool.spares, *pool.quarantined}):
        node = draft.nodes.get(name)
        if node is None or name in draft.roles:
            continue
        owner = ownership(node, draft.settings.installation)
        if owner.kind == Kind.UNMARKED or owner.reason == LeftAlone.QUARANTINED:
            continue
        if owner.kind == Kind.OURS and _claimed_since(node, written):
            continue  # given back, then claimed by another job of ours: Phased's own doing
        now = (
            f"they name job UID {owner.uid}"
            if owner.kind == Kind.OURS
            else f"{owner.reason}: they no longer name this job as Phased writes them"
        )
        draft.event(
            WARNING,
            "NodeMarksChanged",
            f"node {name} left the pool: its phased.dev/ marks were changed, not by Phased "
            f"({now}); it is left alone, and a worker of the job there is moved as after "
            "the loss of a node",
        )
