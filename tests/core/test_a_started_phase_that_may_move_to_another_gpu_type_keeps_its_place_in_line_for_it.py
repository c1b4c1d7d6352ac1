"""A started phase that waits after a mass failure publishes its need in line on every GPU
type it accepts that the cluster has enough nodes of, not only on the one it ran on: once
its own type can no longer make ``nodes.min`` it re-forms on another accepted type
(``PhaseGPUTypeChanged``), so nodes of that type coming free are its as much as nodes of its
own, and a job behind it for that type keeps them for it (counted once, on one type). Before,
it published the type it ran on alone — nothing at all when the healthy nodes of that type
left in the cluster were fewer than ``min`` — and a job behind it took the other type's nodes
whenever its pass ran first: the job ahead waited on for a person to release its
quarantined nodes while the nodes it would have moved to went to the job behind."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef, NodeInfo
from tests.core.builders import (
    SETTINGS,
    T0,
    Cluster,
    nodes,
    of_type,
    owned,
    phase,
    snapshot,
    spec,
    with_ready,
)

ELDER = JobRef(namespace="ml", name="either", uid="uid-either", created=T0 - timedelta(days=2))
YOUNGER = JobRef(namespace="ml", name="h200", uid="uid-h200", created=T0 - timedelta(days=1))
OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0 - timedelta(days=3))
POLICY = {"notReadyGrace": "30s", "massFailure": {"maxFailedPercent": 100}}
EITHER = spec(phase("train", 4, 4, gpu_types=["H100", "H200"]), failurePolicy=POLICY)
H200_ONLY = spec(phase("train", 4, 4, gpu_types=["H200"]))


def _waiting_after_mass_failure(busy_h100: int = 0) -> Cluster:
    """The elder job ran on four H100 nodes and lost three of them at once, while every
    H200 node and ``busy_h100`` more H100 nodes were held by another running job: it waits
    in line."""
    busy = nodes("m", busy_h100, rack="r3") + nodes("k", 4, gpu="H200", rack="r2")
    the_nodes = nodes("h", 4) + [owned(n, NodeRole.ACTIVE, OTHER) for n in busy]
    cluster = Cluster(EITHER, {n.name: n for n in the_nodes}, job=ELDER)
    cluster.settle()
    assert cluster.status.phases[0].gpu_type == "H100"
    for name in ("h00", "h01", "h02"):
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    cluster.advance(31)
    for _ in range(4):
        cluster.settle()
        cluster.advance(30)
    assert cluster.status.state == JobState.WAITING
    assert cluster.held(NodeRole.QUARANTINED) == ["h00", "h01", "h02"]
    return cluster


def _given_back(cluster: Cluster) -> list[NodeInfo]:
    """The other job gave its four H200 nodes back: they are free."""
    freed = []
    for n in cluster.nodes.values():
        if n.labels.get(labels.LABEL_JOB_UID) == OTHER.uid:
            kept = {k: v for k, v in n.labels.items() if not k.startswith("phased.dev/")}
            n = replace(n, labels=kept, taints=())
        freed.append(n)
    return freed


def test_it_publishes_its_need_on_the_other_accepted_type_too() -> None:
    # One healthy H100 node left in the cluster: fewer than min, so only the other type.
    assert _waiting_after_mass_failure().status.waiting_for == {"H200": 4}
    # Enough H100 nodes in the cluster, held by another job: either type will do.
    assert _waiting_after_mass_failure(4).status.waiting_for == {"H100": 4, "H200": 4}


def test_the_nodes_of_the_type_it_would_move_to_go_to_it_whichever_pass_runs_first() -> None:
    cluster = _waiting_after_mass_failure()
    elder = Claimant(ELDER.uid, 0, ELDER.created, dict(cluster.status.waiting_for), 8, None)
    freed = _given_back(cluster)
    # The younger job's pass runs first: the job ahead would move to these nodes.
    younger = decide(
        snapshot(H200_ONLY, freed, job=YOUNGER, waiting=(elder,)), SETTINGS, cluster.now
    )
    assert of_type(younger, ClaimNode) == []
    # The elder job's pass takes them, and its phase re-forms there.
    cluster.nodes = {n.name: n for n in freed}
    cluster.settle()
    assert cluster.status.phases[0].gpu_type == "H200"
    assert cluster.held(NodeRole.ACTIVE) == ["k00", "k01", "k02", "k03"]
