"""Lost work (a ledger entry's ``lostWorkSeconds``, summed in
``phased_job_lost_work_seconds_total``) counts each stretch of training once: from the
checkpoint the restart resumes from, or from the latest resume (or, while it is open,
detection) of an earlier entry of the phase that counts lost work, whichever is later.
Before, two nodes failing together each counted the work since the checkpoint, which the
restart redid once; and a failure after a resumed one counted, from the same checkpoint,
the first failure's stretch and its interruption again."""

from __future__ import annotations

import pytest

from phased.api.v1alpha1 import NodeRole
from phased.core.reports import ReportKind, ReportStore
from phased.core.times import parse_time
from tests.core.builders import Cluster, node, phase, spec, with_ready
from tests.core.test_a_node_failing_between_a_restart_and_its_next_generation_is_resumed_with_it import (  # noqa: E501
    REPORTING,
    TOKEN,
    _report,
)


def _training() -> Cluster:
    """8 workers training with reports; a checkpoint at step 100, then 300 s of training."""
    the_spec = spec(phase("train", 8, 8), spares=2, checkpoint={"report": True, "interval": "1h"})
    nodes = {f"n{i:02d}": node(f"n{i:02d}") for i in range(12)}
    cluster = Cluster(
        the_spec, nodes, settings=REPORTING, report_token=TOKEN, reports=ReportStore()
    )
    cluster.settle()
    cluster.advance(600)
    _report(ReportKind.CHECKPOINT, 100, cluster, generation=0, rank=0)
    cluster.settle()
    cluster.advance(300)
    return cluster


def _fail(cluster: Cluster, *names: str) -> None:
    for name in names:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(40)  # past notReadyGrace (30 s)
    cluster.settle()


def test_two_nodes_failing_together_lose_the_work_since_the_checkpoint_once() -> None:
    cluster = _training()
    _fail(cluster, *sorted(cluster.held(NodeRole.ACTIVE))[:2])
    lost = [e.lost_work_seconds for e in cluster.status.failures]
    assert lost == [pytest.approx(300), 0]  # detected together: the second adds nothing


def test_a_failure_after_a_resumed_one_counts_from_the_resume() -> None:
    cluster = _training()
    first = sorted(cluster.held(NodeRole.ACTIVE))[0]
    _fail(cluster, first)
    cluster.advance(20)
    for rank in range(8):  # generation 1 trains again; no new checkpoint yet
        _report(ReportKind.PROGRESS, 101, cluster, generation=1, rank=rank)
    cluster.settle()
    (entry,) = cluster.status.failures
    assert entry.resumed is not None and entry.lost_work_seconds == pytest.approx(300)
    cluster.advance(200)  # 200 s of training after the resume
    second = next(n for n in sorted(cluster.held(NodeRole.ACTIVE)) if n != first)
    _fail(cluster, second)
    entry, later = cluster.status.failures
    assert later.node == second and later.resume_step == 100
    # From the first one's resume to this detection, not from the checkpoint (900 s ago).
    resumed, detected = parse_time(entry.resumed), parse_time(later.detected)
    assert resumed is not None and detected is not None
    assert later.lost_work_seconds == pytest.approx((detected - resumed).total_seconds())
    assert 200 <= later.lost_work_seconds <= 240
