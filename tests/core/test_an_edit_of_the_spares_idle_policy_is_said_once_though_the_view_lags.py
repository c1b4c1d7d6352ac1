"""``spares.whileIdle`` edited: ``SpareTaintsChanged`` is said once per edit. A pass that runs
before the node watch has delivered the new taints (an event woke the job again at once)
still sees the old ones: it writes the spares' role again — idempotent, nothing changes on
the node — but says nothing more. That is judged from what the cluster says (the status the
first pass wrote records the policy it rewrote the spares for, ``pool.sparesWhileIdle``),
not from memory, so a restarted operator whose view still lags says nothing again either."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import NodeRole
from phased.core.model import Plan, SetNodeRole
from tests.core.builders import Cluster, events, with_ready
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _edit, _training


def _set_policy(cluster: Cluster, policy: str) -> None:
    """A person's edit: the spec changes and so does metadata.generation."""
    cluster.the_spec = _edit(cluster.the_spec, lambda raw: raw["spares"].update(whileIdle=policy))
    cluster.job = replace(cluster.job, generation=cluster.job.generation + 1)


def _said(plans: list[Plan]) -> int:
    return sum(events(p).count("SpareTaintsChanged") for p in plans)


def test_a_pass_before_the_watch_delivers_the_new_taints_says_nothing_again() -> None:
    cluster = _training(spares=2)
    spares = cluster.held(NodeRole.SPARE)
    for policy in ("Preemptible", "Reserved"):
        _set_policy(cluster, policy)
        seen = dict(cluster.nodes)
        cluster.advance(1)
        first = cluster.step()
        assert sorted(a.node for a in first.actions if isinstance(a, SetNodeRole)) == spares
        assert _said([first]) == 1
        written = dict(cluster.nodes)
        cluster.nodes.update(seen)  # a pass before the watch delivers the new taints
        cluster.advance(1)
        again = cluster.step()
        rewritten = [a.node for a in again.actions if isinstance(a, SetNodeRole)]
        assert sorted(rewritten) == spares  # the role is written again: idempotent
        assert _said([again]) == 0
        cluster.nodes.update(written)
        assert _said(cluster.settle()) == 0


def test_an_operator_restarted_with_a_lagging_view_says_nothing_again() -> None:
    cluster = _training(spares=1)
    _set_policy(cluster, "Preemptible")
    seen = dict(cluster.nodes)
    cluster.advance(1)
    assert _said([cluster.step()]) == 1
    # A new operator: nothing in memory, a view that does not show the write yet, and the
    # status as the first pass wrote it.
    restarted = Cluster(
        cluster.the_spec,
        seen,
        job=cluster.job,
        now=cluster.now + timedelta(seconds=1),
        status=cluster.status,
        pods=dict(cluster.pods),
        service=cluster.service,
    )
    plan = restarted.step()
    assert [a.node for a in plan.actions if isinstance(a, SetNodeRole)] == cluster.held(
        NodeRole.SPARE
    )
    assert _said([plan]) == 0


def test_an_edit_the_breaker_held_back_is_said_once_it_lets_go() -> None:
    cluster = _training(spares=2)
    actives = cluster.held(NodeRole.ACTIVE)[:2]
    for name in actives:  # two of six pool nodes go dark together: the breaker trips
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(600)
    cluster.step()
    assert cluster.status.breaker.held
    _set_policy(cluster, "Preemptible")
    cluster.advance(30)
    held = cluster.step()
    assert not [a for a in held.actions if isinstance(a, SetNodeRole)] and _said([held]) == 0
    for name in actives:
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.advance(30)
    plans = cluster.settle()
    assert "MassFailureCleared" in events(plans[0])
    assert _said(plans) == 1
