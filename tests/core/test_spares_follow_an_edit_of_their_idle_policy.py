"""``spares.whileIdle`` edited while the job runs: the spares it already holds take the new
policy at once — Preemptible spares get the spare taint (others may borrow them), Reserved
ones the pool taint (no one may) — not only the spares claimed later. The workers and the
actives are not touched."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import ClaimNode, CreatePod, DeletePod, ReleaseNode, SetNodeRole
from tests.core.builders import Cluster, events
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit, _training


def _taints(cluster: Cluster, role: NodeRole) -> set[str]:
    return {t.key for n in cluster.held(role) for t in cluster.nodes[n].taints}


def _idle(policy: str) -> Any:
    return lambda raw: raw["spares"].update(whileIdle=policy)


def test_held_spares_take_the_new_policy_both_ways() -> None:
    cluster = _training(spares=2)
    assert _taints(cluster, NodeRole.SPARE) == {labels.TAINT_POOL}
    spares = cluster.held(NodeRole.SPARE)
    workers = sorted(p.name for p in cluster.running())

    for policy, taint in (("Preemptible", labels.TAINT_SPARE), ("Reserved", labels.TAINT_POOL)):
        cluster.the_spec = _edit(cluster.the_spec, _idle(policy))
        cluster.job = replace(cluster.job, generation=cluster.job.generation + 1)  # an edit
        cluster.advance(30)
        plans = cluster.settle()
        moved = [a for p in plans for a in p.actions if isinstance(a, SetNodeRole)]
        assert sorted(a.node for a in moved) == spares
        assert all(a.role == NodeRole.SPARE for a in moved)
        kinds = (ClaimNode, ReleaseNode, CreatePod, DeletePod)
        assert not [a for p in plans for a in p.actions if isinstance(a, kinds)]
        assert "SpareTaintsChanged" in [e for p in plans for e in events(p)]
        assert _taints(cluster, NodeRole.SPARE) == {taint}
        assert _taints(cluster, NodeRole.ACTIVE) == {labels.TAINT_POOL}
        assert sorted(p.name for p in cluster.running()) == workers
        assert cluster.status.state == JobState.RUNNING
