"""``spares.whileIdle`` edited, then put back before the node watch delivered the first
rewrite: the pass under the reverted spec still sees the old taints, which agree with it,
and moves nothing. Once the watch delivers the new taints, the spares are written back to
the old policy, and ``SpareTaintsChanged`` says so — they changed again, because of the
policy. It is judged from the policy the last rewrite was for, which the status records
(``status.pool.sparesWhileIdle``), so a restarted operator judges the same. Before, the
pass under the reverted spec had observed its generation, and the rewrite went unsaid."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import SetNodeRole
from tests.core.builders import Cluster
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _training
from tests.core.test_an_edit_of_the_spares_idle_policy_is_said_once_though_the_view_lags import (
    _said,
    _set_policy,
)


def _reverted_while_lagging(cluster: Cluster) -> dict[str, object]:
    """Preemptible said and written; put back to Reserved while the view still shows the
    Reserved taints: that pass moves nothing. The nodes as written are returned."""
    spares = cluster.held(NodeRole.SPARE)
    _set_policy(cluster, "Preemptible")
    seen = dict(cluster.nodes)
    cluster.advance(1)
    first = cluster.step()
    assert sorted(a.node for a in first.actions if isinstance(a, SetNodeRole)) == spares
    assert _said([first]) == 1
    written = dict(cluster.nodes)
    cluster.nodes.update(seen)
    _set_policy(cluster, "Reserved")
    cluster.advance(1)
    lagging = cluster.step()
    assert not [a for a in lagging.actions if isinstance(a, SetNodeRole)]
    assert _said([lagging]) == 0
    return written


def test_the_spares_written_back_are_said_once() -> None:
    cluster = _training(spares=2)
    spares = cluster.held(NodeRole.SPARE)
    written = _reverted_while_lagging(cluster)
    cluster.nodes.update(written)  # the watch delivers the Preemptible taints
    cluster.advance(1)
    plans = cluster.settle()
    moved = sorted(a.node for p in plans for a in p.actions if isinstance(a, SetNodeRole))
    assert moved == spares
    assert _said(plans) == 1
    assert {t.key for n in spares for t in cluster.nodes[n].taints} == {labels.TAINT_POOL}
    assert _said(cluster.settle()) == 0


def test_a_restarted_operator_says_it_too() -> None:
    cluster = _training(spares=1)
    written = _reverted_while_lagging(cluster)
    restarted = Cluster(
        cluster.the_spec,
        {**cluster.nodes, **written},
        job=replace(cluster.job),
        now=cluster.now + timedelta(seconds=1),
        status=cluster.status,
        pods=dict(cluster.pods),
        service=cluster.service,
    )
    plan = restarted.step()
    assert [a.node for a in plan.actions if isinstance(a, SetNodeRole)] == cluster.held(
        NodeRole.SPARE
    )
    assert _said([plan]) == 1
