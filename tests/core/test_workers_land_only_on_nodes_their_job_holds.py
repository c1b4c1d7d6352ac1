"""A worker's required node affinity asks for what makes a node its job's: the job's UID,
the active role, and this installation's name (a node claimed by a Phased from before
installations is named instead: see
test_a_worker_never_lands_on_a_node_whose_labels_were_copied_by_hand). A node that still
carries the job's UID and the active role but another installation's label (a person or
another operator's script relabelled it) is not the job's: the job moves its worker off it
as after any loss of a node. Were the affinity the UID and role alone, the scheduler would
put the next generation's workers right back there, and the job restart its gang again and
again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import CreatePod, NodeInfo, PodPhase
from phased.core.ownership import holds
from phased.core.tolerations import CONDITION_TAINTS, untolerated
from tests.core.builders import JOB, SETTINGS, Cluster, node, nodes, owned, phase, spec


def _matches(term: Mapping[str, Any], node_labels: Mapping[str, str]) -> bool:
    for expr in term["matchExpressions"]:
        value = node_labels.get(expr["key"])
        if expr["operator"] == "In" and value not in expr["values"]:
            return False
        if expr["operator"] == "DoesNotExist" and value is not None:
            return False
        assert expr["operator"] in ("In", "DoesNotExist"), expr
    return True


def _lands(manifest: Mapping[str, Any], n: NodeInfo) -> bool:
    """The scheduler could bind the worker to ``n``: its required node affinity (terms ORed,
    expressions ANDed) and its tolerations."""
    spec = manifest["spec"]
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    if not any(_matches(t, n.labels) for t in required["nodeSelectorTerms"]):
        return False
    blocking = untolerated(n, spec["tolerations"])
    return not [t for t in blocking if not t.key.startswith(CONDITION_TAINTS)]


def _with(n: NodeInfo, **changed: str | None) -> NodeInfo:
    node_labels = {**n.labels, **{k: v for k, v in changed.items() if v is not None}}
    return replace(n, labels={k: v for k, v in node_labels.items() if changed.get(k, v)})


def _schedule(job: Cluster) -> None:
    """As the scheduler does: each Pending worker to the first free node it may land on."""
    made = {a.manifest["metadata"]["name"]: a.manifest for a in job.log if isinstance(a, CreatePod)}
    busy = {p.node_name for p in job.pods.values() if p.phase == PodPhase.RUNNING}
    for name, pod in sorted(job.pods.items()):
        if pod.phase != PodPhase.PENDING:
            continue
        for n in sorted(job.nodes.values(), key=lambda n: n.name):
            if n.name not in busy and _lands(made[name], n):
                job.pods[name] = replace(pod, node_name=n.name, phase=PodPhase.RUNNING)
                busy.add(n.name)
                break


def _a_worker() -> Mapping[str, Any]:
    job = Cluster(spec(phase("train", 1, 1)), {n.name: n for n in nodes("n", 1)})
    job.step()
    (create,) = [a for a in job.step().actions if isinstance(a, CreatePod)]
    return create.manifest


ACTIVE = owned(node("a"), NodeRole.ACTIVE)
OTHER_INSTALLATION = _with(ACTIVE, **{labels.LABEL_INSTALLATION: "team-b"})


def test_a_worker_lands_on_the_jobs_active_nodes_and_on_no_node_it_does_not_hold() -> None:
    worker = _a_worker()
    assert holds(ACTIVE, JOB.uid, SETTINGS.installation) and _lands(worker, ACTIVE)
    assert not holds(OTHER_INSTALLATION, JOB.uid, SETTINGS.installation)
    assert not _lands(worker, OTHER_INSTALLATION)
    spare = owned(node("s"), NodeRole.SPARE)
    assert not _lands(worker, spare)


def test_a_node_relabelled_to_another_installation_costs_one_restart_not_one_a_pass() -> None:
    shared = {n.name: n for n in nodes("n", 4)}
    job = Cluster(spec(phase("train", 2, 2), spares=1), shared)
    job.settle()
    assert job.held(NodeRole.ACTIVE) == ["n00", "n01"]
    shared["n00"] = _with(shared["n00"], **{labels.LABEL_INSTALLATION: "team-b"})

    for _ in range(6):
        job.advance(60)
        job.apply(job.decide())
        _schedule(job)

    assert job.status.restarts == 1
    running = sorted(p.node_name or "" for p in job.pods.values() if p.phase == PodPhase.RUNNING)
    assert running == ["n01", "n02"]
    assert shared["n00"].labels[labels.LABEL_INSTALLATION] == "team-b"  # never written on
