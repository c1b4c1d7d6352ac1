"""A node this job gave back while the status write of that pass was lost (the operator
stopped between the release and the write, or the write failed) is still in the job's
``status.pool``; once another job of the same installation has claimed it, its marks are the
full set a claim writes, naming that job. Phased changed them, so that is not news: no
``NodeMarksChanged`` ("not by Phased"), no failure. Before, the job said a person had
changed the marks of a node nobody had touched. A node whose marks someone really changed is
still said (``test_a_node_whose_marks_someone_changed_is_said_to_have_left_the_pool``), and
so is one a person gave another job's UID, label and taint alike: its ``claimed-at`` is the
job's own, from before the status that names it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import EmitEvent, JobRef, Plan, ReleaseNode, Taint
from phased.core.ownership import marks
from phased.core.times import format_time
from tests.core.builders import LONG_AGO, Cluster, nodes, owned, phase, spec

OTHER = JobRef(namespace="ml", name="other", uid="uid-other", generation=1, created=LONG_AGO)


def _said(plans: list[Plan], reason: str) -> list[EmitEvent]:
    return [a for p in plans for a in p.actions if isinstance(a, EmitEvent) and a.reason == reason]


def test_a_node_given_back_under_a_lost_status_write_and_claimed_by_another_job_is_not_news() -> (
    None
):
    shared = {n.name: n for n in nodes("n", 4)}
    job = Cluster(spec(phase("train", 2, 2), spares=1), shared)
    job.settle()
    (spare,) = job.held(NodeRole.SPARE)
    before = job.status
    job.the_spec = spec(phase("train", 2, 2), spares=0)  # an edit: the spare goes back
    job.job = replace(job.job, generation=job.job.generation + 1)
    plan = job.step()
    assert [a.node for a in plan.actions if isinstance(a, ReleaseNode)] == [spare]
    job.status = before  # that pass's status write was lost: the pool still names the spare
    assert spare in job.status.pool.spares

    bare = shared[spare]  # the same Node object, claimed by another job of the installation
    assert not marks(bare)  # given back: nothing of the job's is left on it
    job.advance(1)
    claimed_at = {labels.ANNOTATION_CLAIMED_AT: format_time(job.now)}
    shared[spare] = replace(owned(bare, NodeRole.ACTIVE, OTHER), annotations=claimed_at)
    plans = [job.step() for _ in range(3)]

    assert _said(plans, "NodeMarksChanged") == []
    assert _said(plans, "NodeFailed") == []
    assert job.status.failures == before.failures
    assert spare not in job.status.pool.spares


def test_a_held_node_a_person_gave_another_jobs_uid_label_and_taint_alike_is_still_said() -> None:
    shared = {n.name: n for n in nodes("n", 4)}
    job = Cluster(spec(phase("train", 2, 2), spares=1), shared)
    job.settle()
    (spare,) = job.held(NodeRole.SPARE)
    claimed_at = {labels.ANNOTATION_CLAIMED_AT: format_time(job.now - timedelta(seconds=1))}
    held = replace(shared[spare], annotations=claimed_at)  # as the job's claim wrote it
    edited = {**held.labels, labels.LABEL_JOB_UID: OTHER.uid}
    job.advance(30)
    shared[spare] = replace(held, labels=edited, taints=(Taint(labels.TAINT_POOL, OTHER.uid),))

    plans = [job.step() for _ in range(3)]

    (said,) = _said(plans, "NodeMarksChanged")
    assert f"node {spare} " in said.message and OTHER.uid in said.message
