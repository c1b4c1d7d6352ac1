"""A GPU job waiting for any of several types is counted once where needs are added up per
type (``pools.counted_once``): on the type where the free nodes come nearest to covering it.
Those free nodes are the ones *it* could take — its ``gpusPerNode``, and no taint its
workers do not tolerate — not every unheld node of the type. Before, every untainted free
node of a type counted, so a CPU phase allowed GPU nodes, told that free H100 nodes with too
few GPUs covered the GPU job, took as spares (or kept) the H200 nodes the job waited for."""

from datetime import timedelta
from typing import Any

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import Claimant, Taint
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, Cluster, node, phase, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
EITHER = {"H100": 2, "H200": 2}
TEAM = Taint("team", "vision", "NoSchedule")
TOLERATE_TEAM = [{"key": "team", "operator": "Equal", "value": "vision", "effect": "NoSchedule"}]


def _either() -> Claimant:
    return Claimant("uid-either", 5, JOB.created - timedelta(days=1), dict(EITHER), 8, ())


def _running_prep(spares: tuple[str, ...] = ()) -> Cluster:
    """A CPU phase running on two CPU nodes, its spares the H200 nodes ``spares``."""
    pool = {n.name: n for n in (node(f"x{i:02d}", gpu=None) for i in range(2))}
    template = {"image": "registry.example/prep:1", "spec": {"tolerations": TOLERATE_TEAM}}
    prep = spec(phase("prep", 2, 2, gpu_types=[]), spares=2, template=template)
    cluster = Cluster(prep, pool, settings=ALLOW)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    for name in spares:
        cluster.nodes[name] = node(name, gpu="H200")
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == sorted(spares)
    return cluster


def _spares_beside_h200_nodes(**h100: Any) -> list[str]:
    """The CPU phase's spares once two H100 nodes made with ``h100`` and two H200 nodes of 8
    GPUs are free and the GPU job waits for either type."""
    cluster = _running_prep()
    for name in ("h00", "h01"):
        cluster.nodes[name] = node(name, gpu="H100", **h100)
    for name in ("k00", "k01"):
        cluster.nodes[name] = node(name, gpu="H200")
    cluster.waiting = (_either(),)
    cluster.advance(30)
    cluster.settle()
    return cluster.held(NodeRole.SPARE)


def test_free_nodes_with_too_few_gpus_for_it_do_not_cover_it() -> None:
    # H100 nodes of 4 GPUs (the GPU job needs 8 per node): only the H200 nodes can start
    # it, and they are kept from the CPU phase.
    assert _spares_beside_h200_nodes(gpus=4) == ["h00", "h01"]


def test_free_nodes_tainted_against_it_do_not_cover_it() -> None:
    # H100 nodes dedicated to a team the CPU phase belongs to, not the GPU job.
    assert _spares_beside_h200_nodes(taints=(TEAM,)) == ["h00", "h01"]


def test_the_spares_it_needs_go_back_though_nodes_it_cannot_use_are_free() -> None:
    cluster = _running_prep(("k00", "k01"))
    for name in ("h00", "h01"):
        cluster.nodes[name] = node(name, gpu="H100", gpus=4)
    cluster.waiting = (_either(),)
    cluster.advance(30)
    cluster.settle()
    # The H200 spares are the only nodes the GPU job could start on: given back.
    assert not cluster.nodes["k00"].owner_uid
    assert not cluster.nodes["k01"].owner_uid
