from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.decide import decide
from phased.core.model import ClaimNode, CreatePod, EnsureService
from tests.core.builders import SETTINGS, T0, Cluster, nodes, of_type, phase, snapshot, spec


def test_first_call_claims_min_then_spares_then_up_to_max():
    the_spec = spec(phase("train", 2, 3), spares=1)
    plan = decide(snapshot(the_spec, nodes("h", 5)), SETTINGS, T0)
    claims = of_type(plan, ClaimNode)
    assert [c.role for c in claims].count(NodeRole.ACTIVE) == 3
    assert [c.role for c in claims].count(NodeRole.SPARE) == 1
    assert not of_type(plan, CreatePod)  # the world waits for the claims to land
    assert plan.status.state == JobState.PENDING


def test_after_claims_land_workers_and_service_are_created():
    cluster = Cluster(spec(phase("train", 2, 3), spares=1), {n.name: n for n in nodes("h", 5)})
    cluster.step()
    plan = cluster.step()
    pods = of_type(plan, CreatePod)
    assert len(pods) == 3
    assert len(of_type(plan, EnsureService)) == 1
    names = sorted(p.manifest["metadata"]["name"] for p in pods)
    assert names == ["llm-train-g0-0", "llm-train-g0-1", "llm-train-g0-2"]
    assert plan.status.state == JobState.RUNNING
    assert plan.status.world_size == 3
