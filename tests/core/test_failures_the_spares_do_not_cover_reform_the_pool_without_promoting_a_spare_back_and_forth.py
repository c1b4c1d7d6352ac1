"""More nodes fail at once than the spares cover: the job does not swap in the spares it has
and then sort the pool out. Nothing is promoted by the swap; the gang restarts and the pool
is formed again by the admission rule (``nodes.min`` actives, the spares, then actives up to
``max``, from the healthy nodes it holds and free ones), which promotes or claims each
replacement and names it in the ledger — an elastic job shrinks within ``[min, max]``, a
fixed one that cannot reach ``min`` waits. Before, the swap promoted a spare (``SparePromoted``,
the ledger naming it the lost node's replacement, ``SparesExhausted`` saying "restarting on
3 nodes"), and the next pass turned it back into a spare and restarted on 2: a role changed
twice for nothing, and a ledger entry naming as replacement a node that replaced nothing."""

from __future__ import annotations

from phased.api.v1alpha1 import NodeRole
from phased.core.model import Action, EmitEvent, Plan, SetNodeRole
from tests.core.builders import Cluster, nodes, phase, spec, with_ready

POLICY = {"notReadyGrace": "30s", "massFailure": {"maxFailedPercent": 50}}


def _fail_together(lo: int, hi: int, total: int, lost: int) -> tuple[Cluster, list[Action]]:
    cluster = Cluster(
        spec(phase("train", lo, hi), spares=1, failurePolicy=POLICY),
        {n.name: n for n in nodes("h", total)},
    )
    cluster.settle()
    cluster.advance(600)
    failed = cluster.held(NodeRole.ACTIVE)[:lost]
    for name in failed:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    plans: list[Plan] = []
    for _ in range(4):
        plans += cluster.settle()
        cluster.advance(30)
    assert cluster.held(NodeRole.QUARANTINED) == failed
    return cluster, [a for p in plans for a in p.actions]


def _roles_set(actions: list[Action]) -> dict[str, list[NodeRole]]:
    out: dict[str, list[NodeRole]] = {}
    for a in actions:
        if isinstance(a, SetNodeRole):
            out.setdefault(a.node, []).append(a.role)
    return out


def test_an_elastic_job_shrinks_keeping_its_spare_without_promoting_it_first() -> None:
    cluster, actions = _fail_together(2, 4, 5, 2)
    assert cluster.status.world_size == 2 and len(cluster.running()) == 2
    spare = cluster.held(NodeRole.SPARE)
    assert len(spare) == 1
    assert _roles_set(actions) == {}  # no role changed back and forth
    assert all(e.replaced_by is None for e in cluster.status.failures)  # it shrank instead
    assert all(e.resumed is not None for e in cluster.status.failures)
    said = [a.message for a in actions if isinstance(a, EmitEvent)]
    assert not [m for m in said if "promoted" in m]
    assert not [m for m in said if "restarting on 3" in m]


def test_an_elastic_job_whose_min_needs_the_spare_promotes_it_as_a_replacement() -> None:
    cluster, actions = _fail_together(3, 4, 5, 2)
    assert cluster.status.world_size == 3 and len(cluster.running()) == 3
    assert cluster.held(NodeRole.SPARE) == []
    (promoted,) = [n for n, roles in _roles_set(actions).items()]
    assert _roles_set(actions)[promoted] == [NodeRole.ACTIVE]
    assert [e.replaced_by for e in cluster.status.failures].count(promoted) == 1


def test_free_nodes_make_up_what_the_spares_do_not() -> None:
    cluster, actions = _fail_together(4, 4, 7, 2)
    assert cluster.status.world_size == 4 and len(cluster.running()) == 4
    assert len(cluster.held(NodeRole.SPARE)) == 1
    replacements = [e.replaced_by for e in cluster.status.failures]
    assert None not in replacements and len(set(replacements)) == 2
    assert set(replacements) <= set(cluster.held(NodeRole.ACTIVE))
    assert all(roles == [NodeRole.ACTIVE] for roles in _roles_set(actions).values())


def test_a_fixed_job_that_cannot_reach_min_waits_and_promotes_nothing() -> None:
    cluster, actions = _fail_together(4, 4, 5, 2)
    assert cluster.running() == []
    assert _roles_set(actions) == {}
    assert all(e.replaced_by is None and e.resumed is None for e in cluster.status.failures)
    assert "need 4" in cluster.status.message
