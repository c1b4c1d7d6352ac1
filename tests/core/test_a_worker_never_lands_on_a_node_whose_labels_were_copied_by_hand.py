"""A worker lands only on a node its job holds (``core.ownership.holds``), never on one a
person copied the job's labels and pool taint onto by hand.

A node claimed by a Phased from before installations carries no installation label, and its
job holds it only because it also carries the ``claimed-at`` a claim writes. The scheduler
cannot read annotations, so the worker's term for such nodes names them (``matchFields``
on ``metadata.name``): the ones its job held, installation-less, when the worker was made.
Before, that term asked only for the job's UID, the active role and no installation label,
and a node a person had given those labels by hand, which the operator does not count as
the job's, could take a worker: the job's ledger and the cluster then disagreed on where it
ran."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import CreatePod, NodeInfo, PodPhase
from phased.core.ownership import holds
from tests.core.builders import JOB, SETTINGS, Cluster, node, nodes, owned, phase, spec

CLAIMED = {labels.ANNOTATION_CLAIMED_AT: "2026-02-01T00:00:00Z"}


def _term_selects(term: Mapping[str, Any], n: NodeInfo) -> bool:
    for expr in term.get("matchExpressions", []):
        value = n.labels.get(expr["key"])
        if expr["operator"] == "In" and value not in expr["values"]:
            return False
        if expr["operator"] == "DoesNotExist" and value is not None:
            return False
        assert expr["operator"] in ("In", "DoesNotExist"), expr
    for field in term.get("matchFields", []):
        assert (field["key"], field["operator"]) == ("metadata.name", "In"), field
        if n.name not in field["values"]:
            return False
    return True


def _selects(manifest: Mapping[str, Any], n: NodeInfo) -> bool:
    """The worker's required node affinity selects ``n`` (terms ORed, requirements ANDed)."""
    affinity = manifest["spec"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return any(_term_selects(t, n) for t in terms)


def _without_installation(n: NodeInfo) -> NodeInfo:
    kept = {k: v for k, v in n.labels.items() if k != labels.LABEL_INSTALLATION}
    return replace(n, labels=kept)


def _hand_copies(name: str) -> list[NodeInfo]:
    """A person's copies of an active node's labels and taint: without the installation
    label (and so without the ``claimed-at`` that would make it an older claim), and with
    the installation label alone removed after a copy of the annotations missed it."""
    full = owned(node(name), NodeRole.ACTIVE)
    return [_without_installation(full), replace(_without_installation(full), annotations={})]


def _created(job: Cluster) -> list[Mapping[str, Any]]:
    return [a.manifest for a in job.log if isinstance(a, CreatePod)]


def test_a_worker_selects_the_nodes_its_job_holds_and_no_hand_copy() -> None:
    job = Cluster(spec(phase("train", 1, 1)), {n.name: n for n in nodes("n", 1)})
    job.settle()
    (worker,) = _created(job)
    held = job.nodes["n00"]
    assert holds(held, JOB.uid, SETTINGS.installation) and _selects(worker, held)
    for copy in _hand_copies("x"):
        assert not holds(copy, JOB.uid, SETTINGS.installation)
        assert not _selects(worker, copy), copy.labels


def test_workers_of_a_pool_claimed_before_installations_land_there_and_on_no_hand_copy() -> None:
    job = Cluster(spec(phase("train", 2, 2)), {n.name: n for n in nodes("n", 2)})
    job.settle()
    # The pool as an operator from before installations left it: no installation label,
    # the claim's claimed-at. A person copied its labels and taint onto two more nodes.
    for name in ("n00", "n01"):
        job.nodes[name] = replace(_without_installation(job.nodes[name]), annotations=CLAIMED)
    legacy = [job.nodes["n00"], job.nodes["n01"]]
    copies = [replace(c, name=f"copy{i}") for i, c in enumerate(_hand_copies("c"))]
    job.nodes.update({c.name: c for c in copies})
    before = len(_created(job))

    # A worker fails; the job restarts its gang (the pods are not scheduled here: the
    # simulator's scheduler places by UID and role, not by the affinity under test).
    name = min(p for p in job.pods if job.pods[p].phase == PodPhase.RUNNING)
    job.pods[name] = replace(job.pods[name], phase=PodPhase.FAILED)
    _workers_of_the_first_pass_name_the_legacy_nodes(job, legacy)
    # Each worker is judged against the pool as the pass that made it saw it, and as it is
    # after: the first pass writes the installation label on the legacy nodes (the role
    # written again), so a worker made before that lands there by its name term, and one
    # made after by the installation's.
    made: list[tuple[Mapping[str, Any], list[NodeInfo]]] = []
    for _ in range(3):
        job.advance(60)
        seen = [job.nodes[n.name] for n in legacy]
        done = len(_created(job))
        job.apply(job.decide())
        made += [(w, seen) for w in _created(job)[done:]]

    assert made, "the failure made no new worker"
    assert len(_created(job)) > before
    now = [job.nodes[n.name] for n in legacy]
    assert all(n.labels.get(labels.LABEL_INSTALLATION) == SETTINGS.installation for n in now)
    for worker, seen in made:
        for pool in (seen, now):
            assert any(_selects(worker, n) for n in pool)
            for n in pool:
                assert holds(n, JOB.uid, SETTINGS.installation)
        for copy in copies:
            assert not holds(copy, JOB.uid, SETTINGS.installation)
            assert not _selects(worker, copy), (worker["metadata"]["name"], copy.name)


def _workers_of_the_first_pass_name_the_legacy_nodes(job: Cluster, legacy: list[NodeInfo]) -> None:
    """The pass that first sees the legacy pool writes the installation label on it, and
    workers made in that same pass (the generation's workers all gone: a new one at once)
    carry the term that names the nodes; the job, as the test goes on, is left as it was."""
    trial = replace(job.snapshot(), pods=())
    plan = decide(trial, SETTINGS, job.now + timedelta(seconds=60))
    workers = [a.manifest for a in plan.actions if isinstance(a, CreatePod)]
    assert workers
    for worker in workers:
        terms = worker["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        assert any("matchFields" in t for t in terms)
        assert all(_selects(worker, n) for n in legacy)
