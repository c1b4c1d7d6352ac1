"""Sizing the pool for the current phase, and starting a generation of workers on it.

While no generation of the phase runs, the pool is *formed*: held nodes that do not fit the
phase are released first (:func:`release_misfits`: the wrong type, a GPU node held for a CPU
phase, or a GPU capacity below ``gpusPerNode``; this runs before failure detection, so a
node that could never serve the phase is given back, not taken for a failed one — but a
node that is failing is left to failure handling: one the breaker holds, or one whose GPUs
dropped while it served the running phase, :func:`_failing`), then the
phase takes ``nodes.min`` actives, then ``spares.count`` spares, then actives up to
``nodes.max`` (see :class:`phased.core.pools.Targets`), promoting held spares before
claiming free nodes, and claiming the free nodes nearest (rack, block, zone) to what it
holds (holding nothing yet: to the rack with the most free nodes, see
:func:`phased.core.pools.anchors_for`). Anything beyond ``max + spares.count`` is released,
those in trouble within their grace first (a troubled spare before a healthy active beyond
``max``, which takes its place as a spare), then the farthest. Workers are
created once at least ``min`` actives are held and Ready and no active claim is still in
flight (so the world size includes them): one per active node. An active node in trouble
but within its grace trades roles with a healthy Ready spare before the generation starts
(:func:`phased.core.recovery.keep_troubled_out`), so a new phase or generation does not wait
out a grace when a spare can take the place. A free node claimed as active while a failure
is open names the failed node it replaces (``ClaimNode.replaces``), so the ledger's
``replacedBy`` is kept when the pool regrows from free nodes as well as from spares.

While a generation runs, only the spares move: refilled from free nodes up to
``spares.count`` (``SparesRefilled``), trimmed beyond ``max + spares.count``. (Recovery, in
:mod:`phased.core.recovery`, moves actives: a failed node's place goes to a spare, a troubled
one no worker is bound to yet trades places with one, and a ``nodes.max`` lowered below the
running world restarts the gang, after which the pool is formed again at the new size.)

Gang admission: a phase being formed claims its whole pool in one pass once what it holds
plus the free nodes not reserved for jobs ahead of it in line reach ``nodes.min``; otherwise
it holds nothing (it gives back what it held, once its need is published:
:func:`_place_published`), says so in ``CapacityShort`` and publishes ``waiting_for`` (its
``nodes.min``) so that jobs behind it keep those nodes for it. A phase
that has started before (re-forming after a failure) and a running generation's spare refill
never wait in line to make up the pool they ran with; a restart growing the pool beyond
it takes only what the waiting jobs ahead leave (:func:`_owed`); a spare refill, and a
restart making up its spares, leave a job ahead the free nodes that would admit it now
(:func:`_left_by_jobs_starting`). After
``admission.waitTimeout`` of waiting (counted from ``CapacityShort``'s transition) the job
gets ``AdmissionTimedOut`` and a Warning event and keeps its place (``onTimeout: Wait``), or
fails (``onTimeout: Fail``).
Below ``min`` the job waits: ``CapacityShort`` says what is missing and ``waiting_for``
tells other jobs' reconcilers; a job not first in line for the type gives its nodes back.

A held node a person cordoned is given back once no worker of the job runs on it
(:func:`release_cordoned`): it could never take a new one.

While the breaker holds failures nothing here moves (:mod:`phased.core.failure`): the pool
is neither formed nor refilled, so no node it holds is released, swapped or replaced; only
nodes beyond what the job can use that it does not hold and no worker runs on are given
back (:func:`_give_back_surplus`).

Only unmarked, free, unoccupied nodes are claimed, and none on which one of the job's
``gpuFaultConditions`` is True. When the job would take more nodes than
it got (short of ``max + spares.count``) and nodes of its type are left alone for their
marks or their pods (:mod:`phased.core.ownership`), or nobody holds them but they could not
take a worker now (cordoned, not Ready, tainted), it says so: a ``NodesLeftAlone`` Warning
event naming them and why.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import (
    AdmissionTimeoutAction,
    JobState,
    NodeRole,
    PhaseState,
    SpareIdlePolicy,
)
from phased.core import checkpoints
from phased.core.conditions import ConditionType, find
from phased.core.draft import NORMAL, WARNING, Draft
from phased.core.labels import (
    ANNOTATION_REPLACES,
    LABEL_INSTALLATION,
    LABEL_JOB,
    LABEL_JOB_NAMESPACE,
    TAINT_POOL,
    TAINT_SPARE,
)
from phased.core.ledger import decode_replaces, mark_replaced
from phased.core.model import (
    Claimant,
    ClaimNode,
    CreatePod,
    EnsureService,
    NodeInfo,
    NodeSet,
    ReleaseNode,
    SetNodeRole,
)
from phased.core.occupancy import LOOK_AGAIN_SECONDS, leaving
from phased.core.ownership import Kind, LeftAlone, marks, ownership
from phased.core.phases import (
    ENDED,
    fail,
    generation_pods,
    latest_attempts,
    live,
    next_generation,
    stopping_until,
)
from phased.core.podlabels import Shape, made_shape
from phased.core.pools import (
    CPU_TYPE,
    Targets,
    ahead_of,
    anchors_for,
    choose_type,
    could_run_on,
    counted_once,
    farthest_first,
    fits,
    free_matching,
    gpu_kind,
    gpu_resource,
    has_type_labels,
    is_free,
    kept_for_ahead,
    matches,
    nearest_first,
    nearest_fitting,
    starting_now,
    type_fit,
    type_keys,
    type_total,
    unfit_now,
)
from phased.core.recovery import (
    keep_troubled_out,
    promotable,
    promoted_last,
    stalled_nodes,
)
from phased.core.scope import in_scope
from phased.core.storage import checkpoint_place, claim_created, made_place
from phased.core.times import format_time, parse_time, seconds_between
from phased.core.tolerations import foreign_blocking
from phased.core.workers import Worker, service_manifest


def phase_type(draft: Draft) -> str:
    """The phase's type: the one recorded when it started, else the best one now.

    A started phase whose pool is formed anew (no worker of its generation left, the breaker
    holding nothing) and that can no longer make ``nodes.min`` of the type it ran on — held
    and free nodes of it, as it would claim them — while another type it accepts can, moves
    to that one (:func:`_moved_type`): its next generation resumes from the checkpoint there,
    and the record names the new type once the pool is formed (:func:`_record_type`). A
    live generation runs on the type of the nodes it was made on, whatever the record says
    (:func:`_running_type`: the write that named the new type was lost)."""
    chosen = draft.record.gpu_type
    keys = type_keys(draft.phase)
    if chosen is not None and chosen in keys:
        return _moved_type(draft, chosen) or _running_type(draft, chosen) or chosen
    held = draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE)
    free = {key: _available(draft, key)[0].every() for key in keys}
    chosen, enough = choose_type(draft.phase, held, free, draft.settings)
    if enough or len(keys) == 1:
        return chosen
    # It waits: for a type the cluster has enough nodes of, if any (counted only now).
    gpus = draft.phase.gpus_per_node
    totals = {
        k: type_total(draft.nodes.values(), k, gpus, draft.settings, draft.tolerations)
        for k in keys
    }
    return choose_type(draft.phase, held, free, draft.settings, totals)[0]


def _moved_type(draft: Draft, ran_on: str) -> str | None:
    """The accepted type a started phase re-forms on instead of ``ran_on`` (None: it stays).

    Only when its pool is formed anew — no live worker of its generation (a mass failure the
    spares did not cover restarted the gang, and the pool is given up or being given up) and
    nothing held by the breaker — and when the held and free nodes of ``ran_on`` fall short
    of ``nodes.min`` while those of another accepted type reach it (the first in the
    phase's order of preference). A type that still makes up the pool is kept, however many
    nodes of another are free: its nodes are what the job has run on."""
    keys = type_keys(draft.phase)
    if len(keys) < 2 or live(generation_pods(draft)) or draft.snap.status.breaker.held:
        return None
    held = draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE)
    free = {key: _available(draft, key)[0].every() for key in keys}
    need = draft.phase.nodes.min
    mine = sum(1 for n in held if has_type_labels(n, ran_on, draft.settings))
    if mine + len(free[ran_on]) >= need:
        return None
    chosen, enough = choose_type(draft.phase, held, free, draft.settings)
    return chosen if enough and chosen != ran_on else None


def _running_type(draft: Draft, recorded: str) -> str | None:
    """The accepted type a live generation runs on when the record names another (None: the
    recorded one): no active node the job holds is of ``recorded`` and every one is of that
    type. The pass that re-formed the pool there (:func:`_moved_type`) claimed the nodes
    and created the workers, but its status write, naming the type, was lost; with live
    workers the phase no longer re-forms, and the old type taken for the one it runs on
    refilled its spares with nodes its gang could not use."""
    keys = type_keys(draft.phase)
    actives = draft.held(NodeRole.ACTIVE)
    if len(keys) < 2 or not actives or not live(generation_pods(draft)):
        return None
    if any(has_type_labels(n, recorded, draft.settings) for n in actives):
        return None
    return next(
        (
            key
            for key in keys
            if key != recorded and all(has_type_labels(n, key, draft.settings) for n in actives)
        ),
        None,
    )


def _record_type(draft: Draft, type_key: str) -> None:
    """The pool of a started phase was formed on another type than its record names
    (:func:`_moved_type`): the record names the type it runs on now, and one event says so."""
    ran_on = draft.record.gpu_type
    if not _started(draft) or ran_on is None or ran_on == type_key:
        return
    draft.update_record(gpu_type=type_key)
    draft.event(
        NORMAL,
        "PhaseGPUTypeChanged",
        f"phase {draft.phase.name} re-forms on {type_key}: the {ran_on} nodes held and free "
        f"do not make its nodes.min {draft.phase.nodes.min}, and {type_key} is among its "
        "gpuTypes; the next generation resumes from the last checkpoint there",
    )


def _unheld(draft: Draft) -> tuple[NodeInfo, ...]:
    """Nodes the job does not hold, within the operator's ``nodeSelector`` (the operator
    also sees nodes out of it that carry its marks, and one it read to learn whether a pool
    node was deleted), on which no pod of others was seen and none of the job's
    ``gpuFaultConditions`` is True (claimed, such a node would fail at once, dated from its
    fault's own start, long before the job held it).

    Looked for once per set of nodes the job holds in a pass (``Draft.unheld_memo``): a
    failure's pass asked up to five times, each a walk over every node of the cluster. Only
    the first walk reads the nodes (``Draft.claimable``); the others leave out what is held."""
    held = frozenset(draft.roles)
    found = draft.unheld_memo.get(held)
    if found is None:
        if draft.claimable is None:
            draft.claimable = tuple(filter(_claimable(draft), draft.nodes.values()))
        found = tuple(n for n in draft.claimable if n.name not in held)
        draft.unheld_memo[held] = found
    return found


def _claimable(draft: Draft) -> Callable[[NodeInfo], bool]:
    """Whether a node is one :func:`_unheld` takes, held or not: within the operator's
    ``nodeSelector``, no pod of others seen on it, none of the job's fault conditions
    True."""
    faults = frozenset(draft.spec.failure_policy.gpu_fault_conditions)
    occupied, selector, settings = draft.occupied, draft.settings.node_selector, draft.settings

    def claimable(n: NodeInfo) -> bool:
        return (
            n.name not in occupied
            and (not selector or in_scope(n, settings))
            and faults.isdisjoint(n.true_conditions)
        )

    return claimable


class _Free:
    """The free nodes a pass may claim (a pool formed or re-formed, spares refilled), taken
    in claim order (:func:`_claim_order`, with the pool's anchors as they stand at each
    take): either listed, every candidate (what the line's rules and a new pool's first
    rack need), or found near the pool (:meth:`near`).

    Near the pool, the candidates are not listed: they are the nodes not held when the
    search began that :func:`_claimable` takes, free and of the phase's type (``fits``),
    looked up nearest first in the node set's topology index
    (:func:`phased.core.pools.nearest_fitting`). A failure's pass finds the spare's refill
    in the pool's own racks and blocks, where it walked every node of the cluster twice, to
    list the candidates and to order them. With no anchors (the job holds nothing), or to be
    counted all, they are listed after all, by name, as :func:`free_matching` lists them."""

    def __init__(
        self,
        listed: list[NodeInfo] | None,
        nodes: NodeSet | None = None,
        fits: Callable[[NodeInfo], bool] | None = None,
        taken: set[str] | None = None,
    ) -> None:
        self._listed = listed
        self._nodes = nodes
        self._fits = fits
        self._taken = taken if taken is not None else set()

    @classmethod
    def near(cls, draft: Draft, type_key: str) -> _Free:
        fit = type_fit(type_key, draft.phase.gpus_per_node, draft.settings)
        if fit is None:
            return cls([])
        claimable, tolerations = _claimable(draft), draft.tolerations
        taken = set(draft.roles)  # held now, and each node taken from here since

        def fits(n: NodeInfo) -> bool:
            return n.name not in taken and claimable(n) and fit(n) and is_free(n, tolerations)

        return cls(None, draft.snap.nodes, fits, taken)

    def every(self) -> list[NodeInfo]:
        """All of them, listed (by name, when they were not yet)."""
        if self._listed is None:
            nodes, fits = self._nodes, self._fits
            self._listed = (
                [] if nodes is None or fits is None else [*nearest_fitting(nodes, (), fits)]
            )
        return self._listed

    def _nearest(self, draft: Draft) -> Iterator[NodeInfo] | None:
        """The candidates in claim order, found near the pool; ``None`` when listed."""
        if self._listed is not None or self._nodes is None or self._fits is None:
            return None
        anchors = draft.held(NodeRole.ACTIVE) or draft.held(NodeRole.SPARE)
        if not anchors:
            return None
        return nearest_fitting(self._nodes, anchors, self._fits)

    def count(self, draft: Draft, cap: int) -> int:
        """How many there are, or ``cap`` when at least that many: near the pool, no more
        are looked for than could change what the pool is formed into."""
        order = self._nearest(draft)
        if order is None:
            return len(self.every())
        return sum(1 for _ in itertools.islice(order, max(0, cap)))

    def take(self, draft: Draft, need: int) -> list[NodeInfo]:
        """The first ``need`` in claim order, no longer candidates once taken."""
        if need <= 0:
            return []
        order = self._nearest(draft)
        if order is None:
            listed = self.every()
            picked = _claim_order(draft, listed)[:need]
            for node in picked:
                listed.remove(node)
            return picked
        picked = list(itertools.islice(order, need))
        self._taken.update(n.name for n in picked)
        return picked


_SURFACED = (LeftAlone.OTHER_INSTALLATION, LeftAlone.NO_INSTALLATION, LeftAlone.PARTIAL_MARKS)
_NAMED = 5  # nodes named in one event


def left_alone(draft: Draft, type_key: str) -> list[tuple[str, str]]:
    """Nodes of the phase's type that Phased leaves alone for marks it did not write or for
    others' pods, and unmarked ones that could not take a worker now (cordoned, not Ready,
    tainted: :func:`phased.core.pools.unfit_now`): (node, why), by name. Only nodes within
    the operator's ``nodeSelector``: one out of it is not the operator's to use whatever its
    marks or cordon (it is seen only while it carries this installation's marks), and named
    it sent a person to mend a node that would never be claimed anyway."""
    found: list[tuple[str, str]] = []
    gpus = draft.phase.gpus_per_node
    for name in sorted(draft.nodes):
        node = draft.nodes[name]
        if name in draft.roles or not matches(node, type_key, gpus, draft.settings):
            continue
        if not in_scope(node, draft.settings):
            continue
        if name in draft.occupied:
            pods = draft.occupied[name]
            found.append((name, f"{LeftAlone.RUNNING_PODS.value}: {', '.join(pods[:3])}"))
            continue
        owner = ownership(node, draft.settings.installation)
        if owner.kind == Kind.LEFT_ALONE and owner.reason in _SURFACED:
            found.append((name, str(owner.reason)))
        elif (
            owner.kind == Kind.UNMARKED and (why := unfit_now(node, draft.tolerations)) is not None
        ):
            found.append((name, why))
    return found


def _surface_left_alone(draft: Draft, type_key: str, short: bool) -> None:
    if not short:
        return
    _look_again_at_leaving(draft, type_key)
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


def _look_again_at_leaving(draft: Draft, type_key: str) -> None:
    """The job would take more nodes of its type: a node of it kept out only by pods of
    others on their way out (:func:`phased.core.occupancy.leaving`) is looked at again
    within seconds — nothing else would wake the job when they are gone — by asking to be
    woken then (the reconciler forgets such a node's pods as soon, and lists them anew)."""
    gpus = draft.phase.gpus_per_node
    for name, pods in draft.snap.node_pods.items():
        node = draft.nodes.get(name)
        if (
            name in draft.occupied
            and node is not None
            and is_free(node, draft.tolerations)
            and matches(node, type_key, gpus, draft.settings)
            and leaving(pods, draft.settings)
        ):
            draft.later(LOOK_AGAIN_SECONDS)
            return


def _label(type_key: str) -> str:
    return type_key if type_key != CPU_TYPE else "CPU"


def _me(draft: Draft, type_key: str, missing: int) -> Claimant:
    job = draft.snap.job
    return Claimant(job.uid, draft.spec.priority, job.created, {type_key: max(missing, 1)})


def _started(draft: Draft) -> bool:
    """The phase has run (its workers were created once): re-forming it after a failure is
    a replacement, which never waits in line."""
    return draft.record.start_time is not None


def _owed(draft: Draft) -> tuple[int, int]:
    """Free nodes a phase re-forming after a restart takes without waiting in line: what
    makes up the pool it ran with — (for its last world, for its spares). The world's are
    taken whatever the line; the spares (``spares.count``), as a running generation's refill
    does (:func:`refill_spares`), leave a job ahead the free nodes that would admit it now
    (:func:`_left_by_jobs_starting`). Nothing for a phase that has not started: all it
    takes is admitted in line. Nothing either for one whose job waits (its pool given up
    to wait in line, or given back while the namespace refused its workers): it holds no
    pool to make up, and is admitted at its place in line as any waiting job is. Before, it
    took its whole last world whatever the line once the nodes came free, from under a job
    ahead waiting for some of them.

    A ``nodes.min`` raised above the last world asks for actives the phase never ran with:
    they come, as growth toward ``nodes.max`` does, only from what the waiting jobs ahead
    leave, and when that is too little the pool is given up to wait in line. Only a world
    no status recorded (0) is read as ``nodes.min``."""
    if not _started(draft) or draft.snap.status.state == JobState.WAITING:
        return 0, 0
    world = draft.status.world_size or draft.phase.nodes.min
    held = len(draft.held(NodeRole.ACTIVE)) + len(draft.held(NodeRole.SPARE))
    for_world = max(0, world - held)
    return for_world, max(0, world + draft.spec.spares.count - held) - for_world


def _available(draft: Draft, type_key: str) -> tuple[_Free, int]:
    """Free matching nodes this job may claim now, and how many are reserved for jobs ahead.

    A started phase re-forming takes what it is owed (:func:`_owed`: the pool it ran with),
    nearest first: its world whatever the line, its spares from what a job ahead that the
    free nodes would admit now leaves (:func:`_left_by_jobs_starting`, as the refill does;
    a CPU phase's, as its refill, from no GPU node a waiting GPU job wants, whatever that
    job's place: :func:`_kept_for_gpu_jobs`);
    what it would grow by beyond that (toward
    ``nodes.max``, or up to a ``nodes.min`` raised above its world), like all a phase being
    admitted takes, is only what the waiting jobs ahead of it leave.

    The jobs ahead keep only free nodes they could take (:func:`phased.core.pools.
    kept_for_ahead`): what they could take that this job cannot counts towards their need
    first, and a node they could never run on (a taint their workers do not tolerate, fewer
    GPUs than their ``gpusPerNode``) is not kept for them.

    A CPU phase allowed GPU nodes (``cpu.allowGpuNodes``) may take the free GPU nodes too,
    so the GPU jobs ahead of it in line keep theirs from it: first the nodes of each GPU
    type that the waiting jobs ahead want of it (each counted once: :func:`_gpu_wanted`; the
    farthest from this job's pool), then, among the rest, what the CPU jobs ahead want."""
    if not draft.snap.waiting and type_key != CPU_TYPE:
        # No job in line (none waits, none runs short of spares) and no GPU node kept from
        # a CPU phase: nothing below keeps a node from this job, and what it owes comes
        # first in the claim order anyway. The free nodes are found near the pool as they
        # are taken (_Free.near): a failure's pass, at thousands of free nodes, walked them
        # all twice, and before that five more times.
        return _Free.near(draft, type_key), 0
    free = free_matching(
        _unheld(draft), type_key, draft.phase.gpus_per_node, draft.settings, draft.tolerations
    )
    ordered = _claim_order(draft, free)
    for_world, for_spares = _owed(draft)
    world = ordered[:for_world]
    spares: list[NodeInfo] = []
    if for_spares:
        left = ordered[for_world:]
        if type_key == CPU_TYPE:  # as the refill: no GPU node a waiting GPU job wants
            gpu_kept = _kept_for_gpu_jobs(draft, None, left, world)
            left = [n for n in left if n.name not in gpu_kept]
        spares = _left_by_jobs_starting(draft, type_key, left, world)[:for_spares]
    owed = world + spares
    me = _me(draft, type_key, 1)
    taken = {n.name for n in owed}
    beyond = [n for n in ordered if n.name not in taken]
    kept = _kept_for_gpu_jobs(draft, me, beyond, owed) if type_key == CPU_TYPE else set()
    rest = [n for n in beyond if n.name not in kept]
    candidates = {n.name for n in ordered}  # what the jobs ahead could have beside them
    others = [n for n in _unheld(draft) if n.name not in candidates]
    ahead = kept_for_ahead(me, draft.snap.waiting, type_key, rest, others, draft.settings)
    mine = [n for n in rest if n.name not in ahead]
    if type_key == CPU_TYPE:
        mine = _gpu_nodes_only_for_min(draft, mine, beyond, owed)
    return _Free(owed + mine), len(kept) + len(ahead)


def _gpu_nodes_only_for_min(
    draft: Draft, mine: list[NodeInfo], beyond: list[NodeInfo], owed: Sequence[NodeInfo]
) -> list[NodeInfo]:
    """Of a CPU phase's candidates (``mine``, in claim order, beside the ``owed`` ones; among
    ``beyond``, all it does not take whatever the line), those it may claim once the GPU
    nodes waiting GPU jobs want (whatever their place in line, as many as its refill leaves
    them: :func:`_kept_for_gpu_jobs`) are used only to make up ``nodes.min``: a CPU phase ahead of
    them takes what it needs beyond the other free nodes, but its spares and actives beyond
    ``min`` come from none of them, as its refill's never do. Before, it claimed them as
    spares (or actives up to ``max``) and its next pass, refilling, gave them back: a GPU job
    waiting for them was kept off them meanwhile, its claims racing the CPU phase's."""
    wanted = _kept_for_gpu_jobs(draft, None, beyond, owed)
    if not wanted:
        return mine
    pool = draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE)
    held = sum(1 for n in pool if has_type_labels(n, CPU_TYPE, draft.settings))
    plain = sum(1 for n in mine if n.name not in wanted)
    short = max(0, draft.phase.nodes.min - held - len(owed) - plain)
    taken = [n.name for n in mine if n.name in wanted][:short]
    return [n for n in mine if n.name not in wanted or n.name in taken]


def _kept_for_gpu_jobs(
    draft: Draft, me: Claimant | None, ordered: list[NodeInfo], taken: Sequence[NodeInfo] = ()
) -> set[str]:
    """The free GPU nodes among a CPU phase's candidates (``ordered`` nearest first) that
    GPU jobs ahead of ``me`` in line wait for (``None``: every waiting GPU job, whatever its
    place): per GPU type, as many as they want of it (each counted once: :func:`_gpu_wanted`,
    with the free nodes the phase takes whatever the line, ``taken``, not counted free), the
    farthest from this job's pool first. None when CPU phases may not hold GPU nodes."""
    if not draft.settings.cpu.allow_gpu_nodes:
        return set()
    wanted = _gpu_wanted(draft, me, ordered, taken)
    kept: set[str] = set()
    for gpu in draft.settings.gpu_types:
        want = wanted.get(gpu.value, 0)
        of_type = [n for n in ordered if has_type_labels(n, gpu.value, draft.settings)]
        kept.update(n.name for n in of_type[len(of_type) - min(want, len(of_type)) :])
    return kept


def _gpu_wanted(
    draft: Draft,
    me: Claimant | None,
    free: Sequence[NodeInfo] = (),
    taken: Sequence[NodeInfo] = (),
) -> dict[str, int]:
    """How many nodes of each GPU type the other jobs waiting in line want (those ahead of
    ``me``; ``None``: whatever their place), each counted once
    (:func:`phased.core.pools.counted_once`): one waiting for any of several types, whose
    need is published on each, wants nothing more of the others once free nodes of one that
    it could run on cover it (its ``gpusPerNode``, its workers' tolerations), else it counts
    where it is nearest to being covered. The free nodes are the unheld unmarked ones and
    ``free`` (candidates the CPU phase tolerates, or the spares it would give back), but for
    those ``taken``."""
    claimants = _waiting_gpu(draft, me)
    if not claimants:
        return {}
    names = {n.name for n in (*free, *taken)}
    idle = [*free, *(n for n in _unheld(draft) if n.name not in names and not marks(n))]
    return counted_once(claimants, idle, draft.settings)


def _waiting_gpu(draft: Draft, me: Claimant | None) -> list[Claimant]:
    """The other jobs waiting in line for something (ahead of ``me``; ``None``: all, but
    a running job short of spares only when it is ahead of this one: its spare need never
    holds back a job ahead of it)."""
    uid = draft.snap.job.uid
    own = _me(draft, CPU_TYPE, 1)
    return [
        c
        for c in draft.snap.waiting
        if c.uid != uid
        and (ahead_of(c, me or own) or (me is None and not c.spares))
        and any(c.wants.values())
    ]


def _gpu_spares_wanted(draft: Draft) -> list[NodeInfo]:
    """The GPU nodes a CPU phase allowed them holds as spares that waiting GPU jobs want
    beyond the free nodes of their type: per GPU type, as many as they want of it (each
    counted once: :func:`_gpu_wanted`, on the type where the free nodes and these spares
    that it could run on come nearest to covering it) less the free ones that a job counted
    there could run on, the farthest from the pool first. A
    spare runs no worker, so giving it back stops nothing; held, it is GPU-hours paid for CPU
    insurance while the GPU job waits for it (its place in line does not matter, as for the
    refill: :func:`_kept_for_gpu_jobs`)."""
    if not draft.settings.cpu.allow_gpu_nodes:
        return []
    spares = draft.held(NodeRole.SPARE)
    wanted = _gpu_wanted(draft, None, spares)
    if not wanted:
        return []
    claimants = _waiting_gpu(draft, None)
    unheld = [n for n in _unheld(draft) if not marks(n)]
    given: list[NodeInfo] = []
    for gpu in draft.settings.gpu_types:
        want = wanted.get(gpu.value, 0)
        if want <= 0:
            continue
        free = sum(
            1
            for n in unheld
            if any(
                c.wants.get(gpu.value, 0) > 0 and could_run_on(c, n, gpu.value, draft.settings)
                for c in claimants
            )
        )
        mine = [n for n in spares if has_type_labels(n, gpu.value, draft.settings)]
        ordered = farthest_first(mine, draft.held(NodeRole.ACTIVE))
        given += ordered[: max(0, want - free)]
    return given


def _claim_order(draft: Draft, free: list[NodeInfo]) -> list[NodeInfo]:
    """Free candidates in the order the job claims them: nearest its pool first (ties by
    name); for a CPU phase allowed GPU nodes (``cpu.allowGpuNodes``), every CPU-only node
    before any GPU node, nearest first within each — the GPU nodes are its fallback, since a
    GPU node running a CPU worker is GPU-hours paid for CPU work."""
    ordered = nearest_first(free, _anchors(draft, free))
    if not (draft.phase.is_cpu_only and draft.settings.cpu.allow_gpu_nodes):
        return ordered
    return sorted(ordered, key=lambda n: gpu_kind(n, draft.settings) is not None)


def _anchors(draft: Draft, free: list[NodeInfo]) -> Sequence[NodeInfo]:
    """What the pool grows around (see :func:`phased.core.pools.anchors_for`)."""
    held = draft.held(NodeRole.ACTIVE) or draft.held(NodeRole.SPARE)
    return anchors_for(held, free, draft.snap.job.uid)


def _claim(draft: Draft, node: NodeInfo, role: NodeRole, replaces: str | None = None) -> None:
    draft.act(
        ClaimNode(
            node=node.name,
            resource_version=node.resource_version,
            role=role,
            replaces=replaces,
            at=draft.now if replaces is not None else None,
        )
    )
    draft.roles[node.name] = role


def _release(draft: Draft, node: NodeInfo) -> None:
    draft.act(ReleaseNode(node=node.name))
    draft.roles.pop(node.name, None)


def _set_role(draft: Draft, node: NodeInfo, role: NodeRole) -> None:
    draft.act(SetNodeRole(node=node.name, role=role))
    draft.roles[node.name] = role


def release_misfits(draft: Draft, type_key: str) -> None:
    """Give back held nodes that could never serve the phase (module docstring); never one
    whose trouble failure handling judges (:func:`_failing`)."""
    gpus = draft.phase.gpus_per_node
    for node in draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE):
        if not fits(node, type_key, gpus, draft.settings) and not _failing(draft, node, type_key):
            _release_misfit(draft, node, type_key)


def _release_misfit(draft: Draft, node: NodeInfo, type_key: str) -> None:
    """Give back a misfit; one that served the running phase (:func:`_served`) was changed
    under the job — its type labels rewritten, all its GPUs there — and is said so with a
    Warning ``NodeTypeChanged``: before, a node the job had run on left the pool with no
    word at all. Not quarantined and no ledger entry: nothing failed, and its worker trained
    on until the generation ended for another reason (that cause is the restart's). A node
    that still fits the type the record names was not changed: the phase moved off that type
    (:func:`_moved_type`, said once by :func:`_record_type`), and it goes back unsaid."""
    ran_on = draft.record.gpu_type
    unchanged = ran_on is not None and fits(node, ran_on, draft.phase.gpus_per_node, draft.settings)
    if _served(draft, node) and not unchanged:
        draft.event(
            WARNING,
            "NodeTypeChanged",
            f"node {node.name} no longer fits phase {draft.phase.name} "
            f"({_wants(draft, type_key)}): {_type_now(draft, node)}, not by Phased; released "
            "from the pool, not quarantined (nothing failed), and the pool is made whole "
            "without it",
        )
    _release(draft, node)


def _wants(draft: Draft, type_key: str) -> str:
    if type_key == CPU_TYPE:
        return "CPU nodes"
    return f"{type_key}, {draft.phase.gpus_per_node} GPUs a node"


def _type_now(draft: Draft, node: NodeInfo) -> str:
    """What ``node``'s type labels say now, for people."""
    labelled = [
        gpu.value
        for gpu in draft.settings.gpu_types
        if has_type_labels(node, gpu.value, draft.settings)
    ]
    if labelled:
        return f"its GPU type labels now say {', '.join(labelled)}"
    kind = gpu_kind(node, draft.settings)
    if kind is None:
        return "it is no GPU node now"
    return "its labels now carry no configured GPU type's labels"


def _served(draft: Draft, node: NodeInfo) -> bool:
    """The phase has started (its shape cannot change any more) and the last pass held
    ``node`` for it as an active or spare node."""
    status = draft.snap.status
    return (
        draft.record.start_time is not None
        and status.phase == draft.phase.name
        and node.name in {*status.pool.active, *status.pool.spares}
    )


def _failing(draft: Draft, node: NodeInfo, type_key: str) -> bool:
    """``node`` does not fit the phase because it is failing, not because it could never
    serve it: the breaker holds it, or its GPUs dropped below ``gpusPerNode`` while it
    served the running phase (:func:`_dropped`). Failure handling judges it — quarantined
    once its grace runs out, held while the breaker holds — and it is never given back as
    a misfit: released, a broken node went back to the cluster unquarantined, with no
    ledger entry, and one the breaker held was said to have recovered."""
    held = {h.node for h in draft.snap.status.breaker.held} | draft.breaker_nodes
    return node.name in held or _dropped(draft, node, type_key)


def _dropped(draft: Draft, node: NodeInfo, type_key: str) -> bool:
    """The phase has started (its GPU shape cannot change any more), the last pass held
    ``node`` for it, and it allocates fewer of the phase's GPUs than ``gpusPerNode`` now: a
    GPU drop. Its capacity may have gone with them (a GPU fallen off the bus, the device
    plugin restarted with fewer devices), even the type labels GPU discovery writes; a node
    held for another phase (a boundary), or before the phase started (its shape may still
    be edited), is judged by what it is."""
    resource = gpu_resource(type_key, draft.settings)
    return (
        resource is not None
        and _served(draft, node)
        and node.allocatable.get(resource, 0) < draft.phase.gpus_per_node
    )


def _running_on(draft: Draft) -> set[str]:
    """Nodes on which a pod of the job runs or is still to run (not ended, not deleting)."""
    return {
        p.node_name
        for p in draft.snap.pods
        if p.node_name and not p.deleting and p.phase not in ENDED
    }


def release_cordoned(draft: Draft) -> None:
    """Give back the held nodes a person cordoned, or tainted with a NoSchedule or NoExecute
    taint the workers do not tolerate, on which no worker of the job runs.

    Phased cordons only the nodes it quarantines; a cordon on an active or spare node is a
    person's (``kubectl cordon``, ``kubectl drain``): no new pod may go there, so such a
    node could never take a worker. So is a taint someone else put there for good (a
    maintenance taint; not one the node controllers derive from its health, which failure
    handling judges: :func:`phased.core.tolerations.foreign_blocking`); a NoExecute one also
    evicts the worker that ran there. Once none of the job's workers runs on it (a cordon
    alone stops nothing that runs; a drain evicts it; a worker that failed there is first
    answered as a worker failure, by the next generation) it leaves the pool, still cordoned,
    and the pool is made whole from spares and free nodes as after any loss. A node in
    trouble (not Ready, or a suspect) is left to failure handling, so its failure is still
    recorded; nothing moves while the breaker holds failures.
    """
    if draft.breaker_nodes:
        return
    # A worker of the running generation (its newest attempt, ended or not: a failed one is
    # answered as a worker failure, not as a lost node) or any of the job's pods still
    # running there keeps the node.
    bound = {p.node_name for p in latest_attempts(live(generation_pods(draft)))}
    bound |= _running_on(draft)
    tolerations = draft.tolerations
    for node in draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE):
        if not node.ready or node.name in draft.suspect_nodes or node.name in bound:
            continue
        if node.unschedulable:
            _release(draft, node)
            draft.event(
                NORMAL,
                "CordonedNodeReleased",
                f"node {node.name} was cordoned, not by Phased, and runs no worker of the job: "
                "released from the pool (it stays cordoned; uncordoned, it is free again)",
            )
        elif taints := foreign_blocking(node, tolerations):
            _release(draft, node)
            named = ", ".join(f"{t.key}:{t.effect}" for t in taints)
            draft.event(
                NORMAL,
                "TaintedNodeReleased",
                f"node {node.name} carries {named}, not put there by Phased and not tolerated "
                "by the workers, and runs no worker of the job: released from the pool (the "
                "taint stays; once it is gone, the node is free again)",
            )


def form_pool(draft: Draft, type_key: str) -> None:
    """Size the pool for a phase whose generation is not running (module docstring)."""
    phase = draft.phase
    release_misfits(draft, type_key)
    held = draft.held(NodeRole.ACTIVE) + draft.held(NodeRole.SPARE)
    # Nothing a free node could change in a pool whole at its largest: no walk over the nodes.
    free, reserved = (_Free([]), 0) if _whole_at_max(draft) else _available(draft, type_key)
    # Free nodes beyond nodes.max and spares.count change nothing of the targets: found near
    # the pool, no more than that are looked for.
    enough = phase.nodes.max + draft.spec.spares.count - len(held)
    available = len(held) + free.count(draft, enough)
    if available < phase.nodes.min:
        # Gang admission: never sit on part of a pool, idle, while others could use it —
        # but give it back only once the need is published (:func:`_place_published`).
        _report_capacity(draft, type_key, available, reserved)
        if _place_published(draft):
            for node in held:
                _release(draft, node)
        elif held:
            draft.later(0)
        _surface_left_alone(draft, type_key, True)
        return
    world = (draft.status.world_size or phase.nodes.min) if _started(draft) else 0
    targets = Targets.for_available(phase, draft.spec.spares.count, available, world)
    _fit_actives(draft, targets, free)
    _fit_spares(draft, targets.spares, free)
    keep_troubled_out(draft)
    _admitted(draft)
    _record_type(draft, type_key)
    pool = len(draft.held(NodeRole.ACTIVE)) + len(draft.held(NodeRole.SPARE))
    _surface_left_alone(draft, type_key, pool < phase.nodes.max + draft.spec.spares.count)


def _whole_at_max(draft: Draft) -> bool:
    """The pool holds ``nodes.max`` actives and ``spares.count`` spares: re-formed, it needs
    no free node (the targets are those whatever the free nodes, and nothing is claimed), so
    :func:`form_pool` does not look for them. The gang restart after a failure the spares
    answered is such a pass; at 5,000 nodes the look was five sixths of its CPU (section 4l
    of bench/RESULTS.md)."""
    return (
        len(draft.held(NodeRole.ACTIVE)) == draft.phase.nodes.max
        and len(draft.held(NodeRole.SPARE)) == draft.spec.spares.count
    )


def _place_published(draft: Draft) -> bool:
    """The need this pass publishes in line (``waiting_for``, set by :func:`_report_capacity`)
    is already in the status as written, which is what the other jobs read the line from.

    A job that must give back the nodes it holds to wait (a boundary whose next phase it
    cannot have yet, a restart that cannot make up its pool) gives them back only then: the
    operator acts before it writes the status, so nodes released in the pass that first
    publishes the need came free while the status still said the job ran, and a job behind
    it, woken by them, took them from under it. So that pass keeps them and asks to be
    looked at again at once; the next, reading the need back, releases them. A need of
    nothing (it could never start as the cluster stands) blocks nobody: given back at once."""
    wanted = draft.status.waiting_for
    written = draft.snap.status.waiting_for
    return all(written.get(key, 0) >= count for key, count in wanted.items())


def _given_up_first(
    draft: Draft,
    nodes: list[NodeInfo],
    anchors: list[NodeInfo],
    in_place: frozenset[str] = frozenset(),
) -> list[NodeInfo]:
    """The order in which held nodes are given up when the pool shrinks: those in trouble
    within their grace (not Ready, suspect, held by the breaker) and spares a worker stalled
    on (:func:`~phased.core.recovery.stalled_nodes`) first, then — for a CPU
    phase allowed GPU nodes — its GPU nodes, then those not ``in_place`` (the spares
    already held, when the actives beyond a smaller pool could take their place: no role
    moves that need not), then the farthest from ``anchors``. The job keeps the nodes it
    can run on, and a CPU phase the nodes it pays CPU prices for."""
    troubled = draft.suspect_nodes | draft.breaker_nodes | stalled_nodes(draft).keys()
    order = farthest_first(nodes, anchors)
    gpu_first = draft.phase.is_cpu_only and draft.settings.cpu.allow_gpu_nodes
    return sorted(
        order,
        key=lambda n: (
            n.ready and n.name not in troubled,
            gpu_first and gpu_kind(n, draft.settings) is None,
            n.name in in_place,
        ),
    )


def _fit_actives(draft: Draft, targets: Targets, free: _Free) -> None:
    actives = draft.held(NodeRole.ACTIVE)
    beyond = _given_up_first(draft, actives, actives)[: max(0, len(actives) - targets.active)]
    if beyond:
        # The actives beyond the target and the spares held leave the pool together, as many
        # as the spares cannot keep, in one order: a spare in trouble goes before a healthy
        # active, which takes its place as a spare (the job keeps the nodes it can run on).
        kept = [n for n in actives if n not in beyond]
        spares = draft.held(NodeRole.SPARE)
        leave = max(0, len(beyond) + len(spares) - targets.spares)
        in_place = frozenset(n.name for n in spares)
        leaving = _given_up_first(draft, beyond + spares, kept, in_place)[:leave]
        for node in leaving:
            _release(draft, node)
        for node in beyond:
            if node not in leaving:
                _set_role(draft, node, NodeRole.SPARE)
    while len(draft.held(NodeRole.ACTIVE)) < targets.active and promotable(draft):
        # One under no suspicion first (nor one that refused a worker, nor one a condition
        # taint blocks): a spare in trouble promoted here would only trade places again
        # before the generation starts (keep_troubled_out). None that is leaving the pool
        # (cordoned, tainted, out of the selector: promotable).
        troubled = promoted_last(draft)
        spare = sorted(
            nearest_first(promotable(draft), draft.held(NodeRole.ACTIVE)),
            key=lambda n: n.name in troubled,
        )[0]
        # A node that failed while no generation ran (e.g. between a gang restart and the
        # next generation) is answered here: this promotion is its replacement.
        answered = mark_replaced(draft.ledger, None, spare.name, draft.now)
        draft.act(SetNodeRole(spare.name, NodeRole.ACTIVE, replaces=answered, at=draft.now))
        draft.roles[spare.name] = NodeRole.ACTIVE
        if answered is not None:
            draft.event(
                NORMAL,
                "SparePromoted",
                f"spare {spare.name} promoted to active, replacing {answered}",
            )
    need = targets.active - len(draft.held(NodeRole.ACTIVE))
    # Failures the spares did not answer are answered by the free nodes claimed now: each
    # claim names the lost node it replaces (oldest first); the ledger records it from the
    # node once the claim has landed (a claim another job wins replaces nothing).
    unanswered = iter([e.node for e in draft.ledger if e.replaced_by is None and e.resumed is None])
    for node in free.take(draft, need):
        _claim(draft, node, NodeRole.ACTIVE, replaces=next(unanswered, None))


def _fit_spares(draft: Draft, wanted: int, free: _Free) -> int:
    """Claim or release spares to reach ``wanted``; returns how many were claimed."""
    spares = draft.held(NodeRole.SPARE)
    actives = draft.held(NodeRole.ACTIVE)
    for node in _given_up_first(draft, spares, actives)[: max(0, len(spares) - wanted)]:
        _release(draft, node)
    need = wanted - len(draft.held(NodeRole.SPARE))
    picked = free.take(draft, need)
    for node in picked:
        _claim(draft, node, NodeRole.SPARE)
    return len(picked)


def _report_capacity(draft: Draft, type_key: str, could: int, reserved: int) -> None:
    """The phase cannot have its ``nodes.min`` now: say why, join the line, mind the timeout."""
    phase = draft.phase
    need = phase.nodes.min
    nodes, gpus = draft.nodes.values(), phase.gpus_per_node
    total = type_total(nodes, type_key, gpus, draft.settings, draft.tolerations)
    label = _label(type_key)
    if total < need:
        detail = f"the cluster has only {total} such nodes"
        tainted = type_total(nodes, type_key, gpus, draft.settings, None) - total
        if tainted:
            detail += f" ({tainted} more carry taints its workers do not tolerate)"
        # It could never start on this type as things stand: it blocks nobody for it, and
        # waits only for the others it accepts, if any (a started phase that may move).
        draft.set(waiting_for=_wanted_in_line(draft, type_key))
    else:
        detail = f"{could} could be claimed now" + (
            f" ({reserved} free ones are kept for jobs ahead in line)" if reserved else ""
        )
        draft.set(waiting_for=_wanted_in_line(draft, type_key))
    message = (
        f"need {need} {label} nodes for phase {phase.name} at once, {detail}; "
        "holding none until they can all be claimed"
    )
    draft.waiting = True
    said = find(draft.conditions, ConditionType.CAPACITY_SHORT)
    if said is not None and said.reason == MIN_ABOVE_CLUSTER:
        # Said while the phase still ran (:func:`_min_beyond_cluster`): the wait, and so
        # admission.waitTimeout, begins now, with its own event.
        draft.condition(ConditionType.CAPACITY_SHORT, False, "Enough", "")
    draft.condition(ConditionType.CAPACITY_SHORT, True, "NotEnoughNodes", message, WARNING)
    _wait_timeout(draft)


def _wanted_in_line(draft: Draft, type_key: str) -> dict[str, int]:
    """What a waiting phase publishes in line (``waiting_for``): its ``nodes.min`` of the type
    it waits for and of every other type it accepts, each that the cluster has that many
    nodes of (:func:`type_total`; none: it could never start as things stand, and blocks
    nobody). Nodes of any of them coming free are its as much as those of the type it names,
    so the jobs behind it keep them for it (counted once, on one type:
    :func:`phased.core.pools.counted_once`); published for the named type alone, a job behind
    it for another accepted type took such nodes whenever its pass happened to run first.
    This holds for a phase that has started too: re-forming, it moves to another type it
    accepts once its own cannot make ``nodes.min`` (:func:`_moved_type`), which is when it
    waits — before, it waited for its own type alone (for nothing when the cluster's healthy
    nodes of it were fewer than ``min``, after a mass failure), and a job behind it took the
    nodes it would have moved to."""
    need = draft.phase.nodes.min
    nodes, gpus = draft.nodes.values(), draft.phase.gpus_per_node
    return {
        key: need
        for key in [type_key, *(k for k in type_keys(draft.phase) if k != type_key)]
        if type_total(nodes, key, gpus, draft.settings, draft.tolerations) >= need
    }


def _wait_timeout(draft: Draft) -> None:
    """``admission.waitTimeout`` after the phase began to wait: condition and event, or fail."""
    admission = draft.spec.admission
    cond = find(draft.conditions, ConditionType.CAPACITY_SHORT)
    since = parse_time(cond.last_transition_time) if cond is not None else None
    limit = parse_duration(admission.wait_timeout)
    if since is None:
        return
    left = limit - (draft.now - since).total_seconds()
    if left > 0:
        draft.later(left)
        return
    message = (
        f"phase {draft.phase.name} has waited for its nodes since {format_time(since)}, "
        f"longer than admission.waitTimeout {admission.wait_timeout}"
    )
    if admission.on_timeout == AdmissionTimeoutAction.FAIL:
        fail(draft, "AdmissionTimedOut", message)
        return
    draft.condition(
        ConditionType.ADMISSION_TIMED_OUT, True, "WaitTimeout", message + "; still waiting", WARNING
    )


def _admitted(draft: Draft, short: str = "") -> None:
    """The phase has its pool: out of the line. ``short``: what a running phase's edit asks
    for that the cluster could never give (:func:`_min_beyond_cluster`), said as
    ``CapacityShort`` with one Warning event while the generation runs on."""
    draft.set(waiting_for={})
    if short:
        draft.condition(ConditionType.CAPACITY_SHORT, True, MIN_ABOVE_CLUSTER, short, WARNING)
    else:
        draft.condition(ConditionType.CAPACITY_SHORT, False, "Enough", "")
    draft.condition(ConditionType.ADMISSION_TIMED_OUT, False, "Admitted", "")


def release_changed_spares(draft: Draft, type_key: str) -> None:
    """Give back the spares no longer of the phase's type (their type labels rewritten, by a
    person or GPU discovery), with ``NodeTypeChanged`` for one that served the phase; never
    one whose trouble failure handling judges (:func:`_failing`), nor while the breaker
    holds failures (nothing moves then). Called before the running generation is kept
    whole, so that no such spare is promoted for a failure seen in the same pass: promoted,
    it was released as a misfit when the pool was formed again, and the ledger named it as
    the failed node's replacement."""
    if draft.breaker_nodes:
        return
    for node in draft.held(NodeRole.SPARE):
        misfit = not has_type_labels(node, type_key, draft.settings)
        if misfit and not _failing(draft, node, type_key):
            _release_misfit(draft, node, type_key)


def refill_spares(draft: Draft, type_key: str) -> None:
    """While a generation runs: spares back up to ``spares.count``, none beyond the cap.

    A running job refills from any free matching node: jobs waiting in line do not hold
    back the spares that keep a running one whole — but a job ahead of it that the free
    nodes would admit now is left its need (:func:`_left_by_jobs_starting`). A CPU phase
    allowed GPU nodes takes none a waiting GPU job wants, though, whatever its place in line
    (:func:`_kept_for_gpu_jobs`):
    a GPU node idle as a CPU job's spare is GPU-hours paid for nothing while that job waits.

    The spares still missing after it are published (``spares_wanted``): the job's place in
    line for them, read by the jobs behind (cleared by any pass that does not get here:
    :meth:`phased.core.draft.Draft.for_snapshot`)."""
    release_changed_spares(draft, type_key)
    if type_key == CPU_TYPE:
        for node in _gpu_spares_wanted(draft):
            _release(draft, node)
    wanted = draft.spec.spares.count
    short = wanted - len(draft.held(NodeRole.SPARE))
    free = _Free([])
    if short > 0 and not draft.snap.waiting and type_key != CPU_TYPE:
        free = _Free.near(draft, type_key)  # no job in line: nothing is kept from it
    elif short > 0:
        listed = free_matching(
            _unheld(draft), type_key, draft.phase.gpus_per_node, draft.settings, draft.tolerations
        )
        if type_key == CPU_TYPE:
            kept = _kept_for_gpu_jobs(draft, None, _claim_order(draft, listed))
            listed = [n for n in listed if n.name not in kept]
        free = _Free(_left_by_jobs_starting(draft, type_key, listed))
    # Actives beyond nodes.max are a resize still to come (it waits while the breaker holds
    # failures, or for a finishing generation's boundary): it sorts actives from spares, and
    # the spares are kept for it meanwhile.
    actives = min(len(draft.held(NodeRole.ACTIVE)), draft.phase.nodes.max)
    room = draft.phase.nodes.max + wanted - actives
    target = max(0, min(wanted, room))
    claimed = _fit_spares(draft, target, free)
    missing = target - len(draft.held(NodeRole.SPARE))
    # Its place in line for the spares it is still short of: the jobs behind it keep free
    # nodes for them (it is no waiting job: state, conditions and waitingFor stay as they are).
    draft.set(spares_wanted={type_key: missing} if missing > 0 else {})
    if claimed:
        draft.event(
            NORMAL,
            "SparesRefilled",
            f"claimed {claimed} spare node(s); {len(draft.held(NodeRole.SPARE))} of {wanted} held",
        )
    if len(draft.held(NodeRole.SPARE)) >= wanted > 0:
        draft.condition(ConditionType.SPARES_EXHAUSTED, False, "SparesHeld", "")
    _surface_left_alone(draft, type_key, len(draft.held(NodeRole.SPARE)) < wanted)
    _admitted(draft, _min_beyond_cluster(draft, type_key))


def _left_by_jobs_starting(
    draft: Draft, type_key: str, free: list[NodeInfo], taken: Sequence[NodeInfo] = ()
) -> list[NodeInfo]:
    """Of the free nodes a running generation may refill its spares from (or a restart take
    its spares from, beside the ``taken`` nodes that make up its world), those the waiting
    jobs ahead of it that the free nodes would admit now (:func:`phased.core.pools.
    starting_now`) leave it: each keeps the rest of its need among them, beyond the other
    free nodes it could take, the farthest from this job's pool first
    (:func:`phased.core.pools.kept_for_ahead`). A job ahead they do not cover keeps nothing
    from the spares: those nodes would only sit idle. Before, whichever pass ran first won,
    and a job admitted with fewer spares than it asks for because the line kept the rest
    took them at its next pass, or at its next restart, from under the job ahead."""
    gone = {n.name for n in taken}
    unheld = [n for n in _unheld(draft) if n.name not in gone]
    # A refill: a running CPU phase short of spares ahead keeps its GPU nodes from it.
    me = replace(_me(draft, type_key, 1), spares=True)
    starting = starting_now(me, draft.snap.waiting, unheld, draft.settings)
    if not starting:
        return free
    ordered = _claim_order(draft, free)
    names = {n.name for n in ordered}
    others = [n for n in unheld if n.name not in names]
    kept = kept_for_ahead(me, starting, type_key, ordered, others, draft.settings)
    return [n for n in ordered if n.name not in kept]


MIN_ABOVE_CLUSTER = "MinAboveCluster"  # CapacityShort's reason while the phase still runs


def _min_beyond_cluster(draft: Draft, type_key: str) -> str:
    """What to say of a running phase whose ``nodes.min`` was edited beyond every node of its
    type the cluster has (as the line counts them, :func:`phased.core.pools.type_total`), or
    "" when the next generation could still have it. The running generation goes on; but
    its next restart could never form the pool, so it would give the pool up and wait in
    line for capacity that does not exist — a 100-day run lost to a typo at its first
    failure, with nothing said until then."""
    phase, world = draft.phase, draft.status.world_size
    if phase.nodes.min <= world:
        return ""
    nodes, gpus = draft.nodes.values(), phase.gpus_per_node
    total = type_total(nodes, type_key, gpus, draft.settings, draft.tolerations)
    if phase.nodes.min <= total:
        return ""
    return (
        f"nodes.min {phase.nodes.min} of phase {phase.name} is more than the {total} "
        f"{_label(type_key)} nodes the cluster has: the running generation goes on at {world}, "
        "but at its next restart the pool could not be formed and would be given up to wait "
        "for capacity; lower nodes.min or add nodes"
    )


def start_generation(draft: Draft, type_key: str) -> bool:
    """Create the phase's workers when the pool is ready; True when they were created."""
    actives = draft.held(NodeRole.ACTIVE)
    if draft.waiting or draft.claiming_active() or draft.breaker_nodes:
        return False
    if len(actives) < draft.phase.nodes.min or not all(n.ready for n in actives):
        return False
    stopping = stopping_until(draft)
    if stopping is not None and stopping > draft.now:
        draft.later(seconds_between(draft.now, stopping))  # their leaving wakes it sooner
        return False
    if not draft.snap.service_exists:
        draft.act(EnsureService(manifest=service_manifest(draft.snap.job)))
    world = len(actives)
    gen = next_generation(draft)
    draft.set(restart_generation=gen, created_generation=gen)
    resource = gpu_resource(type_key, draft.settings)
    options = checkpoints.worker_options(draft)
    checkpoints.answered(draft, gen, gang=True)
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
            installation=draft.settings.installation,
            legacy_nodes=draft.legacy_active(),
            restarts=draft.status.restarts,
            worker_restarts=draft.status.worker_restarts,
            **options,
        )
        draft.act(CreatePod(manifest=worker.manifest()))
    draft.set(world_size=world)
    if draft.record.start_time is None:
        _record_start(draft, type_key, draft.now)
        gpu_nodes = sum(1 for n in actives if gpu_kind(n, draft.settings) is not None)
        on = f"{world} {_label(type_key)} nodes"
        if type_key == CPU_TYPE and gpu_nodes:  # only with cpu.allowGpuNodes
            on = f"{world} nodes ({gpu_nodes} of them GPU nodes, billed as such)"
        draft.event(NORMAL, "PhaseStarted", f"phase {draft.phase.name} started on {on}")
    return True


def _record_start(draft: Draft, type_key: str, start: datetime) -> None:
    draft.update_record(
        start_time=format_time(start), gpu_type=type_key or None, state=PhaseState.RUNNING
    )
    _record_place(draft)
    _record_shape(draft)


def _record_place(draft: Draft) -> None:
    """Where the phase's checkpoints are, into its record: where its workers keep them (their
    pods, :func:`phased.core.storage.made_place`), else where the spec puts them (a start
    whose workers are being created in this pass). The workers are the witness when the
    status write that recorded the start was lost, or an older operator wrote a record
    without the place: an edit moving it meanwhile is not recorded as the place they use."""
    ours = checkpoint_place(draft.snap.job, draft.spec)
    made = made_place(draft.snap.job, draft.spec, draft.phase_pods())
    claim, path = made if made is not None else ours
    # A pod does not say whether its claim is one Phased created: the spec's word when it
    # names the claim the workers mount, else unknown (None: the name alone is judged).
    created = claim_created(draft.spec) if claim and claim == ours[0] else None
    draft.update_record(
        checkpoint_claim=claim, checkpoint_path=path, checkpoint_claim_created=created
    )


def _record_shape(draft: Draft) -> None:
    """The GPU shape the phase runs with, into its record: what its workers were made with
    (their labels, :func:`phased.core.podlabels.made_shape`), else the spec's. The workers
    are the witness when the status write that recorded the start was lost: an edit of the
    shape the CRD let through meanwhile is not recorded as the shape they run with (the edit
    re-check holds such a job; this keeps the record true whatever passes it)."""
    made = made_shape(draft.phase_pods())
    if made is None:
        made = Shape(draft.phase.gpus_per_node, tuple(t.value for t in draft.phase.gpu_types))
    draft.update_record(gpus_per_node=made.gpus_per_node, gpu_types=list(made.gpu_types))


def recover_phase_start(draft: Draft, type_key: str) -> None:
    """A phase whose workers exist but whose record has no start: the status write that
    recorded it was lost. The start is the creation of the phase's first worker, so the
    record, ``maxDuration`` and the timeline keep the time the phase really began, and the
    shape is the one its workers were made with (:func:`_record_shape`). A started phase whose
    live generation runs on another type than the record names has the record name it
    (:func:`_running_type`)."""
    if draft.record.start_time is not None:
        _recover_record(draft)
        if live(generation_pods(draft)):
            _record_type(draft, type_key)  # the write naming it was lost (_running_type)
        return
    created = [p.created for p in draft.phase_pods() if p.created is not None]
    if created:
        _record_start(draft, type_key, min(created))


def _recover_record(draft: Draft) -> None:
    """A record written by an older operator names only the chosen ``gpuType``: it learns
    the shape the phase runs with from its workers' labels, or else from the spec (found
    valid by the edit re-check, which keeps the chosen type among ``gpuTypes``), and where
    its checkpoints are from its workers' pods (only from them: with no workers the spec
    could name a place moved meanwhile), and whether its claim is one Phased creates from
    the spec that names that claim, so that the re-check (and, for the shape, the CRD's
    rules) judges later edits against the record."""
    record = draft.record
    if record.gpus_per_node is None or record.gpu_types is None:
        _record_shape(draft)
    if record.checkpoint_path is None and made_place(
        draft.snap.job, draft.spec, draft.phase_pods()
    ):
        _record_place(draft)
    elif (
        record.checkpoint_claim_created is None
        and record.checkpoint_claim
        and record.checkpoint_claim == checkpoint_place(draft.snap.job, draft.spec)[0]
    ):
        # A record from before the kind was recorded: the spec's (it names the same claim,
        # and the CRD's rule judges a switch of kind against the spec as it was).
        draft.update_record(checkpoint_claim_created=claim_created(draft.spec))


def _give_back_surplus(draft: Draft) -> None:
    """While the breaker holds: nodes beyond what the job can use go back all the same —
    beyond ``max + spares.count``, or beyond the running generation's world and the spares
    while it runs (a ``nodes.max`` lowered meanwhile waits, as the restart that would apply
    it does) — spares first, the farthest first, but never one the breaker holds nor one a
    worker of the job still runs on (a phase boundary to a smaller phase meanwhile)."""
    running = _running_on(draft)
    world = len([p for p in live(generation_pods(draft)) if p.phase not in ENDED])
    surplus = (
        len(draft.held(NodeRole.ACTIVE))
        + len(draft.held(NodeRole.SPARE))
        - max(draft.phase.nodes.max, world)
        - draft.spec.spares.count
    )
    actives = draft.held(NodeRole.ACTIVE)
    for role in (NodeRole.SPARE, NodeRole.ACTIVE):
        free = [
            n
            for n in draft.held(role)
            if n.name not in draft.breaker_nodes and n.name not in running
        ]
        for node in farthest_first(free, actives)[: max(0, surplus)]:
            _release(draft, node)
            surplus -= 1


def size_and_start(draft: Draft, type_key: str) -> None:
    """Form the pool and start workers, or keep the spares of a running generation."""
    if draft.status.state in (JobState.SUCCEEDED, JobState.FAILED):
        return
    retaint_actives(draft)
    rename_held(draft)
    if draft.breaker_nodes:
        # Automatic action is paused while the breaker holds: the pool stays as it is, and
        # what it holds keeps its place (never released, swapped or refilled around).
        _give_back_surplus(draft)
        return
    if live(generation_pods(draft)):
        refill_spares(draft, type_key)
        if not draft.snap.service_exists:
            draft.act(EnsureService(manifest=service_manifest(draft.snap.job)))
    else:
        if draft.record.gpu_type == type_key:  # judged again: this pass's failures are out
            type_key = _moved_type(draft, type_key) or type_key
        form_pool(draft, type_key)
        start_generation(draft, type_key)
    retaint_spares(draft)


def _write_role_again(draft: Draft, node: NodeInfo, role: NodeRole) -> None:
    """Write a held node's unchanged role again, which writes every mark of it (labels and
    taint) and nothing else; an active node keeps the note of the node it replaces."""
    note = decode_replaces(node.annotations.get(ANNOTATION_REPLACES))
    if note is None or role != NodeRole.ACTIVE:
        draft.act(SetNodeRole(node=node.name, role=role))
        return
    draft.act(SetNodeRole(node.name, role, replaces=note.node, at=note.at, troubled=note.troubled))


def retaint_actives(draft: Draft) -> None:
    """Held active nodes carry the pool taint, which keeps every other workload off them.
    One that someone else took it from (``kubectl taint nodes n phased.dev/pool-``, a tool
    that strips taints) is still the job's — its labels say whose it is, the taint only keeps
    others off — but others' pods could be scheduled there, and between two generations take
    the GPUs the next worker needs. The role is written again, which writes the taint and
    nothing else (the role is unchanged: no clearing mark; the note of the failed node a
    promoted spare replaces is written as it stands), and said with a ``PoolTaintRestored``
    Warning. Also while the breaker holds: it moves nothing. A pass whose view has not yet
    delivered the write writes it again (no change on the node) and says it again (the
    reconciler posts that at most every 10 minutes)."""
    touched = {a.node for a in draft.actions if isinstance(a, ClaimNode | SetNodeRole)}
    restored: list[str] = []
    for node in draft.held(NodeRole.ACTIVE):
        keys = {t.key for t in node.taints}
        if node.name in touched or (TAINT_POOL in keys and TAINT_SPARE not in keys):
            continue
        _write_role_again(draft, node, NodeRole.ACTIVE)
        restored.append(node.name)
    if restored:
        draft.event(
            WARNING,
            "PoolTaintRestored",
            f"active node(s) {', '.join(restored)} of phase {draft.phase.name} had lost the "
            f"{TAINT_POOL} taint, not by Phased: it keeps other workloads off the job's nodes "
            "and is written again (to take a node from the job, kubectl cordon or drain it)",
        )


def rename_held(draft: Draft) -> None:
    """Held active and spare nodes carry the job's name labels (``phased.dev/job``,
    ``phased.dev/job-namespace``) and this installation's ``phased.dev/installation`` label
    as a claim wrote them. A node someone took them from or rewrote them on is still the
    job's — its ``job-uid`` label, with the taints agreeing (and, without the installation
    label, the claim's ``claimed-at``), says whose it is — but everything that reads a node
    without the job at hand went wrong on it: it counted as partially marked or as
    ``NoInstallation`` (``phased_nodes_left_alone``, other jobs' ``NodesLeftAlone``),
    ``phased release-node`` named its job "?/?", the watch of the installation's nodes lost it,
    and once the job was gone without letting go (its finalizer removed by hand) the orphan
    release, which finds the job by the name labels and gives back only nodes carrying this
    installation's label, never gave it back. The role is written again, which writes the
    labels (the role unchanged: no clearing mark; a promoted spare's note as it stands), and
    a ``NodeLabelsRestored`` Warning names the nodes. A node of a pool claimed by a Phased
    from before installations lacks the installation label the same way and gets it the
    same way, at the first pass. Also while the breaker holds: it moves nothing."""
    job = draft.snap.job
    installation = draft.settings.installation
    touched = {a.node for a in draft.actions if isinstance(a, ClaimNode | SetNodeRole)}
    restored: list[str] = []
    for role in (NodeRole.ACTIVE, NodeRole.SPARE):
        for node in draft.held(role):
            named = (
                node.labels.get(LABEL_JOB) == job.name[:63]
                and node.labels.get(LABEL_JOB_NAMESPACE) == job.namespace
                and node.labels.get(LABEL_INSTALLATION) == installation
            )
            if named or node.name in touched:
                continue
            _write_role_again(draft, node, role)
            restored.append(node.name)
    if restored:
        draft.event(
            WARNING,
            "NodeLabelsRestored",
            f"node(s) {', '.join(restored)} held by the job had lost or changed the "
            f"{LABEL_JOB} / {LABEL_JOB_NAMESPACE} / {LABEL_INSTALLATION} labels, not by "
            "Phased (or were claimed by a Phased from before installations): they are "
            "written again (to take a node from the job, kubectl cordon or drain it)",
        )


def retaint_spares(draft: Draft) -> None:
    """Held spares carry the taint ``spares.whileIdle`` asks for now: the spare taint when
    Preemptible (others may borrow them), the pool taint when Reserved. An edit of the policy
    reaches the spares already held, not only those claimed later (the role written again
    writes the taint; a spare returned from quarantine is given its taint the same way).

    ``SpareTaintsChanged`` is said when a pass rewrites spares for another policy than the
    one the last rewrite was for — ``status.pool.sparesWhileIdle``, which every rewrite
    records (:func:`_first_at_the_spares`): once per policy value reached, whatever the
    generation says. A later pass that still sees the old taint (the node watch has not
    delivered the write yet) writes the role again, which changes nothing on the node, and
    says nothing; an edit reverted while the view lags says it when the spares are written
    back. A status that records no value (written before it was kept) takes the policy the
    held spares agree with, unsaid."""
    policy = draft.spec.spares.while_idle
    borrowable = policy == SpareIdlePolicy.PREEMPTIBLE
    touched = {a.node for a in draft.actions if isinstance(a, ClaimNode | SetNodeRole)}
    held = draft.held(NodeRole.SPARE)
    moved: list[str] = []
    for node in held:
        if node.name in touched:
            continue
        keys = {t.key for t in node.taints}
        if (TAINT_SPARE in keys, TAINT_POOL in keys) != (borrowable, not borrowable):
            _set_role(draft, node, NodeRole.SPARE)
            moved.append(node.name)
    if moved and _first_at_the_spares(draft):
        draft.event(
            NORMAL,
            "SpareTaintsChanged",
            f"spares.whileIdle is {policy.value}: spare(s) "
            f"{', '.join(moved)} now "
            + (
                "carry the spare taint, which others may tolerate to borrow them"
                if borrowable
                else "carry the pool taint, which keeps every other workload off"
            ),
        )
    if moved or (held and draft.status.pool.spares_while_idle is None):
        draft.set(pool=draft.status.pool.model_copy(update={"spares_while_idle": policy}))


def _first_at_the_spares(draft: Draft) -> bool:
    """This pass's rewrite is the first for the policy as it is: the status it starts from —
    what the cluster says, so an operator restarted meanwhile judges the same — records the
    spares rewritten for another policy last, or none. Not the generation: a spec held
    invalid is observed (``observedGeneration``) without its policy reaching the spares, and
    an edit reverted while the view lagged rewrote them with none."""
    return draft.snap.status.pool.spares_while_idle != draft.spec.spares.while_idle
