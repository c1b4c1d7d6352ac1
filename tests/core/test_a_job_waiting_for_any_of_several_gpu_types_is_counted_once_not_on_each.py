"""A job waiting for any of several GPU types publishes its ``nodes.min`` on each accepted
type the cluster has enough of: alternatives, not a sum. Whoever keeps nodes for it counts
it once: in line order, on the type where the free nodes (less those counted for the jobs
before it; for a CPU phase giving back its GPU spares, with those spares) come nearest to
covering its need, ties by type name — one they cover wants nothing of its other types. So
a CPU phase allowed GPU nodes gives back, and keeps
itself from, the GPU nodes of one type for it, not of each; and a job behind it for one of
its types keeps nodes for it only when it could not start on free nodes of another. Before,
its need was added up on every type it named: a CPU phase gave back GPU spares of both
types, and a job behind it for H200 waited although it could start on the H100 nodes free."""

from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, JobRef
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    Cluster,
    node,
    nodes,
    of_type,
    phase,
    snapshot,
    spec,
)

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
PREP = spec(phase("prep", 2, 2, gpu_types=[]), spares=2)
EITHER = {"H100": 2, "H200": 2}  # a GPU job waiting for two nodes of either type


def _either(wants: dict[str, int] = EITHER) -> Claimant:
    return Claimant("uid-either", 5, JOB.created, dict(wants), gpus_per_node=8, tolerations=())


def _running_prep(spares: tuple[str, ...] = ()) -> Cluster:
    """The CPU phase runs on two CPU nodes; its spares are the GPU nodes ``spares`` (no
    other node was free when it refilled them), or none."""
    pool = {n.name: n for n in (node(f"x{i:02d}", gpu=None) for i in range(2))}
    prep = spec(phase("prep", 2, 2, gpu_types=[]), spares=max(2, len(spares)))
    cluster = Cluster(prep, pool, settings=ALLOW)
    cluster.settle()
    assert cluster.status.state == JobState.RUNNING
    for name in spares:
        gpu = "H200" if name.startswith("k") else "H100"
        cluster.nodes[name] = node(name, gpu=gpu)
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == sorted(spares)
    return cluster


def _free(cluster: Cluster, *names: str) -> None:
    for name in names:
        cluster.nodes[name] = node(name, gpu="H200" if name.startswith("k") else "H100")


def test_a_running_cpu_phase_refills_with_the_type_the_gpu_job_does_not_need() -> None:
    cluster = _running_prep()
    _free(cluster, "h00", "h01", "k00", "k01")  # two of each type free
    cluster.waiting = (_either(),)
    cluster.advance(30)
    cluster.settle()
    # The GPU job can start on the two H100 nodes: only they are kept from the CPU phase.
    assert cluster.held(NodeRole.SPARE) == ["k00", "k01"]


def test_a_cpu_phase_gives_back_the_spares_of_one_type_only() -> None:
    cluster = _running_prep(("h00", "k00"))
    _free(cluster, "k01")  # one H200 node free: the GPU job is nearest on H200
    cluster.waiting = (_either(),)
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["h00"]
    assert not cluster.nodes["k00"].owner_uid  # given back: with k01, its two H200 nodes


def test_a_cpu_phase_keeps_its_gpu_spares_when_free_nodes_of_one_type_cover_the_gpu_job() -> None:
    cluster = _running_prep(("h00", "k00"))
    _free(cluster, "h01", "h02")  # the GPU job can start on these
    cluster.waiting = (_either(),)
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["h00", "k00"]


def test_the_spares_go_back_of_the_type_they_and_the_free_nodes_would_cover_it_on() -> None:
    # No node is free: one H100 spare could not start the GPU job, two H200 spares can.
    cluster = _running_prep(("h00", "k00", "k01"))
    cluster.waiting = (_either(),)
    cluster.advance(30)
    cluster.settle()
    assert cluster.held(NodeRole.SPARE) == ["h00"]


def test_a_gpu_job_wanting_one_type_only_still_gets_its_spares_back() -> None:
    cluster = _running_prep(("h00", "k00"))
    _free(cluster, "h01", "h02")
    cluster.waiting = (_either({"H200": 2}),)
    cluster.advance(30)
    cluster.settle()
    assert not cluster.nodes["k00"].owner_uid  # the H100 nodes cannot serve it
    assert cluster.held(NodeRole.SPARE) == ["h00", "h01"]  # refilled with one nobody wants


# --- a job behind it in line, for one of its types ------------------------------------------

ME = JobRef(namespace="ml", name="h200", uid="uid-h200", created=T0 - timedelta(days=1))
H200_ONLY = spec(phase("train", 4, 4, gpu_types=["H200"]))
AHEAD = {"H100": 4, "H200": 4}


def _ahead(wants: dict[str, int] = AHEAD, uid: str = "uid-either") -> Claimant:
    created = T0 - timedelta(days=2)
    return Claimant(uid, 0, created, dict(wants), gpus_per_node=8, tolerations=())


def _claimed(h100_free: int, *waiting: Claimant) -> list[str]:
    free = [*nodes("h", h100_free), *nodes("k", 4, gpu="H200")]
    plan = decide(snapshot(H200_ONLY, free, job=ME, waiting=waiting), SETTINGS, T0)
    return sorted(c.node for c in of_type(plan, ClaimNode))


def test_a_job_behind_takes_its_type_when_the_job_ahead_can_start_on_another() -> None:
    assert _claimed(4, _ahead()) == ["k00", "k01", "k02", "k03"]


def test_a_job_behind_keeps_its_type_for_the_job_ahead_that_cannot_start_on_another() -> None:
    assert _claimed(2, _ahead()) == []


def test_free_nodes_of_another_type_count_once_for_the_jobs_ahead_in_line_order() -> None:
    # An H100-only job ahead of both takes the four H100 nodes first: the job accepting
    # either type can then start on H200 only, and the job behind keeps them for it.
    first = Claimant("uid-first", 0, T0 - timedelta(days=3), {"H100": 4}, 8, ())
    assert _claimed(4, first, _ahead()) == []


def test_a_cpu_phase_waiting_behind_it_takes_the_gpu_nodes_of_the_type_it_does_not_need() -> None:
    free = [*nodes("h", 2), *nodes("k", 2, gpu="H200")]
    ahead = _ahead(EITHER)
    plan = decide(snapshot(PREP, free, waiting=(ahead,)), ALLOW, T0)
    assert sorted(c.node for c in of_type(plan, ClaimNode)) == ["k00", "k01"]
