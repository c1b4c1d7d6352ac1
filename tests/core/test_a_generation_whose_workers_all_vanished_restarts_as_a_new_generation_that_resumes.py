"""A generation whose workers are all gone at once — their nodes deleted and the pods
collected with them, or every one evicted by a control plane cut off from its kubelets past
the workers' tolerations — restarts the gang: a new generation that resumes
(``PHASED_RESUME=true``), counted in ``restarts`` and said by ``WorkersRestarted``. Before,
the job saw no worker of the generation and made the same generation again under the same
names, with ``PHASED_RESUME=false`` for a phase's first: training began the phase afresh,
and no restart was counted."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core.model import CreatePod, Plan
from tests.core.builders import Cluster, events, node, phase, spec, with_ready


def _made(plan: Plan) -> list[tuple[str, str]]:
    """(name, PHASED_RESUME) of each worker the plan creates."""
    out = []
    for action in plan.actions:
        if isinstance(action, CreatePod):
            env = action.manifest["spec"]["containers"][0]["env"]
            resume = next(e["value"] for e in env if e["name"] == "PHASED_RESUME")
            out.append((action.manifest["metadata"]["name"], resume))
    return out


def _run(cluster: Cluster, passes: int, every: float = 5) -> tuple[list[str], list]:
    said, made = [], []
    for _ in range(passes):
        cluster.advance(every)
        plan = cluster.step()
        said += events(plan)
        made += _made(plan)
    return said, made


def test_a_one_node_job_whose_node_is_deleted_with_its_worker_resumes_in_a_new_generation():
    nodes = {f"n{i}": node(f"n{i}") for i in range(3)}
    cluster = Cluster(spec(phase("train", 1, 1)), nodes)
    cluster.settle()
    (gone,) = cluster.held(NodeRole.ACTIVE)
    del cluster.nodes[gone]  # the autoscaler took it; the pod collector took its worker
    cluster.pods.clear()
    said, made = _run(cluster, 4)
    assert made == [("llm-train-g1-0", "true")]
    assert said.count("WorkersRestarted") == 1
    assert cluster.status.restarts == 1 and cluster.status.worker_restarts == 0
    assert cluster.status.restart_generation == 1 and cluster.status.state == JobState.RUNNING
    assert [e.node for e in cluster.status.failures] == [gone]


def test_every_worker_evicted_during_a_long_control_plane_outage_resumes_after_it():
    # Five minutes after every node went Unknown, the node controller evicts the workers
    # (their default 300 s toleration); they stay Terminating until the kubelets are back,
    # which then stop them. The breaker holds the job's nodes throughout.
    nodes = {f"n{i}": node(f"n{i}", rack=f"r{i % 2}") for i in range(6)}
    cluster = Cluster(spec(phase("train", 4, 4)), nodes)
    cluster.settle()
    for name in list(cluster.nodes):
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, cluster.now)
    said, made = _run(cluster, 60)  # five minutes
    for key, pod in list(cluster.pods.items()):
        cluster.pods[key] = replace(pod, stop_by=cluster.now + timedelta(seconds=30))
    more, made_more = _run(cluster, 12)
    said, made = said + more, made + made_more
    assert made == [] and "MassFailure" in said
    assert cluster.status.restarts == 0
    for name in list(cluster.nodes):
        cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    cluster.pods.clear()
    said, made = _run(cluster, 4)
    assert "MassFailureCleared" in said and said.count("WorkersRestarted") == 1
    assert sorted(made) == [(f"llm-train-g1-{r}", "true") for r in range(4)]
    assert cluster.status.restarts == 1 and cluster.status.worker_restarts == 0
    assert cluster.status.failures == [] and cluster.held(NodeRole.QUARANTINED) == []
    assert cluster.status.state == JobState.RUNNING


def test_a_generation_not_yet_made_after_a_gang_restart_is_made_once_without_a_second_count():
    # After a gang restart the status names the next generation before any of its workers
    # exist: that is no vanished generation.
    nodes = {f"n{i}": node(f"n{i}") for i in range(4)}
    cluster = Cluster(spec(phase("train", 2, 2), spares=1), nodes)
    cluster.settle()
    victim = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[victim] = with_ready(cluster.nodes[victim], False, cluster.now)
    said, made = _run(cluster, 12)
    assert said.count("WorkersRestarted") == 1 and cluster.status.restarts == 1
    assert sorted(made) == [("llm-train-g1-0", "true"), ("llm-train-g1-1", "true")]
