"""The failure simulation applies decide's claims to its in-memory nodes: the marks it writes
must be those the operator's kube layer writes, or decide holds none of them and the
simulated run never starts (it waited on CapacityShort for 200 days once, unnoticed)."""

from __future__ import annotations

from bench.failure_sim import JOB, _owned, make_node

from phased.api.v1alpha1 import NodeRole
from phased.core.ownership import holds
from phased.core.settings import Settings


def test_a_node_the_simulation_claims_is_held_by_the_job_for_this_installation() -> None:
    installation = Settings().installation
    for role in (NodeRole.ACTIVE, NodeRole.SPARE, NodeRole.QUARANTINED):
        node = _owned(make_node(0), role, installation)
        assert holds(node, JOB.uid, installation)
        assert not holds(node, JOB.uid, "another-installation")
