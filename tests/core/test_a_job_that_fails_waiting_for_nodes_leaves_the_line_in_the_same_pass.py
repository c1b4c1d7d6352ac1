"""A job that fails while it waits for capacity (``admission.onTimeout: Fail``) leaves the
line in the pass that fails it: its ``waitingFor`` is cleared with the failure. Before, that
pass published its need once more beside the Failed state, and the jobs behind it kept free
nodes for a job that would never take them until some later pass of the failed job (the
next resync) settled it."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef
from tests.core.builders import JOB, SETTINGS, T0, at, nodes, of_type, owned, phase, snapshot, spec

OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)


def test_the_pass_that_fails_it_clears_its_need() -> None:
    the_spec = spec(phase("train", 8, 10), admission={"waitTimeout": "10m", "onTimeout": "Fail"})
    busy = [owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("b", 8)]
    snap = snapshot(the_spec, [*busy, *nodes("h", 2)])
    first = decide(snap, SETTINGS, at(-601))
    assert first.status.waiting_for == {"H100": 8}
    plan = decide(replace(snap, status=first.status), SETTINGS, T0)
    assert plan.status.state == JobState.FAILED
    assert plan.status.waiting_for == {}
    assert of_type(plan, ClaimNode) == []
    # a job behind it, reading the status this pass wrote, keeps nothing for it
    gone = Claimant(JOB.uid, 0, JOB.created, dict(plan.status.waiting_for))
    behind = JobRef(namespace="ml", name="small", uid="uid-small", created=T0)
    small = snapshot(spec(phase("train", 2, 2)), nodes("h", 2), job=behind, waiting=(gone,))
    assert len(of_type(decide(small, SETTINGS, T0), ClaimNode)) == 2
