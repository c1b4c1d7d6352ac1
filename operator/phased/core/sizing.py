"""Sizing the pool for the current phase, and starting a generation of workers on it.

While no generation of the phase runs, the pool is *formed*: held nodes of the wrong type
are released, then the phase takes ``nodes.min`` actives, then ``spares.count`` spares,
then actives up to ``nodes.max`` (see :class:`phased.core.pools.Targets`), promoting held
spares before claiming free nodes, and claiming the free nodes nearest (rack, block, zone)
to what it holds. Anything beyond ``max + spares.count`` is released, spares first, the
farthest first. Workers are created once at least ``min`` actives are held and Ready and no
active claim is still in flight (so the world size includes them): one per active node.

While a generation runs, only the spares move: refilled from free nodes up to
``spares.count`` (``SparesRefilled``), trimmed beyond ``max + spares.count``.

Below ``min`` the job waits: ``CapacityShort`` says what is missing and ``waiting_for``
tells other jobs' reconcilers; a job not first in line for the type gives its nodes back.

Only unmarked, free, unoccupied nodes are claimed. When the job would take more nodes than
it got (short of ``max + spares.count``) and nodes of its type are left alone for their
marks or their pods (:mod:`phased.core.ownership`), it says so: a ``NodesLeftAlone``
Warning event naming them and why.
"""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole, PhaseState
from phased.core.conditions import ConditionType
from phased.core.draft import NORMAL, WARNING, Draft
from phased.core.model import (
    Claimant,
    ClaimNode,
    CreatePod,
    EnsureService,
    NodeInfo,
    ReleaseNode,
    SetNodeRole,
)
from phased.core.ownership import Kind, LeftAlone, ownership
from phased.core.phases import generation_pods, live
from phased.core.pools import (
    CPU_TYPE,
    Targets,
    choose_type,
    farthest_first,
    first_in_line,
    free_matching,
    gpu_resource,
    has_type_labels,
    matches,
    nearest_first,
    type_keys,
)
from phased.core.times import format_time
from phased.core.workers import Worker, service_manifest


def phase_type(draft: Draft) -> str:
    """The phase's type: the one recorded when it started, else the best one now."""
    chosen = draft.record.gpu_type
    if chosen is not None and chosen in type_keys(draft.phase):
        return chosen
    held = draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE)
    free = {
        key: free_matching(_unheld(draft), key, draft.phase.gpus_per_node, draft.settings)
        for key in type_keys(draft.phase)
    }
    return choose_type(draft.phase, held, free, draft.settings)[0]


def _unheld(draft: Draft) -> list[NodeInfo]:
    """Nodes the job does not hold and on which no pod of others was seen."""
    return [
        n
        for n in draft.nodes.values()
        if n.name not in draft.roles and n.name not in draft.occupied
    ]


_SURFACED = (LeftAlone.OTHER_INSTALLATION, LeftAlone.NO_INSTALLATION, LeftAlone.PARTIAL_MARKS)
_NAMED = 5  # nodes named in one event


def left_alone(draft: Draft, type_key: str) -> list[tuple[str, str]]:
    """Nodes of the phase's type that Phased leaves alone for marks it did not write or for
    others' pods: (node, why), by name."""
    found: list[tuple[str, str]] = []
    gpus = draft.phase.gpus_per_node
    for name in sorted(draft.nodes):
        node = draft.nodes[name]
        if name in draft.roles or not matches(node, type_key, gpus, draft.settings):
            continue
        if name in draft.occupied:
            pods = draft.occupied[name]
            found.append((name, f"{LeftAlone.RUNNING_PODS.value}: {', '.join(pods[:3])}"))
            continue
        owner = ownership(node, draft.settings.installation)
        if owner.kind == Kind.LEFT_ALONE and owner.reason in _SURFACED:
            found.append((name, str(owner.reason)))
    return found


def _surface_left_alone(draft: Draft, type_key: str, short: bool) -> None:
    if not short:
        return
    found = left_alone(draft, type_key)
    if not found:
        return
    named = "; ".join(f"{n} ({why})" for n, why in found[:_NAMED])
    more = f"; and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
    draft.event(
        WARNING,
        "NodesLeftAlone",
        f"{len(found)} {_label(type_key)} node(s) not claimed for phase {draft.phase.name}: "
        f"{named}{more}",
    )


def _label(type_key: str) -> str:
    return type_key if type_key != CPU_TYPE else "CPU"


def _me(draft: Draft, type_key: str, missing: int) -> Claimant:
    job = draft.snap.job
    return Claimant(job.uid, draft.spec.priority, job.created, {type_key: max(missing, 1)})


def _claim(draft: Draft, node: NodeInfo, role: NodeRole) -> None:
    draft.act(ClaimNode(node=node.name, resource_version=node.resource_version, role=role))
    draft.roles[node.name] = role


def _release(draft: Draft, node: NodeInfo) -> None:
    draft.act(ReleaseNode(node=node.name))
    draft.roles.pop(node.name, None)


def _set_role(draft: Draft, node: NodeInfo, role: NodeRole) -> None:
    draft.act(SetNodeRole(node=node.name, role=role))
    draft.roles[node.name] = role


def form_pool(draft: Draft, type_key: str) -> None:
    """Size the pool for a phase whose generation is not running (module docstring)."""
    phase = draft.phase
    for node in draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE):
        if not has_type_labels(node, type_key, draft.settings):
            _release(draft, node)
    held = len(draft.held(NodeRole.ACTIVE)) + len(draft.held(NodeRole.SPARE))
    free = free_matching(_unheld(draft), type_key, phase.gpus_per_node, draft.settings)
    allowed = first_in_line(
        _me(draft, type_key, phase.nodes.min - held), draft.snap.waiting, type_key
    )
    if not allowed:
        free = []
        if held < phase.nodes.min:  # give way: never sit on half a pool another job needs
            for node in draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE):
                _release(draft, node)
            held = 0
    targets = Targets.for_available(phase, draft.spec.spares.count, held + len(free))
    _fit_actives(draft, targets, free)
    _fit_spares(draft, targets.spares, free)
    _report_capacity(draft, type_key, targets.active)
    pool = len(draft.held(NodeRole.ACTIVE)) + len(draft.held(NodeRole.SPARE))
    _surface_left_alone(
        draft, type_key, allowed and pool < phase.nodes.max + draft.spec.spares.count
    )


def _fit_actives(draft: Draft, targets: Targets, free: list[NodeInfo]) -> None:
    actives = draft.held(NodeRole.ACTIVE)
    for node in farthest_first(actives, actives)[: max(0, len(actives) - targets.active)]:
        if len(draft.held(NodeRole.SPARE)) < targets.spares:
            _set_role(draft, node, NodeRole.SPARE)
        else:
            _release(draft, node)
    while len(draft.held(NodeRole.ACTIVE)) < targets.active and draft.held(NodeRole.SPARE):
        spare = nearest_first(draft.held(NodeRole.SPARE), draft.held(NodeRole.ACTIVE))[0]
        _set_role(draft, spare, NodeRole.ACTIVE)
    need = targets.active - len(draft.held(NodeRole.ACTIVE))
    for node in nearest_first(free, draft.held(NodeRole.ACTIVE))[: max(0, need)]:
        _claim(draft, node, NodeRole.ACTIVE)
        free.remove(node)


def _fit_spares(draft: Draft, wanted: int, free: list[NodeInfo]) -> int:
    """Claim or release spares to reach ``wanted``; returns how many were claimed."""
    spares = draft.held(NodeRole.SPARE)
    actives = draft.held(NodeRole.ACTIVE)
    for node in farthest_first(spares, actives)[: max(0, len(spares) - wanted)]:
        _release(draft, node)
    need = wanted - len(draft.held(NodeRole.SPARE))
    picked = nearest_first(free, actives)[: max(0, need)]
    for node in picked:
        _claim(draft, node, NodeRole.SPARE)
        free.remove(node)
    return len(picked)


def _report_capacity(draft: Draft, type_key: str, have: int) -> None:
    need = draft.phase.nodes.min
    if have >= need:
        draft.set(waiting_for={})
        draft.condition(ConditionType.CAPACITY_SHORT, False, "Enough", "")
        return
    missing = need - have
    message = (
        f"need {need} {_label(type_key)} nodes for phase {draft.phase.name}, "
        f"have {have} ({missing} missing)"
    )
    draft.waiting = True
    draft.set(waiting_for={type_key: missing})
    draft.condition(ConditionType.CAPACITY_SHORT, True, "NotEnoughNodes", message, WARNING)


def refill_spares(draft: Draft, type_key: str) -> None:
    """While a generation runs: spares back up to ``spares.count``, none beyond the cap."""
    for node in draft.held(NodeRole.SPARE):
        if not has_type_labels(node, type_key, draft.settings):
            _release(draft, node)
    wanted = draft.spec.spares.count
    short = wanted - len(draft.held(NodeRole.SPARE))
    free: list[NodeInfo] = []
    if short > 0:
        candidates = free_matching(
            _unheld(draft), type_key, draft.phase.gpus_per_node, draft.settings
        )
        if first_in_line(_me(draft, type_key, short), draft.snap.waiting, type_key):
            free = candidates
    room = draft.phase.nodes.max + wanted - len(draft.held(NodeRole.ACTIVE))
    claimed = _fit_spares(draft, max(0, min(wanted, room)), free)
    if claimed:
        draft.event(
            NORMAL,
            "SparesRefilled",
            f"claimed {claimed} spare node(s); {len(draft.held(NodeRole.SPARE))} of {wanted} held",
        )
    if len(draft.held(NodeRole.SPARE)) >= wanted > 0:
        draft.condition(ConditionType.SPARES_EXHAUSTED, False, "SparesHeld", "")
    _surface_left_alone(draft, type_key, len(draft.held(NodeRole.SPARE)) < wanted)
    draft.set(waiting_for={})
    draft.condition(ConditionType.CAPACITY_SHORT, False, "Enough", "")


def start_generation(draft: Draft, type_key: str) -> bool:
    """Create the phase's workers when the pool is ready; True when they were created."""
    actives = draft.held(NodeRole.ACTIVE)
    if draft.waiting or draft.claiming_active() or draft.breaker_nodes:
        return False
    if len(actives) < draft.phase.nodes.min or not all(n.ready for n in actives):
        return False
    if not draft.snap.service_exists:
        draft.act(EnsureService(manifest=service_manifest(draft.snap.job)))
    world = len(actives)
    gen = draft.status.restart_generation
    resource = gpu_resource(type_key, draft.settings)
    for rank in range(world):
        worker = Worker(
            job=draft.snap.job,
            spec=draft.spec,
            phase=draft.phase,
            generation=gen,
            rank=rank,
            world_size=world,
            resource=resource,
            service_account=draft.settings.workers.service_account,
        )
        draft.act(CreatePod(manifest=worker.manifest()))
    draft.set(world_size=world)
    if draft.record.start_time is None:
        draft.update_record(
            start_time=format_time(draft.now), gpu_type=type_key or None, state=PhaseState.RUNNING
        )
        draft.event(
            NORMAL,
            "PhaseStarted",
            f"phase {draft.phase.name} started on {world} {_label(type_key)} nodes",
        )
    return True


def size_and_start(draft: Draft, type_key: str) -> None:
    """Form the pool and start workers, or keep the spares of a running generation."""
    if draft.status.state in (JobState.SUCCEEDED, JobState.FAILED):
        return
    if live(generation_pods(draft)):
        refill_spares(draft, type_key)
        if not draft.snap.service_exists:
            draft.act(EnsureService(manifest=service_manifest(draft.snap.job)))
        return
    form_pool(draft, type_key)
    start_generation(draft, type_key)
