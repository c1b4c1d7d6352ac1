"""Edits of a running job that cannot be honoured, judged from the status and the pods.

A phase has **started** when it lies before ``status.phaseIndex`` (it ran), when its record
in ``status.phases`` has a start time or a Running/Succeeded/Failed state, or when worker
pods of it exist. Then:

1. a started phase keeps its name and its position: ``spec.phases[i].name`` is the name of
   the i-th record (the records are in the spec order the operator last worked from). A
   record whose phase has worker pods has started even when it does not say so: the status
   write that recorded the start was lost, and the CRD's rules, which read only the status,
   let the edit through; renamed, the phase's workers would run on unseen beside a second
   gang, and moved, the phases between would be taken as done;
2. with no records at all (a status lost or never written), a phase with worker pods is
   still in the spec;
3. the current phase, once started, keeps the GPU shape it started with: ``gpusPerNode``
   and ``gpuTypes`` (both recorded in its record at the start; a record that has no shape —
   the status write that recorded the start was lost, or an older operator wrote it — is
   judged against the shape its workers carry in their labels, what they were made with;
   of an older record with workers made before those labels only the chosen ``gpuType`` is
   known, and it must stay accepted, until the first pass records the shape the phase runs
   with: :func:`phased.core.sizing.recover_phase_start`).
4. once a phase has started, where checkpoints are written to and resumed from keeps: the
   claim the workers mount (none stays none) and ``checkpoint.path``, as the latest record
   that has them says (``checkpointClaim``, ``checkpointPath``, recorded at the start). An
   edit moving them would have the next generation (after a restart, or the next phase)
   mount another place and resume from nothing — a long run's progress silently lost.
   ``interval``, ``report`` and ``finalTimeout`` stay editable, and so do the ``size``,
   ``storageClassName`` and ``accessMode`` of a claim Phased creates: its name does not
   change, and the claim, once made, is never remade or changed (resize it on the claim
   itself). A switch between a claim Phased creates (``size``) and an existing one
   (``claimName``) is a move even to the same name (``<job>-checkpoints``), judged against
   the kind the record keeps (``checkpointClaimCreated``), as the CRD's rule refuses it
   (``has(size)`` may not change). With no record that has the place — an older operator
   wrote the records, or the status write of the first start was lost, so the CRD's rules
   let a move through — the newest worker is the witness: the claim its pod mounts and
   the path it was given (:func:`phased.core.storage.made_place`); before, nothing was
   judged.

The phase the job waits to start (``status.phaseIndex``, not started) may be renamed or
replaced by a phase of another name: its record, with what the wait cost (``waitingSeconds``,
the charges of the nodes held meanwhile), follows its place and takes the new name
(:func:`carried_record`), so the phase's account loses nothing; matched by name alone, the
edit left the phase an empty record.

The CRD refuses the same edits at ``kubectl apply`` with transition rules that judge the new
spec against the same status records (see ``crds/``). This re-check catches an edit that slipped
through — applied before the CRD carried the rules — and decide answers it by holding the
job: an ``InvalidSpec`` condition and a Warning event, no action at all (the workers keep
running, no node is claimed or released, the position and history are kept), until the spec
is put back. Everything else (spares, budgets, later phases, the running phase's
``nodes.min``/``nodes.max``, templates) is an edit decide honours.
"""

from __future__ import annotations

from collections.abc import Iterable

from phased.api.v1alpha1 import PhaseRecord, PhaseState, TrainingJobSpec, TrainingJobStatus
from phased.core.model import JobRef, PodInfo
from phased.core.podlabels import made_shape
from phased.core.storage import checkpoint_place, claim_created, made_place

_RAN = frozenset({PhaseState.RUNNING, PhaseState.SUCCEEDED, PhaseState.FAILED})


def started(
    record: PhaseRecord, index: int, status: TrainingJobStatus, with_pods: frozenset[str]
) -> bool:
    """Whether the phase of ``record`` (the ``index``-th) has started or run; ``with_pods``
    are the phases the job's worker pods belong to."""
    return (
        index < status.phase_index
        or record.start_time is not None
        or record.state in _RAN
        or record.name in with_pods
    )


def edit_problems(
    spec: TrainingJobSpec,
    status: TrainingJobStatus,
    pods: Iterable[PodInfo] = (),
    job: JobRef | None = None,
) -> list[str]:
    """What in ``spec`` contradicts what the job has already done; empty when none."""
    pods = list(pods)
    names = [p.name for p in spec.phases]
    with_pods = frozenset(p.phase_name for p in pods if p.phase_name)
    problems: list[str] = []
    for index, record in enumerate(status.phases):
        if not started(record, index, status, with_pods):
            continue
        now = names[index] if index < len(names) else None
        if now == record.name:
            continue
        if record.name not in names:
            where = "removed or renamed" + (f" (phase {index + 1} is now {now!r})" if now else "")
        else:
            where = f"moved from phase {index + 1} to phase {names.index(record.name) + 1}"
        problems.append(
            f"phase {record.name!r} has already started and cannot be removed, renamed or "
            f"reordered, but the spec has it {where}: put the phases that started back as "
            "they were (only later phases may change)"
        )
    seen = set() if status.phases else with_pods
    for name in sorted(seen - set(names)):
        problems.append(
            f"phase {name!r} has worker pods but is no longer in the spec: a phase that "
            "started cannot be removed or renamed"
        )
    problems.extend(_shape_problems(spec, status, pods, with_pods))
    if job is not None:
        problems.extend(_place_problems(spec, status, job, pods))
    return problems


def _place_problems(
    spec: TrainingJobSpec, status: TrainingJobStatus, job: JobRef, pods: Iterable[PodInfo]
) -> list[str]:
    """Rule 4: the place checkpoints are written to and resumed from keeps once the job has
    started, as the latest record that has it says; with none (an older operator wrote the
    records, or the status write of the start was lost), as the newest worker says
    (:func:`phased.core.storage.made_place`)."""
    placed = [r for r in status.phases if r.checkpoint_path is not None]
    if placed:
        record = placed[-1]
    else:
        made = made_place(job, spec, pods)
        if made is None:
            return []
        record = PhaseRecord(name="", checkpoint_claim=made[0], checkpoint_path=made[1])
    claim, path = checkpoint_place(job, spec)
    created = claim_created(spec)
    was: list[str] = []
    if record.checkpoint_claim is not None and record.checkpoint_claim != claim:
        now = repr(claim) if claim else "none"
        then = repr(record.checkpoint_claim) if record.checkpoint_claim else "none"
        was.append(f"claim {then} (now {now})")
    elif (
        claim
        and record.checkpoint_claim == claim
        and record.checkpoint_claim_created is not None
        and record.checkpoint_claim_created != created
    ):
        # The same name, the other kind: the CRD's rule refuses the switch too.
        was.append(
            f"claim {claim!r} as {_kind(record.checkpoint_claim_created)} (now {_kind(created)})"
        )
    if record.checkpoint_path != path:
        was.append(f"path {record.checkpoint_path!r} (now {path!r})")
    if not was:
        return []
    return [
        f"the job has started and where its checkpoints are cannot move: they are on "
        f"{' at '.join(was)}; put checkpoint.volume and checkpoint.path back (the next "
        "generation would resume from nothing; a new place needs a new job)"
    ]


def _kind(created: bool | None) -> str:
    return "a claim Phased creates (size)" if created else "an existing claim (claimName)"


def _shape_problems(
    spec: TrainingJobSpec,
    status: TrainingJobStatus,
    pods: list[PodInfo],
    with_pods: frozenset[str],
) -> list[str]:
    index = status.phase_index
    if not 0 <= index < min(len(status.phases), len(spec.phases)):
        return []
    record, phase = status.phases[index], spec.phases[index]
    if record.name != phase.name or not started(record, index, status, with_pods):
        return []
    if record.gpus_per_node is None or record.gpu_types is None:
        # The start's status write was lost (or an older operator wrote the record): the
        # workers carry the shape they were made with.
        made = made_shape(p for p in pods if p.phase_name == phase.name)
        if made is not None:
            record = record.model_copy(
                update={"gpus_per_node": made.gpus_per_node, "gpu_types": list(made.gpu_types)}
            )
    types = [t.value for t in phase.gpu_types]
    was: list[str] = []
    if record.gpus_per_node is not None and record.gpus_per_node != phase.gpus_per_node:
        was.append(f"gpusPerNode {record.gpus_per_node} (now {phase.gpus_per_node})")
    if record.gpu_types is not None and record.gpu_types != types:
        was.append(f"gpuTypes {record.gpu_types} (now {types})")
    if record.gpu_types is None and record.gpu_type is not None and record.gpu_type not in types:
        was.append(f"gpuType {record.gpu_type} (now gpuTypes {types})")  # an older record
    if not was:
        return []
    return [
        f"phase {phase.name!r} is running and its GPU shape cannot change: it started with "
        f"{' and '.join(was)}; put gpusPerNode and gpuTypes back (a new shape needs a new phase "
        "or a new job)"
    ]


def carried_record(
    spec: TrainingJobSpec, status: TrainingJobStatus, pods: Iterable[PodInfo] = ()
) -> PhaseRecord | None:
    """The record of the phase the job waits to start, renamed to the phase the spec now has
    in its place, when an edit renamed or replaced it (module docstring); None when the
    phase there kept its name, has a record of its own, or the waited phase has started
    (such an edit is refused: :func:`edit_problems`)."""
    index = status.phase_index
    if not 0 <= index < min(len(status.phases), len(spec.phases)):
        return None
    waited, name = status.phases[index], spec.phases[index].name
    names = {p.name for p in spec.phases}
    if waited.name in names or any(r.name == name for r in status.phases):
        return None
    with_pods = frozenset(p.phase_name for p in pods if p.phase_name)
    if started(waited, index, status, with_pods):
        return None
    return waited.model_copy(update={"name": name})
