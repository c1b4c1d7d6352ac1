"""An operator killed in the middle of a pass carries on correctly from what is in the
cluster. A pass acts (claims, quarantines, role changes, releases, pod creations and
deletions, in its plan's order) and then writes the job's status; killed at any moment, a
prefix of its actions has landed and the status write has not. The random failure
sequences of the property test next door are driven with such kills drawn among them, and
the pass after each kill — a new operator reading only the cluster and the status as last
written — is held to every rule that property test checks: the pool as labelled, no ledger
entry lost (every node quarantined by the lost pass has its entry), nothing done to a
stranger, no worker made twice under one name, no restart count going down; and once every
node is healthy again the job makes progress."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from phased.core.model import Action, DeletePod, EmitEvent
from phased.reconcile import _waits_for_deletions, batches
from tests.core.builders import Cluster
from tests.hostile.test_random_failure_sequences_keep_the_pool_and_the_ledger_whole import (
    BOUNDED,
    WORKER_SCOPE,
    _cluster,
    _happen,
    _pass,
    _progress,
    events,
    jobs,
)

GANG = {**WORKER_SCOPE, "scope": "Gang"}  # ten nodes, no spare, a budget of one restart

# After each happening, the first pass may be killed, after this share (%) of its actions.
kills = st.one_of(st.none(), st.integers(0, 100))


def landed_before_kill(actions: Sequence[Action], cut: int) -> list[Action]:
    """What of a plan's actions (its events aside) landed when its pass was killed after
    ``cut`` % of them were sent. They go in batches (``reconcile.batches``), each batch's
    requests at once: every batch before the kill landed whole, and of the one in flight
    any may have landed — here as many as the cut reaches, its first ones for an even cut
    and its last ones for an odd one. A batch's pod deletions are not awaited by the node
    changes after them (``Reconciler._act``): of those sent and not yet awaited when the
    pass was killed, any subset landed — here one drawn from the cut."""
    acts = [a for a in actions if not isinstance(a, EmitEvent)]
    left = len(acts) * cut // 100
    landed: list[Action] = []
    deleting: list[Action] = []
    for batch in batches(acts):
        if _waits_for_deletions(batch):
            landed.extend(deleting)
            deleting = []
        if left < len(batch):
            done = batch[:left] if cut % 2 == 0 else batch[len(batch) - left :]
            deleting.extend(a for a in batch if isinstance(a, DeletePod) and a not in done)
            draw = random.Random(cut)
            landed.extend(a for a in deleting if draw.random() < 0.5)
            landed.extend(done)
            return landed
        landed.extend(a for a in batch if not isinstance(a, DeletePod))
        deleting.extend(a for a in batch if isinstance(a, DeletePod))
        left -= len(batch)
    landed.extend(deleting)
    return landed


def _killed_pass(cluster: Cluster, cut: int) -> None:
    """A pass killed after ``cut`` % of its actions landed (:func:`landed_before_kill`): its
    status write is lost (and the events it had not posted yet, like the others it would
    have)."""
    cluster.advance(1)
    plan = cluster.decide()
    for action in landed_before_kill(plan.actions, cut):
        cluster.log.append(action)
        cluster._apply(action)
    cluster.schedule()


@BOUNDED
@given(job=jobs, happenings=st.lists(st.tuples(events, kills), min_size=1, max_size=25))
# Found by this test: a pass killed after its quarantine of a failed node landed, before
# it posted its events: the next pass entered the failure from the node's quarantine note
# and said nothing (no NodeFailed ever).
@example(
    job=GANG,
    happenings=[(("dark", 2), None), (("xid", 0, True), 17)],
)
# ... and a pass killed in a gang restart, after some of the workers it stops were deleted:
# the next one made the deleted ranks again under their old names, beside the survivors.
@example(
    job={**GANG, "spares": 1},
    happenings=[(("flap", 0), None), (("xid", 1, True), 43)],
)
# Found once edits were drawn: the spares lowered to 0 in the pass where the spare's grace ran
# out and the breaker tripped on it: the breaker holds it, and it is kept beyond the spares.
@example(
    job={**GANG, "spares": 1},
    happenings=[
        *[(("dark", 0), None)] * 5,
        *[(("dark", 0), 0)] * 4,
        (("rack", 0), 0),
        (("flap", 1), 0),
        (("edit", "spares", 0), None),
    ],
)
# Found once a batch's node changes went at once: a troubled active trading places with a
# spare, the pass killed with only the promotion landed — an active beyond nodes.max, kept.
@example(
    job={**WORKER_SCOPE, "spares": 2},
    happenings=[(("dark", 0), None), (("refused", 1, False), 35)],
)
def test_a_pass_killed_anywhere_is_carried_on_by_the_next(
    job: dict[str, Any], happenings: list[tuple[tuple[Any, ...], int | None]]
) -> None:
    job = dict(job)
    cluster = _cluster(job)
    _pass(cluster)
    for event, cut in happenings:
        _happen(cluster, event, job)
        if cut is not None:
            _killed_pass(cluster, cut)
        for _ in range(2):
            _pass(cluster)
        if cluster.finished:
            return
    _progress(cluster)
