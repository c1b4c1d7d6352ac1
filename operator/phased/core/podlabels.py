"""Which pods are the job's workers, the numbers read back from their labels, and whether
to believe them.

A pod is the job's only when the job is its controller — its controlling ownerReference
names the job's UID, as on every worker Phased makes — and it carries the name Phased gives
the worker its labels describe (phase, generation, rank, attempt: :func:`made_by_job`). The
job's labels alone do not make one: a worker's manifest copied to debug it or to run beside
it, or another tool's pod, carries them too — a copy made from ``kubectl get -o yaml`` keeps
the ownerReference as well, but not the name, which the worker holds — and it is neither
counted as a worker (it would complete, fail, resize or restart a phase) nor ever deleted by
Phased.

Phased writes rank, world size, restart generation and attempt onto every worker pod and
reads them back (a status write may be lost). Anyone who may edit pods in the job's
namespace can rewrite them, so a value Phased could not have written makes the pod
untrusted: decide does not count it as a worker. None of these numbers may size a loop or a
list unless it is bounded by the spec first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from phased.api.v1alpha1 import MAX_GPUS_PER_NODE, MAX_NODES, GPUType, TrainingJobSpec
from phased.core import labels
from phased.core.model import JobRef, PodInfo
from phased.core.workers import pod_name

# Bounds on numbers read back from pod labels, which anyone who may edit pods in the job's
# namespace can rewrite: a restart a minute for two years, and pod names stay within 63.
MAX_GENERATION = 1_000_000
MAX_ATTEMPT = 1_000_000


def made_by_job(job: JobRef, pod: PodInfo) -> bool:
    """``pod``'s controlling ownerReference names ``job`` and its name is the one Phased
    gives the worker its labels describe (module docstring)."""
    if not job.uid or pod.controller != job.uid:
        return False
    rank = label_int(pod, labels.LABEL_RANK)
    generation = label_int(pod, labels.LABEL_GENERATION)
    attempt = label_int(pod, labels.LABEL_ATTEMPT) or 0
    if rank is None or generation is None:
        return False
    return pod.name == pod_name(job, pod.phase_name, generation, rank, attempt)


def label_int(pod: PodInfo, key: str) -> int | None:
    """The integer in label ``key``; None when absent or not an integer."""
    try:
        return int(pod.labels.get(key, ""))
    except ValueError:  # also more than 4300 digits
        return None


def trusted(spec: TrainingJobSpec, pod: PodInfo, running: tuple[str, int] = ("", 0)) -> bool:
    """Whether ``pod``'s labels are numbers Phased could have written for its phase.

    A rank outside ``[0, nodes.max)``, a negative or absurd generation or attempt: the pod
    was not made by Phased as it is, and decide does not count it as a worker (a finished
    job still stops it). Labels that do not parse at all are read as before (no rank;
    generation and attempt 0). A world-size label beyond ``nodes.max`` leaves the pod a
    worker; :func:`phased.core.phases.world_of` ignores the label.

    ``running`` is the current phase and the world size its generation was started with
    (``status.worldSize``): ranks below it were written by Phased even when ``nodes.max``
    has since been lowered, so those workers stay visible and are restarted at the new size,
    never left running unseen.
    """
    phase = next((p for p in spec.phases if p.name == pod.phase_name), None)
    limit = phase.nodes.max if phase is not None else max(p.nodes.max for p in spec.phases)
    if phase is not None and pod.phase_name == running[0]:
        limit = max(limit, min(running[1], MAX_NODES))
    rank = label_int(pod, labels.LABEL_RANK)
    generation = label_int(pod, labels.LABEL_GENERATION)
    attempt = label_int(pod, labels.LABEL_ATTEMPT)
    return (
        (rank is None or 0 <= rank < limit)
        and (generation is None or 0 <= generation <= MAX_GENERATION)
        and (attempt is None or 0 <= attempt <= MAX_ATTEMPT)
    )


@dataclass(frozen=True)
class Shape:
    """The GPU shape a worker was made for: its phase's ``gpusPerNode`` and ``gpuTypes``."""

    gpus_per_node: int
    gpu_types: tuple[str, ...]


def made_shape(pods: Iterable[PodInfo]) -> Shape | None:
    """The GPU shape the first made of ``pods`` (one phase's workers) carries in its labels;
    None when none carries one Phased could have written (workers made before the labels
    existed, or labels someone rewrote: a count beyond the CRD's bound, a type it does not
    know, a type twice)."""
    known = {t.value for t in GPUType}
    first = sorted(
        pods, key=lambda p: (p.created is None, p.created.timestamp() if p.created else 0.0, p.name)
    )
    for pod in first:
        gpus = label_int(pod, labels.LABEL_GPUS_PER_NODE)
        raw = pod.labels.get(labels.LABEL_GPU_TYPES)
        if gpus is None or raw is None or not 0 <= gpus <= MAX_GPUS_PER_NODE:
            continue
        types = tuple(raw.split(labels.GPU_TYPES_SEPARATOR)) if raw else ()
        if all(t in known for t in types) and len(set(types)) == len(types):
            return Shape(gpus, types)
    return None
