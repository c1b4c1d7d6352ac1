"""Observe → decide → act, for one TrainingJob at a time.

Every trigger — a job, node or pod event, a timer, a relist — ends in :meth:`Reconciler.trigger`
for the jobs it concerns. Triggers for one job coalesce: a job is reconciled by at most one
task at a time, and an event that arrives meanwhile runs it once more afterwards. One pass:

1. observe: the job as kopf's watch and our own status writes left it, its pods from the
   :class:`~phased.kube.podindex.PodIndex` (or, for some passes, the job by a GET and its
   pods by a LIST on the job-uid label, at once: :meth:`Reconciler._reads_afresh`), every
   Node from the in-memory :class:`~phased.kube.nodeview.NodeView`, and the pods on the few
   nodes whose pods matter now (the job's nodes being cleared of guests, but for a spare it
   promoted and found clear a moment ago; nodes recently found occupied);
2. decide: :func:`phased.core.decide.decide`, pure. Every node the plan would claim is then
   looked at (a LIST of its pods, by ``spec.nodeName``): if pods of others run there, the
   plan is decided again with that knowledge, so a claim is never made on an occupied node
   — or, for a plan that acts before it claims (a failure's answer and its refill), the
   look goes beside those first actions and an occupied node stops the plan before its
   claim, the job decided again at once;
3. act: perform the plan's actions in batches through the kube layer (:func:`batches`;
   a batch's pod deletions are not awaited by the node changes after them, only by
   anything else and by the end of the pass), then write the status once. If an action
   fails the status is not written: the next pass starts again from the cluster's truth
   and the old status, so nothing is recorded that did not happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import (
    JobState,
    NodeRole,
    RestartScope,
    SpareIdlePolicy,
    TrainingJobSpec,
    TrainingJobStatus,
    parse_spec,
    read_status,
)
from phased.core import labels, refusals, reports
from phased.core.decide import decide
from phased.core.ledger import encode_replaces
from phased.core.model import (
    Action,
    Claimant,
    ClaimNode,
    CreatePod,
    DeletePod,
    EmitEvent,
    EnsureClaim,
    EnsureSecret,
    EnsureService,
    EvictPod,
    FinishClearing,
    JobRef,
    NodeInfo,
    NodePod,
    NodeSet,
    Plan,
    PodInfo,
    PodPhase,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
    Snapshot,
    StartClearing,
    UnquarantineNode,
)
from phased.core.occupancy import (
    LOOK_AGAIN_SECONDS,
    blocking,
    displaceable,
    guests,
    leaving,
)
from phased.core.ownership import Kind, LeftAlone, holds, ownership
from phased.core.podlabels import label_int, made_by_job
from phased.core.pools import CPU_TYPE, LineShape, has_type_labels, waiting_shape
from phased.core.quarantine import QuarantineNote, encode_quarantine
from phased.core.settings import Settings
from phased.kube.client import ON_BEHALF, Invalid, KubeClient, KubeError, NotFound
from phased.kube.convert import job_ref_from_raw, node_from_raw, node_pod_from_raw, pod_from_raw
from phased.kube.events import EventVerbs
from phased.kube.jobs import JobVerbs
from phased.kube.listwatch import Watches
from phased.kube.nodes import NodeVerbs, list_nodes
from phased.kube.nodeview import Listed, NodeViews
from phased.kube.nodewatch import NodeWatch, NodeWatches, watched_selectors
from phased.kube.podindex import Indexed, PodIndex
from phased.kube.pods import Eviction, PodVerbs
from phased.kube.podwatch import PodWatch, list_pods
from phased.metrics import Metrics

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime]
_VOLATILE_PHASE_KEYS = (
    "gpuHours",
    "activeGpuHours",
    "spareGpuHours",
    "busyGpuHours",
    "cost",
    "waitingSeconds",
)
# Events decide repeats on every pass while a situation lasts: posted once per this many
# seconds for the same job, reason and message.
# What the workers need in the job's namespace (the workers, their Service, the report
# Secret, the checkpoint claim), refused by what guards the namespace (403: a ResourceQuota,
# Pod Security Admission, RBAC; 400: an admission webhook's denial), not by the spec (422).
_IN_NAMESPACE = (CreatePod, EnsureService, EnsureSecret, EnsureClaim)
_REFUSED = frozenset({400, 403})


class _Refused(Exception):
    def __init__(self, error: KubeError) -> None:
        super().__init__(str(error))
        self.error = error


_REPEATING = frozenset(
    {
        "NodesLeftAlone",
        "GuestsEvicted",
        "GuestsLeftAlone",
        "GuestsDeleted",
        "PoolTaintRestored",
        "NodeLabelsRestored",
    }
)
_REPEAT_EVERY = 600.0
# Events posted and not yet answered; one recorded beyond this is dropped (and logged): an
# API server that stops answering must not make the operator hold its events without end.
_EVENTS_IN_FLIGHT = 1000
# The pod lists of nodes a pass looks at (being cleared, about to be claimed) in flight at
# once: one after another, a pass that looked at three nodes waited three round trips.
_LISTS_AT_ONCE = 16
_REDECIDES = 3  # decide again at most this often in one pass when candidates are occupied
_LOOKED_FRESH = 5.0  # seconds a candidate's pod list stands in for a new one at claim time
# Seconds a periodic relist's page waits at most for the passes woken by a change
# (:meth:`Reconciler.quiet`): at 5,000 nodes a relist is 10 pages, so it takes at most this
# much longer per page, however busy the jobs are.
_QUIET_AT_MOST = 1.0
# Seconds a promoted node's pod list, taken once its promotion (and clearing mark) landed and
# finding no pod but the job's, stands in for the next passes' look at it.
_PROMOTED_CLEAR_FRESH = 1.0


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_spec_error(exc: ValidationError) -> str:
    """A pydantic error in the API's words: ``spec.phases[1].nodes: <message>``."""
    parts = []
    for err in exc.errors()[:5]:
        path = "spec"
        for loc in err["loc"]:
            path += f"[{loc}]" if isinstance(loc, int) else f".{loc}"
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{path}: {message}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _resource_version(raw: dict[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion", ""))


def _older(rv: str, than: str) -> bool:
    """``rv`` is a version before ``than``. Resource versions are opaque to clients; the API
    server's are etcd revisions, which grow. Anything else is taken as not older."""
    try:
        return int(rv) < int(than)
    except ValueError:
        return False


@dataclass
class JobEntry:
    """What the operator remembers about a job between passes (all of it rebuildable)."""

    ref: JobRef
    raw: dict[str, Any]
    spec: TrainingJobSpec | None = None
    spec_error: str | None = None
    spec_generation: int = -1
    last_status_write: float = 0.0
    own_resource_version: str = ""
    # While a status write is on its way: the versions watch events brought meanwhile, judged
    # once its answer names the version it wrote (:meth:`Reconciler._write_status`).
    writing_status: bool = False
    unsettled: list[str] = field(default_factory=list)
    service_ok: bool = False
    report_secret_ok: bool = False
    claim_ok: bool = False
    report_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.TimerHandle | None = None
    timer_due: float = 0.0
    rejected: tuple[int, str] | None = None  # (generation, why the API refused a worker)
    failed_passes: int = 0  # consecutive passes stopped by an error (for the backoff)
    lost_claims: int = 0  # consecutive claims lost to a stale view (for the backoff)
    claim_refused: bool = False  # in this pass, a claim did not happen as decided
    # The next pass reads the job and its pods from the API (the resync asked for a look, or
    # a read found the job gone or the version held out of date: Reconciler._reads_afresh).
    afresh_due: bool = False
    # The shape of the phase it waits to start, as the other jobs' line reads it, and the
    # (generation, phase index) it was read for.
    line_shape: tuple[tuple[int, int], LineShape | None] | None = None

    def look_planned(self, now: float) -> bool:
        """A look is still to come (a fired TimerHandle is not "cancelled": check its due
        time too)."""
        return self.timer is not None and not self.timer.cancelled() and self.timer_due > now


@dataclass
class _Queue:
    pending: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    dirty: set[str] = field(default_factory=set)


class PassSlots:
    """At most ``n`` reconcile passes at once; a job woken by a change goes before one woken
    by the periodic resync.

    Every resync wakes every job at the same moment: with a plain FIFO semaphore, a job whose
    node just failed queued behind all of them (seconds at hundreds of jobs) before its swap
    was even decided. Waiters are taken urgent first, then in arrival order; a routine waiter
    woken again by a change is promoted (:meth:`promote`). A slot freed while others
    wait passes straight to the next waiter, so no newcomer overtakes them."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._seq = itertools.count()
        # uid -> [urgent, arrival, future]; small (one per job at most), so release scans it.
        self._waiting: dict[str, list[Any]] = {}

    def waiting(self) -> int:
        return len(self._waiting)

    def promote(self, uid: str) -> None:
        """``uid``'s routine waiter, if any, is urgent from now on, in the order of the change
        that woke it (behind the urgent ones already waiting)."""
        waiter = self._waiting.get(uid)
        if waiter is not None and not waiter[0]:
            waiter[0], waiter[1] = True, next(self._seq)

    async def acquire(self, uid: str, urgent: bool) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[uid] = [urgent, next(self._seq), future]
        try:
            await future
        except asyncio.CancelledError:
            if self._waiting.get(uid, [None, None, None])[2] is future:
                del self._waiting[uid]
            if future.done() and not future.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            raise

    def release(self) -> None:
        if not self._waiting:
            self._free += 1
            return
        uid = min(self._waiting, key=lambda u: (not self._waiting[u][0], self._waiting[u][1]))
        _, _, future = self._waiting.pop(uid)
        future.set_result(None)


class Reconciler:
    def __init__(
        self,
        kube: KubeClient,
        settings: Settings,
        metrics: Metrics | None = None,
        *,
        clock: Clock = utcnow,
        concurrency: int = 8,
        report_key: bytes | None = None,
        operator_pod: tuple[str, str] | None = None,
        namespaces: Sequence[str] = (),
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.operator_pod = operator_pod  # (namespace, name): never displaced
        # Nodes are watched here, not through kopf: heartbeats are dropped before anything
        # is copied or converted (kube/nodewatch.py). With a nodeSelector, a second watch
        # keeps the nodes this installation marked in sight whatever the selector.
        self.nodes = NodeViews(watched_selectors(settings.node_selector, settings.installation))
        self.node_watch = NodeWatches(
            [
                NodeWatch(
                    kube,
                    view,
                    selector,
                    on_list=functools.partial(self.nodes_listed, source=source),
                    on_event=functools.partial(self.node_event, source=source),
                    on_alive=self._seen,
                )
                for source, (selector, view) in enumerate(
                    zip(self.nodes.selectors, self.nodes.views, strict=True)
                )
            ]
        )
        self.node_verbs = NodeVerbs(
            kube, settings.installation, on_seen=self._node_seen, known=self.nodes.get
        )
        # The jobs' worker pods, watched here too (kube/podwatch.py): in every namespace, or
        # in each of those the operator is limited to. A pass reads its job's pods from the
        # index rather than by a LIST (:meth:`reconcile`).
        self._pod_namespaces = list(dict.fromkeys(namespaces)) or [""]  # "": every one
        self.pods = PodIndex()
        self.pods.expect(self._pod_namespaces)
        self.pod_watch = Watches(
            [
                PodWatch(kube, namespace, on_list=self.pods_listed, on_event=self.pod_event)
                for namespace in self._pod_namespaces
            ]
        )
        self.pod_verbs = PodVerbs(kube)
        self.job_verbs = JobVerbs(kube)
        self.event_verbs = EventVerbs(kube)
        self.jobs: dict[str, JobEntry] = {}
        self.jobs_synced = False
        self._queue = _Queue()
        self._slots = PassSlots(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._resync = parse_duration(settings.resync_interval)
        # Pods seen on nodes found occupied: (monotonic time, pods). Kept for a resync
        # interval (LOOK_AGAIN_SECONDS when all were being deleted), so decide does not pick
        # them again at once; then looked at afresh.
        self.occupied: dict[str, tuple[float, tuple[NodePod, ...]]] = {}
        self._posted: dict[tuple[str, str, str], float] = {}
        self._posting: set[asyncio.Task[None]] = set()  # events on their way (:meth:`_record`)
        # Pods listed on a claim candidate just before the plan was acted on: (time, pods).
        self._looked: dict[str, tuple[float, tuple[NodePod, ...]]] = {}
        # Pods listed on a node once its promotion landed, found clear: (time, pods), by
        # (job UID, node).
        self._promoted_clear: dict[tuple[str, str], tuple[float, tuple[NodePod, ...]]] = {}
        self.passes = 0
        self.last_pass_at = time.monotonic()
        # Jobs woken by a change (not the resync) whose passes have not ended yet, and the
        # moment there are none: a periodic relist asks for its pages then (:meth:`quiet`).
        self._woken: set[str] = set()
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._closing = False
        self.report_key = report_key

    # -- triggers -----------------------------------------------------------------------------

    def _seen(self) -> None:
        if self.metrics is not None:
            self.metrics.event_seen(time.time())

    def job_event(self, event_type: str | None, raw: dict[str, Any]) -> None:
        self._seen()
        ref = job_ref_from_raw(raw)
        if not ref.uid:
            return
        if event_type == "DELETED":
            entry = self.jobs.pop(ref.uid, None)
            if entry and entry.timer:
                entry.timer.cancel()
            if self.metrics:
                self.metrics.forget_job(ref.namespace, ref.name)
            if entry is not None and _in_line(entry.raw):
                self.trigger_waiting()  # it left the line: the jobs behind may claim now
            return
        entry = self.jobs.get(ref.uid)
        rv = _resource_version(raw)
        if entry is None:
            self.jobs[ref.uid] = JobEntry(ref=ref, raw=raw)
        elif not _older(rv, _resource_version(entry.raw)):
            echo = rv and rv == entry.own_resource_version
            self._take(entry, raw)
            if echo:
                return  # our own status write coming back: nothing new to decide
            if entry.writing_status:
                # Maybe our own write, come back before its answer: judged by that answer.
                entry.unsettled.append(rv)
                return
        # else: the watch lags the responses to our own writes, and this version is older
        # than the one held (which includes it). Taking it would roll the view back: the next
        # status write is a diff against it, and would leave out a field set back to its
        # older value. Decide again: the pass that wrote the newer one may not have seen this.
        self.trigger(ref.uid)

    def node_event(self, event_type: str | None, raw: dict[str, Any], source: int = 0) -> None:
        """A Node event of watch ``source`` (0: the nodeSelector's; 1: the nodes this
        installation marked, when a selector is set)."""
        self._seen()
        before, after = self.nodes.apply_event(event_type, raw, source)
        self._node_changed(before, after)

    def _node_seen(self, name: str, raw: dict[str, Any] | None) -> None:
        """A node as one of our own changes read or wrote it (``None``: gone): into the view
        at once, as its watch event would put it there, and the jobs it concerns are woken
        the same way. The pass after a swap (woken by the survivors' deletions) saw the
        failed node still active and the promoted spare still a spare whenever the Node
        watch lagged the answers to our own patches — at thousands of nodes, often — and
        answered the failure a second time. The watch event that follows is a heartbeat."""
        before = self.nodes.get(name)
        self.nodes.refresh(name, raw)
        self._node_changed(before, self.nodes.get(name))

    def _node_changed(self, before: NodeInfo | None, after: NodeInfo | None) -> None:
        if before is not None and after is not None and _same_state(before, after):
            return  # a heartbeat: nothing a decision reads has changed
        owners = {n.owner_uid for n in (before, after) if n is not None and n.owner_uid}
        node = after if after is not None else before
        if owners and node is not None and logger.isEnabledFor(logging.DEBUG):
            waking = ", ".join(map(self._label, sorted(owners)))
            logger.debug("node %s changed, waking %s", node.name, waking)
        for uid in owners:
            self.trigger(uid)
        if after is None or after.owner_uid is None or _quarantined(before) != _quarantined(after):
            # Free, or in or out of quarantine while held: the nodes a phase could ever be
            # given changed (``pools.type_total``); a waiting job whose ``nodes.min`` can no
            # longer be met leaves the line for that type, and the jobs behind take what they
            # kept for it. (A node going NotReady counts still: it comes and goes.)
            self.trigger_waiting()

    def _take(self, entry: JobEntry, raw: dict[str, Any]) -> None:
        """``raw`` is the job as it stands now (a watch event, a read, our own status write).
        When it asks for less capacity in line than before, or left the line (admitted,
        failed, made smaller or invalid), the free nodes the jobs behind kept for it may be
        theirs now: wake them, as nothing else would (no node changed). So too when a job
        in line moves in it (its ``priority`` edited): the jobs it falls behind may take now
        what they kept for it; and when its deletion begins (it leaves the line then:
        :meth:`_claimants`). So too when its spec is edited so that the phase it waits to
        start has another shape (:meth:`_line_shape`): the jobs behind keep for it only the
        free nodes it could take, read from that shape."""
        before, place, deleting = _in_line(entry.raw), _priority(entry.raw), entry.ref.deleting
        ref = job_ref_from_raw(raw)
        edited = bool(before) and ref.generation != entry.ref.generation
        shape = self._line_shape(entry) if edited else None
        entry.ref, entry.raw = ref, raw
        moved = before != _in_line(raw) or place != _priority(raw)
        moved = moved or (edited and self._line_shape(entry) != shape)
        if before and (moved or entry.ref.deleting != deleting):
            self.trigger_waiting()
        self._wake_gpu_spare_holders(before, _in_line(raw))

    def _wake_gpu_spare_holders(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        """A job that joins the line for a GPU type, or asks for more of it, wakes the running
        CPU phases holding GPU nodes of that type as spares (``cpu.allowGpuNodes``): they give
        back the spares waiting GPU jobs want beyond the free nodes, and nothing else would
        wake them (no node changed) before their next resync."""
        if not self.settings.cpu.allow_gpu_nodes:
            return
        grown = [
            key
            for key, count in after.items()
            if key != CPU_TYPE and _count(count) > _count(before.get(key))
        ]
        if not grown:
            return
        holders = {
            node.owner_uid
            for node in self.nodes.all()
            if node.owner_uid
            and node.role == NodeRole.SPARE
            and any(has_type_labels(node, key, self.settings) for key in grown)
        }
        for uid in holders:
            holder = self.jobs.get(uid)
            if holder is not None and self._in_cpu_phase(holder):
                self.trigger(uid)

    def _in_cpu_phase(self, entry: JobEntry) -> bool:
        index = (entry.raw.get("status") or {}).get("phaseIndex") or 0
        self._parse_spec(entry)
        phases = entry.spec.phases if entry.spec is not None else []
        return isinstance(index, int) and 0 <= index < len(phases) and phases[index].is_cpu_only

    def pod_event(self, event_type: str | None, raw: dict[str, Any]) -> None:
        """A worker pod's watch event: into the index, and the jobs whose pods it changed are
        woken (an event that tells the index nothing new — the echo of our own create or
        delete, whose answer it already holds — wakes nothing)."""
        for uid in self.pods.apply(event_type, raw):
            if uid in self.jobs:
                self.trigger(uid)

    def pods_listed(self, entries: list[Indexed], version: str = "", namespace: str = "") -> None:
        """A full list of the jobs' pods in ``namespace`` ("": every one) taken at
        resourceVersion ``version`` (a relist, or a pod watch's own list): replace what the
        index holds of it, never rolling back what the watch delivered since, and wake the
        jobs whose pods changed."""
        for uid in sorted(self.pods.replace(entries, version, namespace)):
            if uid in self.jobs:
                self.trigger(uid)

    def _pod_answered(self, namespace: str, name: str, answer: dict[str, Any] | None) -> None:
        """A pod as our own create or delete left it (``None``: there was no such pod) goes
        into the index at once, as its watch event would: the pass after this one reads it
        whether or not the event has come. It wakes nothing: the pass that sent the request
        decided with it in mind."""
        if answer is None:
            self.pods.vanished(namespace, name)
        elif answer.get("kind") != "Status":
            self.pods.apply(None, answer)

    def trigger_waiting(self) -> None:
        """A node may have come free: wake the jobs that want capacity."""
        for uid, entry in self.jobs.items():
            status = entry.raw.get("status") or {}
            if status.get("state") in (None, JobState.PENDING, JobState.WAITING) or _in_line(
                entry.raw
            ):
                self.trigger(uid)

    def trigger_all(self, routine: bool = False) -> None:
        for uid in list(self.jobs):
            self.trigger(uid, routine=routine)

    async def resync(self, period: float) -> None:
        """Look at every job once over ``period`` seconds, one after another at even
        spacing (as routine passes); returns when the period is over.

        Woken all at the same moment, the jobs' passes came in a burst every period — at
        50 jobs and 8 slots, seconds of 8 passes at once, each a GET and a LIST — and a job
        whose node failed during the burst met a slower API server and waited for a slot
        (the tail of the time to its swap). Spread, the same looks keep the load level.
        Jobs that come or go meanwhile are looked at by the next period."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        uids = list(self.jobs)
        for k, uid in enumerate(uids):
            await asyncio.sleep(max(0.0, start + period * k / len(uids) - loop.time()))
            if uid in self.jobs:
                self.trigger(uid, routine=True)
        await asyncio.sleep(max(0.0, start + period - loop.time()))

    def trigger(self, uid: str, delay: float = 0.0, *, routine: bool = False) -> None:
        """Look at job ``uid`` again (after ``delay`` s). ``routine``: nothing is known to have
        changed (the periodic resync); such a pass waits for a slot behind every job woken
        by a change (:class:`PassSlots`)."""
        if self._closing:
            return
        if routine and (entry := self.jobs.get(uid)) is not None:
            entry.afresh_due = True
        if delay > 0:
            self._schedule(uid, delay)
            return
        if not routine:
            self._woken.add(uid)
            self._quiet.clear()
        if uid in self._queue.running:
            self._queue.dirty.add(uid)
            return
        if uid in self._queue.pending:
            if not routine:
                self._slots.promote(uid)
            return
        self._queue.pending.add(uid)
        task = asyncio.get_running_loop().create_task(self._run(uid, urgent=not routine))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _schedule(self, uid: str, delay: float) -> None:
        entry = self.jobs.get(uid)
        if entry is None:
            return
        now = time.monotonic()
        due = now + delay
        pending = entry.look_planned(now)
        if pending and entry.timer_due <= due:
            return  # an earlier look is already planned
        if entry.timer is not None:
            entry.timer.cancel()
        entry.timer_due = due
        entry.timer = asyncio.get_running_loop().call_later(delay, self.trigger, uid)

    async def _run(self, uid: str, urgent: bool = True) -> None:
        await self._slots.acquire(uid, urgent)
        try:
            self._queue.pending.discard(uid)
            self._queue.running.add(uid)
            try:
                while True:
                    self._queue.dirty.discard(uid)
                    ok = await self._guarded(uid)
                    entry = self.jobs.get(uid)
                    if entry is not None:
                        entry.failed_passes = 0 if ok else entry.failed_passes + 1
                    if not ok:
                        # Back off exponentially with jitter, up to 30 s; an event may still
                        # wake the job sooner.
                        tries = entry.failed_passes if entry is not None else 1
                        delay = min(30.0, 0.25 * 2 ** min(tries, 8))
                        self.trigger(uid, delay * (0.5 + random.random()))  # noqa: S311
                        break
                    if uid not in self._queue.dirty:
                        break
            finally:
                self._queue.running.discard(uid)
                self._woken.discard(uid)
                if not self._woken:
                    self._quiet.set()
        finally:
            self._slots.release()

    async def _guarded(self, uid: str) -> bool:
        started = time.perf_counter()
        ok = True
        ON_BEHALF.set(self._label(uid))  # this task's own context: its requests' trace lines
        self._trace(uid, "began")
        try:
            await self.reconcile(uid)
        except KubeError as exc:
            ok = False
            logger.warning("reconcile of %s stopped by the API: %s", self._label(uid), exc)
        except Exception:
            ok = False
            logger.exception("reconcile of %s failed", self._label(uid))
        finally:
            self.passes += 1
            self.last_pass_at = time.monotonic()
            took = time.perf_counter() - started
            if self.metrics:
                self.metrics.reconcile_finished(took, error=not ok)
            self._trace(uid, f"ended in {1000 * took:.1f} ms{'' if ok else ', failed'}")
        return ok

    def _label(self, uid: str) -> str:
        entry = self.jobs.get(uid)
        return f"{entry.ref.namespace}/{entry.ref.name}" if entry else uid

    def _trace(self, uid: str, what: str) -> None:
        """A stage of a pass in the trace (DEBUG on this module's logger, ``phased run
        --trace``), beside the requests it sends (``phased.kube.client``)."""
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("pass %s %s", self._label(uid), what)

    # -- one pass -------------------------------------------------------------------------------

    async def reconcile(self, uid: str) -> None:
        entry = self.jobs.get(uid)
        if entry is None:
            return
        # The job and its pods as the watches hold them (the job's kopf's, the pods' the
        # index's: each with our own writes' answers in it), unless this pass must read them
        # afresh (:meth:`_reads_afresh`); the pods on its nodes being cleared are listed.
        # Requests that go go at once: none needs another's answer (the pods are listed by
        # the job's UID, which the job's events gave us; the nodes it clears are in the node
        # view).
        nodes = self.nodes.snapshot()
        afresh = self._reads_afresh(entry)
        listing = asyncio.ensure_future(self._job_pods(entry.ref, afresh))
        clearing = asyncio.ensure_future(self._node_pods(entry.ref, nodes))
        try:
            if afresh:
                raw = await self.job_verbs.get(entry.ref.namespace, entry.ref.name)
                if raw is None or (raw.get("metadata") or {}).get("uid") != uid:
                    # Gone (its DELETED event will clean up) or replaced by a namesake: every
                    # pass reads afresh until the entry goes, and acts on nothing.
                    entry.afresh_due = True
                    return
                self._take(entry, raw)
            else:
                raw = entry.raw
            if not entry.ref.deleting and not await self.job_verbs.set_finalizer(raw, True):
                entry.afresh_due = True  # the job moved on from the version held
                self.trigger(uid, 0.2)
                return
            self._parse_spec(entry)
            snapshot = await self._observe(entry, await listing, nodes, await clearing)
        finally:
            _settle(listing)
            _settle(clearing)
        self._trace(uid, "read")
        now = self.clock()
        plan = decide(snapshot, self.settings, now)
        looking: asyncio.Future[dict[str, tuple[NodePod, ...]]] | None = None
        if _acts_before_claims(plan):
            # The nodes it would claim are looked at while the actions before their batch
            # are sent (a failure's answer: the quarantine and the gang's deletions, beside
            # the look at the node that refills the spares).
            looking = asyncio.ensure_future(self._look_at_claims(plan))
        else:
            for _ in range(_REDECIDES):
                looked = await self._look_at_claims(plan)
                if not looked:
                    break
                pods = {**snapshot.node_pods, **looked}
                snapshot = replace(snapshot, node_pods=pods)
                plan = decide(snapshot, self.settings, now)
        if logger.isEnabledFor(logging.DEBUG):
            self._trace(uid, f"decided: {_summary(plan)}")
        entry.claim_refused = False
        try:
            await self._act(entry, plan, now, looking)
        except _Refused as refusal:
            await self._say_refused(entry, snapshot, refusal.error, now)
            raise refusal.error from None
        finally:
            if looking is not None:
                _settle(looking)
        self._trace(uid, "acted")
        if entry.claim_refused:
            # The plan's status holds a node it did not get: like a failed action, the
            # status is not written (nor observed), and the job is decided again shortly
            # from the cluster as it is (the refusal planned that look).
            return
        # The plan's events are posted in the background and the pass ends once its status
        # is written: an event post that is slow or held back by the API server's priority
        # and fairness never holds the job's next pass (after a failure, the gang's creation).
        self._post_events(entry, plan, now)
        await self._write_status(entry, snapshot, plan)
        self._observe_metrics(entry, snapshot, plan)
        if plan.finished and entry.ref.deleting:
            await self.job_verbs.set_finalizer(raw, False)
        if plan.requeue_after is not None:
            self.trigger(uid, max(0.05, plan.requeue_after))
        # Otherwise the next event or the periodic resync (every resyncInterval, for every
        # job) looks again: a timer of its own here as well would look at an idle job twice
        # an interval, each look a GET of the job and a LIST of its pods.

    def _reads_afresh(self, entry: JobEntry) -> bool:
        """This pass reads the job by a GET and its pods by a LIST, not from the watches:
        until the pod index is synced (it cannot yet say a job has no pods); after a pass of
        the job that failed — a request of it may have landed unanswered (a status write, a
        create), and the watches may not have brought it yet; when the resync asked for it,
        so that a watch fallen silent (a connection that hangs until its read timeout) hides
        nothing from the job for longer than an interval, as when every pass listed; while
        the job is being deleted (a namesake may follow it: only a GET tells them apart);
        and once a read found it gone, or the version held out of date. Asking takes the
        resync's request (``afresh_due``): the pass that asks is the one that reads."""
        afresh = (
            not self.pods.synced
            or entry.failed_passes > 0
            or entry.afresh_due
            or entry.ref.deleting
        )
        entry.afresh_due = False
        return afresh

    async def _job_pods(self, job: JobRef, afresh: bool) -> tuple[PodInfo, ...]:
        if not afresh:
            return self.pods.of(job.uid, job.namespace)
        raws = await self.pod_verbs.select(job.namespace, f"{labels.LABEL_JOB_UID}={job.uid}")
        return tuple(pod_from_raw(p) for p in raws)

    def _parse_spec(self, entry: JobEntry) -> None:
        if entry.spec_generation == entry.ref.generation:
            return
        entry.spec_generation = entry.ref.generation
        try:
            entry.spec, entry.spec_error = parse_spec(entry.raw.get("spec") or {}), None
        except ValidationError as exc:
            entry.spec, entry.spec_error = None, format_spec_error(exc)

    async def _observe(
        self,
        entry: JobEntry,
        pods: tuple[PodInfo, ...],
        nodes: NodeSet,
        node_pods: dict[str, tuple[NodePod, ...]],
    ) -> Snapshot:
        """The snapshot decide reads: the job as last taken, its pods, the node view's
        ``nodes`` and the pods on those being cleared or found occupied (:meth:`_node_pods`),
        all read by the caller."""
        spec, spec_error = entry.spec, entry.spec_error
        if entry.rejected is not None and entry.rejected[0] == entry.ref.generation:
            # The API refused what this spec makes: only a new generation can fix it.
            spec, spec_error = None, entry.rejected[1]
        annotations = (entry.raw.get("metadata") or {}).get("annotations") or {}
        token = None
        if self.report_key is not None:
            ref = entry.ref
            token = reports.report_token(self.report_key, ref.namespace, ref.name, ref.uid)
        status, unreadable = read_status(entry.raw.get("status"))
        return Snapshot(
            job=entry.ref,
            spec=spec,
            spec_error=spec_error,
            reports=reports.decode(annotations.get(reports.ANNOTATION_REPORTS)),
            report_token=token,
            report_secret_exists=entry.report_secret_ok,
            claim_exists=entry.claim_ok,
            status=status,
            unreadable_status=unreadable,
            nodes=nodes.with_nodes(await self._unseen_pool_nodes(status)),
            pods=pods,
            service_exists=entry.service_ok,
            waiting=self._claimants(entry.ref.uid),
            known_node_names=self.nodes.names() if self.nodes.synced else None,
            annotations=_phased_annotations(entry.raw),
            node_pods=node_pods,
        )

    async def _unseen_pool_nodes(self, status: TrainingJobStatus) -> tuple[NodeInfo, ...]:
        """Nodes the status lists in the pool (active or spare) that no node view holds,
        read from the API: only with a nodeSelector, where a node can leave every view and
        still exist.

        A node the job released out of the selector loses the installation label the second
        watch selects on; if the status write that dropped it from the pool was lost, the
        next pass would take it for a deleted node (a ledger entry for nothing). Only the API
        can tell: a node it still has goes into the snapshot (decide sees it unheld, or held
        and out of the selector, and gives it back; it is never claimed there), one it has
        not is left out (``NodeDeleted``). One GET per such node, while the status lists it.
        """
        if not self.settings.node_selector or not self.nodes.synced:
            return ()
        found: list[NodeInfo] = []
        for name in dict.fromkeys([*status.pool.active, *status.pool.spares]):
            if self.nodes.get(name) is not None:
                continue
            try:
                found.append(node_from_raw(await self.node_verbs.get(name)))
            except NotFound:
                continue
        return tuple(found)

    async def _pods_on(self, node: str) -> tuple[NodePod, ...]:
        raws = await self.pod_verbs.on_node(node)
        return tuple(node_pod_from_raw(r, self.operator_pod) for r in raws)

    async def _node_pods(self, job: JobRef, nodes: NodeSet) -> dict[str, tuple[NodePod, ...]]:
        """Pods on the job's nodes being cleared (fresh; for one the job promoted and found
        clear within ``_PROMOTED_CLEAR_FRESH``, that list), and on nodes recently found
        occupied (remembered for a resync interval; only ``LOOK_AGAIN_SECONDS`` when every
        pod keeping the node out was on its way out, so that the pass decide asks for then
        looks at it afresh)."""
        now = time.monotonic()
        for name, (seen, pods) in list(self.occupied.items()):
            soon = leaving(pods, self.settings)
            if now - seen > (LOOK_AGAIN_SECONDS if soon else self._resync):
                del self.occupied[name]
        found = {name: pods for name, (_, pods) in self.occupied.items()}
        for key, (seen, _) in list(self._promoted_clear.items()):
            if now - seen > _PROMOTED_CLEAR_FRESH:
                del self._promoted_clear[key]
        names = [
            name
            for name in sorted(nodes.labelled(job.uid))
            if labels.ANNOTATION_CLEARING in nodes[name].annotations
        ]
        # A node this job's last passes promoted and found clear once the promotion landed is
        # not listed again for a moment: the pass that creates the gang on it (once the
        # survivors are gone) decides at once.
        promoted = self._promoted_clear
        clear = {n: promoted[job.uid, n][1] for n in names if (job.uid, n) in promoted}
        names = [n for n in names if n not in clear]
        found.update(clear)
        found.update(zip(names, await self._pods_on_each(names), strict=True))
        return found

    async def _pods_on_each(self, names: Sequence[str]) -> list[tuple[NodePod, ...]]:
        """The pods on each node of ``names``, listed at once — at most ``_LISTS_AT_ONCE`` in
        flight, for a pool formed of a hundred nodes looks at each — and all of them back
        before an error (the first in ``names``' order) is raised."""
        gate = asyncio.Semaphore(_LISTS_AT_ONCE)

        async def one(name: str) -> tuple[NodePod, ...]:
            async with gate:
                return await self._pods_on(name)

        results = await asyncio.gather(*(one(n) for n in names), return_exceptions=True)
        listed: list[tuple[NodePod, ...]] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            listed.append(result)
        return listed

    async def _look_at_promoted(self, job: JobRef, name: str) -> None:
        """List the pods of a node just promoted (its clearing mark written with the role):
        found with no pod but the job's (and those that never count), the list stands in for
        the look of the job's passes in the next :data:`_PROMOTED_CLEAR_FRESH` seconds. A
        node where anything else was found is listed afresh by each pass, as before. A list
        that fails is only logged: the promotion landed, and the next pass lists the node."""
        try:
            pods = await self._pods_on(name)
        except KubeError as exc:
            logger.debug("%s: the pods of promoted node %s: %s", self._label(job.uid), name, exc)
            return
        found = guests(pods, job, None, self.settings)
        if not found.evict and not found.stay:
            self._promoted_clear[job.uid, name] = (time.monotonic(), pods)

    async def _look_at_claims(self, plan: Plan) -> dict[str, tuple[NodePod, ...]]:
        """The pods on each node the plan would claim, for those where others' pods run
        (they go into the snapshot and decide chooses again)."""
        busy: dict[str, tuple[NodePod, ...]] = {}
        names = [
            a.node for a in plan.actions if isinstance(a, ClaimNode) and a.node not in self.occupied
        ]
        for name, pods in zip(names, await self._pods_on_each(names), strict=True):
            self._looked[name] = (time.monotonic(), pods)
            if blocking(pods, self.settings):
                busy[name] = pods
                self.occupied[name] = (time.monotonic(), pods)
                self._refused(LeftAlone.RUNNING_PODS)
        return busy

    def _refused(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.claim_refused(reason)

    def _claimants(self, me: str) -> tuple[Claimant, ...]:
        out = []
        for uid, other in self.jobs.items():
            if uid == me or other.ref.deleting:
                # A job being deleted claims nothing, whatever its status still says: its
                # last pass writes no status (the object is about to go), and it may linger
                # behind another finalizer with its waitingFor as it was.
                continue
            wants = _waiting_for(other.raw)
            spares = False
            if not wants:
                # A running job short of spares is in line for them at its place (it is not
                # waiting: nothing else reads it so).
                wants, spares = _spares_wanted(other.raw), True
            if not wants:
                continue
            shape = self._line_shape(other)
            out.append(
                Claimant(
                    uid=uid,
                    priority=_priority(other.raw),
                    created=other.ref.created,
                    wants={str(k): int(v) for k, v in wants.items()},
                    gpus_per_node=shape[0] if shape is not None else None,
                    tolerations=shape[1] if shape is not None else None,
                    fault_conditions=shape[2] if shape is not None else (),
                    types=shape[3] if shape is not None else None,
                    spares=spares,
                )
            )
        return tuple(out)

    def _line_shape(self, entry: JobEntry) -> LineShape | None:
        """The shape of the phase a waiting job waits to start (its ``gpusPerNode``, its
        workers' tolerations, its ``gpuFaultConditions`` and the types it accepts in its
        order of preference), read from its spec and
        ``status.phaseIndex``, so that the jobs behind it keep only free nodes it could take;
        ``None`` when they cannot be read (then any node of the type it wants is kept for
        it). Remembered per generation and index."""
        index = (entry.raw.get("status") or {}).get("phaseIndex") or 0
        if not isinstance(index, int):
            return None
        key = (entry.ref.generation, index)
        if entry.line_shape is not None and entry.line_shape[0] == key:
            return entry.line_shape[1]
        self._parse_spec(entry)
        shape = waiting_shape(entry.spec, index) if entry.spec is not None else None
        entry.line_shape = (key, shape)
        return shape

    async def _act(
        self,
        entry: JobEntry,
        plan: Plan,
        now: datetime,
        looking: asyncio.Future[dict[str, tuple[NodePod, ...]]] | None = None,
    ) -> None:
        """The plan's actions, its events aside (:meth:`_post_events`), batch by batch.
        A node change is made from the node view (``NodeVerbs._update``): before any, the
        watch events that reached the operator while decide held the event loop are taken
        (:func:`_take_waiting_events`). A batch's pod deletions are not awaited by the node
        changes after them: they land
        before the next batch of anything else (:func:`_waits_for_deletions`) and before
        the pass ends (:func:`batches`). ``looking``: the look at the nodes the plan would
        claim, still on its way; the claims of the first batch with one wait for it (the
        rest of that batch goes at once), and are not sent if others' pods run on one of
        them (the pass then ends as when a claim is refused, and the job is decided again
        with the node known to be occupied)."""
        if any(isinstance(a, _NODE_CHANGES) for a in plan.actions):
            await _take_waiting_events()
        deleting: list[tuple[Action, asyncio.Future[None]]] = []
        try:
            for batch in batches(plan.actions):
                if deleting and _waits_for_deletions(batch):
                    await _landed(deleting)
                # The batch's claims wait for the look at their nodes; the rest of it (the
                # promotion beside a refill) goes at once.
                held = looking is not None and any(isinstance(a, ClaimNode) for a in batch)
                sent = [
                    (a, asyncio.ensure_future(self._perform(entry, a, now)))
                    for a in batch
                    if not (held and isinstance(a, ClaimNode))
                ]
                deleting.extend((a, f) for a, f in sent if isinstance(a, DeletePod))
                if held and looking is not None:
                    try:
                        busy = await looking
                    except BaseException:
                        # A look that failed, or a pass cancelled: what went beside it lands
                        # first (none is left in flight).
                        changing = [f for a, f in sent if not isinstance(a, DeletePod)]
                        await asyncio.gather(*changing, return_exceptions=True)
                        raise
                    looking = None
                    if busy:
                        entry.claim_refused = True
                        self.trigger(entry.ref.uid, 0.1)
                        await _landed([(a, f) for a, f in sent if not isinstance(a, DeletePod)])
                        break
                    sent.extend(
                        (a, asyncio.ensure_future(self._perform(entry, a, now)))
                        for a in batch
                        if isinstance(a, ClaimNode)
                    )
                await _landed([(a, f) for a, f in sent if not isinstance(a, DeletePod)])
            await _landed(deleting)
        finally:
            # A batch that failed, or a pass cancelled: the deletions still in flight are
            # awaited before the pass ends (none is left in flight); the error raised is
            # the failed batch's, theirs only awaited.
            if deleting:
                await asyncio.gather(*(f for _, f in deleting), return_exceptions=True)

    def _post_events(self, entry: JobEntry, plan: Plan, now: datetime) -> None:
        """The events of a plan whose actions all landed, each posted in the background
        (:meth:`_record`); a repeating one at most once per ``_REPEAT_EVERY``. A plan
        stopped by an error, or not written because a claim was refused, says nothing: the
        pass that decides again says what still holds."""
        for event in plan.actions:
            if not isinstance(event, EmitEvent):
                continue
            if event.reason in _REPEATING:
                key = (entry.ref.uid, event.reason, event.message)
                last = self._posted.get(key)
                if last is not None and time.monotonic() - last < _REPEAT_EVERY:
                    continue
                self._posted[key] = time.monotonic()
            self._record(entry.ref, event, now)
        if len(self._posted) > 10_000:  # forget the oldest half; a repeat costs one event
            for key in sorted(self._posted, key=self._posted.__getitem__)[:5_000]:
                del self._posted[key]

    def _record(self, job: JobRef, event: EmitEvent, now: datetime) -> None:
        """Post ``event`` in the background, as Kubernetes' own controllers record theirs:
        no pass waits for an event. Events are best effort (a post that fails is logged by
        :class:`EventVerbs`); the status is the job's account. Beyond ``_EVENTS_IN_FLIGHT``
        posts not yet answered, the event is dropped and said in the log."""
        if len(self._posting) >= _EVENTS_IN_FLIGHT:
            if self.metrics:
                self.metrics.event_dropped()
            logger.warning(
                "event %s on %s/%s dropped: %d events are still on their way to the API",
                event.reason,
                job.namespace,
                job.name,
                len(self._posting),
            )
            return
        post = self.event_verbs.post(job, event.type, event.reason, event.message, now)
        task = asyncio.get_running_loop().create_task(post)
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def events_posted(self) -> None:
        """Wait until every event recorded so far has been answered (shutdown; tests)."""
        while self._posting:
            await asyncio.gather(*list(self._posting), return_exceptions=True)

    async def _perform(self, entry: JobEntry, action: Action, now: datetime) -> None:
        job = entry.ref
        match action:
            case ClaimNode(node=name, resource_version=rv, role=role, replaces=lost, at=at):
                replaces = encode_replaces(lost, at or now) if lost is not None else None
                await self._claim(entry, name, rv, role, now, replaces)
            case SetNodeRole(
                node=name, role=role, replaces=lost, at=at, stalled=stalled, troubled=troubled
            ):
                replaces = encode_replaces(lost, at or now, troubled) if lost is not None else None
                was = self.nodes.get(name)
                changed = await self.node_verbs.set_role(
                    name, job, role, self._preemptible(entry), replaces, now, stalled
                )
                if changed and role == NodeRole.ACTIVE and (was is None or was.role != role):
                    await self._look_at_promoted(job, name)
            case EvictPod(namespace=namespace, name=name, node=node, delete=delete):
                await self._evict(job, namespace, name, node, delete)
            case StartClearing(node=name):
                await self.node_verbs.start_clearing(name, job, now)
            case FinishClearing(node=name):
                await self.node_verbs.finish_clearing(name, job)
            case ReleaseNode(node=name):
                await self.node_verbs.release(name, job)
            case QuarantineNode():
                note = QuarantineNote.for_action(
                    job.uid, action.reason, action.message, action.detected, action.cordoned
                )
                await self.node_verbs.quarantine(action.node, job, encode_quarantine(note))
            case UnquarantineNode(node=name):
                await self.node_verbs.unquarantine(name, job)
            case CreatePod(manifest=manifest):
                name = str((manifest.get("metadata") or {}).get("name") or "")
                try:
                    created = await self.pod_verbs.create(job.namespace, manifest)
                except Invalid as exc:
                    why = f"the API server refused worker pod {name}: {exc.message[:400]}"
                    entry.rejected = (job.generation, why)
                    self.trigger(job.uid, 0.1)
                    raise
                if created is not None:  # None: it existed already (the index has it or will)
                    self._pod_answered(job.namespace, name, created)
            case DeletePod(name=name, force=force, grace_seconds=grace):
                answer = await self.pod_verbs.delete(
                    job.namespace, name, force=force, grace_seconds=grace
                )
                self._pod_answered(job.namespace, name, answer)
            case EnsureService(manifest=manifest):
                await self.pod_verbs.ensure_service(job.namespace, manifest)
                entry.service_ok = True
            case EnsureSecret(manifest=manifest):
                await self.pod_verbs.ensure_secret(job.namespace, manifest)
                entry.report_secret_ok = True
            case EnsureClaim(manifest=manifest):
                await self.pod_verbs.ensure_claim(job.namespace, manifest)
                entry.claim_ok = True
            case _:
                logger.error("unknown action %r", action)

    async def _say_refused(
        self, entry: JobEntry, snapshot: Snapshot, error: KubeError, now: datetime
    ) -> None:
        """A worker, or what the workers need in the namespace (their Service, the report
        Secret, the checkpoint claim), refused by what guards the namespace (quota, Pod
        Security, RBAC, a webhook): the status as it was, with ``WorkersRefused`` saying
        why, and one event (phased.core.refusals); the pass then fails and is retried with
        the backoff."""
        status, event = refusals.refused(snapshot.status, error.message, now, entry.ref.generation)
        await self._write_status(entry, snapshot, Plan(actions=(), status=status))
        if event is not None:
            self._record(entry.ref, event, now)

    def _lost_claim(self, entry: JobEntry, name: str, fresh: dict[str, Any] | None) -> None:
        """A claim decided on a stale view: put the node as the API holds it into the view
        (or drop it, if it is gone) and decide again, backing off while claims keep losing."""
        self.nodes.refresh(name, fresh)
        entry.claim_refused = True
        entry.lost_claims += 1
        delay = min(5.0, 0.1 * 2 ** min(entry.lost_claims - 1, 6))
        log = logger.info if entry.lost_claims <= 3 else logger.debug
        log(
            "%s: node %s was not free as last seen; view refreshed, deciding again in %.1fs",
            self._label(entry.ref.uid),
            name,
            delay,
        )
        self.trigger(entry.ref.uid, delay)

    @staticmethod
    def _preemptible(entry: JobEntry) -> bool:
        return (
            entry.spec is not None and entry.spec.spares.while_idle == SpareIdlePolicy.PREEMPTIBLE
        )

    async def _claim(
        self,
        entry: JobEntry,
        name: str,
        rv: str,
        role: NodeRole,
        now: datetime,
        replaces: str | None = None,
    ) -> None:
        """Claim a node decide chose, then look at its pods once more: a pod of others
        bound between the look and the claim (the pool taint stops any after it) makes the
        claim undone at once."""
        job = entry.ref
        seen, pods = self._looked.pop(name, (0.0, ()))
        if time.monotonic() - seen > _LOOKED_FRESH:
            pods = await self._pods_on(name)
        if blocking(pods, self.settings):
            self.occupied[name] = (time.monotonic(), pods)
            self._refused(LeftAlone.RUNNING_PODS)
            entry.claim_refused = True
            self.trigger(job.uid, 0.1)
            return
        clearing = bool(displaceable(pods, self.settings))
        claim = await self.node_verbs.claim(
            name, rv, job, role, now, self._preemptible(entry), clearing, replaces
        )
        if not claim.won:
            self._refused("NotFree")
            self._lost_claim(entry, name, claim.fresh)
            return
        entry.lost_claims = 0
        self.nodes.refresh(name, claim.fresh)
        after = await self._pods_on(name)
        if blocking(after, self.settings):
            logger.warning(
                "%s: pods of others reached node %s during its claim; released",
                self._label(job.uid),
                name,
            )
            await self.node_verbs.release(name, job)
            self.occupied[name] = (time.monotonic(), after)
            self._refused(LeftAlone.RUNNING_PODS)
            entry.claim_refused = True
            self.trigger(job.uid, 0.1)

    async def _evict(self, job: JobRef, namespace: str, name: str, node: str, delete: bool) -> None:
        """A guest leaves a node that became active: by eviction, or by deletion once the
        eviction deadline has passed (core.guests)."""
        if delete:
            logger.warning(
                "%s: deleting guest %s/%s from node %s (eviction deadline passed)",
                self._label(job.uid),
                namespace,
                name,
                node,
            )
            await self.pod_verbs.delete(namespace, name)
            outcome = "deleted"
        else:
            result = await self.pod_verbs.evict(namespace, name)
            outcome = result.value
            if result == Eviction.BLOCKED:
                logger.info(
                    "%s: eviction of %s/%s from node %s refused by its disruption budget",
                    self._label(job.uid),
                    namespace,
                    name,
                    node,
                )
        if self.metrics is not None:
            self.metrics.guest_evicted(outcome)

    async def _write_status(self, entry: JobEntry, snapshot: Snapshot, plan: Plan) -> None:
        before, after = snapshot.status, plan.status
        new = after.to_k8s()
        old = before.to_k8s()
        stale = time.monotonic() - entry.last_status_write >= self._resync
        if _material(new) == _material(old) and not stale:
            return
        if entry.ref.deleting and plan.finished:
            return  # the object is about to go; nothing left to report
        patch = status_patch(new, entry.raw.get("status"), snapshot.unreadable_status)
        # The watch event of this write can come before its answer: taken for someone else's
        # change, it made the job's pass run once more for nothing (a GET, a LIST and often a
        # status write). Events that come meanwhile are judged by the version the answer
        # names; any other version is a change to look at.
        entry.writing_status, written = True, None
        try:
            written = await self.job_verbs.patch_status(entry.ref.namespace, entry.ref.name, patch)
        finally:
            entry.writing_status = False
            own = str(written["metadata"]["resourceVersion"]) if written is not None else None
            if any(rv != own for rv in entry.unsettled):
                self.trigger(entry.ref.uid)
            entry.unsettled.clear()
        entry.last_status_write = time.monotonic()
        if written is not None:
            entry.own_resource_version = str(written["metadata"]["resourceVersion"])
            self._take(entry, written)

    def _observe_metrics(self, entry: JobEntry, snapshot: Snapshot, plan: Plan) -> None:
        """Metrics follow the status; observing the same statuses twice counts nothing twice."""
        if self.metrics is None:
            return
        after = plan.status
        gpus = 0
        if entry.spec is not None and after.phase_index < len(entry.spec.phases):
            gpus = entry.spec.phases[after.phase_index].gpus_per_node
        running = sum(
            1
            for p in snapshot.pods
            if p.phase == PodPhase.RUNNING and not p.deleting and p.phase_name == after.phase
        )
        self.metrics.observe_job(
            entry.ref.namespace, entry.ref.name, snapshot.status, after, gpus, running
        )

    # -- worker reports ------------------------------------------------------------------------

    def job_uid(self, namespace: str, name: str) -> str | None:
        """The UID of the job called ``name`` in ``namespace``, from the watched jobs."""
        for uid, entry in self.jobs.items():
            if entry.ref.namespace == namespace and entry.ref.name == name:
                return uid
        return None

    def job_spec(self, uid: str) -> TrainingJobSpec | None:
        entry = self.jobs.get(uid)
        if entry is None:
            return None
        self._parse_spec(entry)
        return entry.spec

    async def record_report(self, uid: str, report: reports.Report) -> bool:
        """Write ``report`` into the job's report annotation; True once it is in the cluster.

        Read-merge-write guarded by the job's resourceVersion (a status write in between
        makes it try again), one report of a job at a time. The watch event of the write
        wakes the reconciler, which folds the report into the status. A report from a
        generation the job's status has moved past raises :class:`reports.Superseded` and
        is not written.
        """
        entry = self.jobs.get(uid)
        if entry is None:
            return False
        async with entry.report_lock:
            for _ in range(8):
                raw = await self.job_verbs.get(entry.ref.namespace, entry.ref.name)
                meta = (raw or {}).get("metadata") or {}
                if raw is None or meta.get("uid") != uid:
                    return False
                status = raw.get("status") or {}
                generation = status.get("restartGeneration")
                phase = status.get("phase") if isinstance(status.get("phase"), str) else None
                current = generation if isinstance(generation, int) else 0
                why = reports.superseded(report, phase, current)
                if why is None and (phase, current) == (report.phase, report.generation):
                    newest = await self._newest_attempt(entry, report)
                    why = reports.superseded(report, phase, current, newest)
                if why is not None:
                    raise reports.Superseded(why)
                old = (meta.get("annotations") or {}).get(reports.ANNOTATION_REPORTS)
                value = reports.encode(reports.merge(reports.decode(old), report))
                written = await self.job_verbs.set_annotation(
                    entry.ref.namespace,
                    entry.ref.name,
                    reports.ANNOTATION_REPORTS,
                    value,
                    str(meta.get("resourceVersion", "")),
                )
                if written:
                    self.trigger(uid)
                    return True
                await asyncio.sleep(0.05 * (0.5 + random.random()))  # noqa: S311 - jitter
        raise KubeError(409, "Conflict", "the job kept changing", "patch", "trainingjobs")

    async def _newest_attempt(self, entry: JobEntry, report: reports.Report) -> int | None:
        """The highest attempt among the worker pods of ``report``'s rank, phase and
        generation, from a fresh list; None for a job whose ranks are only ever restarted
        as a gang (its attempts stay 0: no list spent on each report). Only pods the job
        made count (:func:`phased.core.podlabels.made_by_job`): a copy carrying the rank's
        labels and a higher attempt would tell the running worker to stop."""
        spec = entry.spec
        if spec is not None and spec.failure_policy.restart_scope == RestartScope.GANG:
            return None
        raws = await self.pod_verbs.select(
            entry.ref.namespace,
            f"{labels.LABEL_JOB_UID}={entry.ref.uid},{labels.LABEL_RANK}={report.rank}",
        )
        pods = [pod_from_raw(raw) for raw in raws]
        attempts = [
            label_int(p, labels.LABEL_ATTEMPT) or 0
            for p in pods
            if p.phase_name == report.phase
            and p.generation == report.generation
            and made_by_job(entry.ref, p)
        ]
        return max(attempts, default=None)

    # -- periodic work ---------------------------------------------------------------------------

    async def quiet(self) -> None:
        """Return once no pass woken by a change is running or waiting for a slot, or after
        :data:`_QUIET_AT_MOST` seconds whatever runs.

        The periodic relists wait here before each page: a page of 500 Nodes is megabytes
        of JSON for the API server to write and the operator to decode and convert, and a
        failure's answer that ran beside a relist at 5,000 nodes was among the slowest of
        its run. A relist is a safety net, and can wait for a swap to be made; bounded, it
        never waits for ever behind a busy cluster."""
        if not self._quiet.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._quiet.wait(), _QUIET_AT_MOST)

    async def relist_nodes(self) -> None:
        """Replace each node view with a fresh (paged) list of its selection, each page
        asked for once the passes woken by a change are done (:meth:`quiet`), each Node the
        view holds at the listed version kept as it is
        (:meth:`~phased.kube.nodeview.NodeView.listed`); wake the jobs whose nodes changed."""
        for source, selector in enumerate(self.nodes.selectors):
            view = self.nodes.views[source]
            listed = await list_nodes(self.kube, selector, pause=self.quiet, convert=view.listed)
            self.nodes_listed(listed.entries, listed.resource_version, source=source)

    def nodes_listed(self, entries: list[Listed], version: str = "", source: int = 0) -> None:
        """A full list of watch ``source``'s Nodes taken at resourceVersion ``version`` (a
        relist, or the node watch's own list), already converted: replace that view with it,
        never rolling back what the watch delivered since, and wake the jobs whose nodes
        changed."""
        changed = self.nodes.replace_converted(entries, version, source)
        if changed:
            owners = {n.owner_uid for n in self.nodes.all() if n.name in changed and n.owner_uid}
            for uid in owners:
                self.trigger(uid)
            self.trigger_waiting()

    async def relist_pods(self) -> None:
        """Replace the pod index with a fresh (paged) list; wake the jobs whose pods changed
        (a pod deleted while no watch was running sends no event)."""
        for namespace in self._pod_namespaces:
            listed = await list_pods(self.kube, namespace, pause=self.quiet)
            self.pods_listed(listed.entries, listed.resource_version, namespace)

    async def relist_jobs(self) -> None:
        """Reload every TrainingJob; forget those deleted while a watch was down."""
        seen = set()
        for raw in await self.job_verbs.list_all():
            ref = job_ref_from_raw(raw)
            seen.add(ref.uid)
            entry = self.jobs.get(ref.uid)
            if entry is None:
                self.jobs[ref.uid] = JobEntry(ref=ref, raw=raw)
            else:
                self._take(entry, raw)
        for uid in set(self.jobs) - seen:
            gone = self.jobs.pop(uid)
            if gone.timer is not None:
                gone.timer.cancel()
            if _in_line(gone.raw):
                self.trigger_waiting()
            if self.metrics:
                self.metrics.forget_job(gone.ref.namespace, gone.ref.name)
        self.jobs_synced = True

    async def release_orphans(self) -> int:
        """Release the active and spare nodes of a job that is provably gone (e.g. its
        finalizer was removed by hand).

        Only nodes this installation marked that a job holds (core.ownership.holds, with
        this installation's label); only when a fresh GET of the job the node names
        (namespace and name labels) finds no job of that UID — never on a miss in the
        operator's own cache. A node whose name labels someone took off (its job writes them
        again while it lives: core.sizing.rename_held) is judged by a fresh list of every
        TrainingJob instead, made once per call and only for such a node. Quarantined nodes
        stay for a person.
        """
        if not (self.jobs_synced and self.nodes.synced):
            return 0
        released = 0
        alive: set[str] | None = None  # UIDs of every job, listed afresh when needed
        installation = self.settings.installation
        for node in self.nodes.all():
            uid = node.owner_uid
            if not uid or uid in self.jobs or node.installation != installation:
                continue
            if node.role not in (NodeRole.ACTIVE, NodeRole.SPARE):
                continue
            if not holds(node, uid, installation):
                continue
            ref = JobRef(
                namespace=node.labels.get(labels.LABEL_JOB_NAMESPACE, ""),
                name=node.labels.get(labels.LABEL_JOB, ""),
                uid=uid,
            )
            if ref.namespace and ref.name:
                raw = await self.job_verbs.get(ref.namespace, ref.name)
                if raw is not None and (raw.get("metadata") or {}).get("uid") == uid:
                    continue  # alive: the cache had not seen it yet
            else:
                if alive is None:
                    alive = {
                        str((j.get("metadata") or {}).get("uid"))
                        for j in await self.job_verbs.list_all()
                    }
                if uid in alive:
                    continue
            if await self.node_verbs.release(node.name, ref):
                logger.info(
                    "released node %s of job %s/%s (gone)", node.name, ref.namespace, ref.name
                )
                released += 1
        return released

    def left_alone(self) -> dict[str, int]:
        """Nodes this installation leaves alone, by reason (the phased_nodes_left_alone
        metric): marks it did not write, quarantined nodes no job holds (a deleted job's
        keeps its UID: once the jobs are listed, one whose job is not among them), and nodes
        recently found occupied."""
        counts: dict[str, int] = {}
        for node in self.nodes.all():
            owner = ownership(node, self.settings.installation)
            reason = owner.reason if owner.kind == Kind.LEFT_ALONE else None
            if (
                owner.kind == Kind.OURS
                and node.role == NodeRole.QUARANTINED
                and self.jobs_synced
                and owner.uid not in self.jobs
            ):
                reason = LeftAlone.QUARANTINED
            if reason is not None:
                counts[reason.value] = counts.get(reason.value, 0) + 1
            elif owner.kind == Kind.UNMARKED and node.name in self.occupied:
                busy = LeftAlone.RUNNING_PODS.value
                counts[busy] = counts.get(busy, 0) + 1
        return counts

    def survey(self) -> None:
        """Refresh the gauges a resync keeps: nodes left alone, and the operator's own tasks
        and timers (flat over a long run; growth is a leak)."""
        if self.metrics is None:
            return
        self.metrics.nodes_left_alone(self.left_alone())
        now = time.monotonic()
        timers = sum(1 for e in self.jobs.values() if e.look_planned(now))
        self.metrics.internals(len(asyncio.all_tasks()), timers)

    async def drain(self) -> None:
        """At shutdown: take no new triggers, stop the node watch, drop the planned looks,
        finish the passes in flight (a pass cut short is harmless, but a finished one saves
        the next start work)."""
        self._closing = True
        await self.node_watch.stop()
        await self.pod_watch.stop()
        for entry in self.jobs.values():
            if entry.timer is not None:
                entry.timer.cancel()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.events_posted()


def _summary(plan: Plan) -> str:
    """A plan's actions counted by kind, in the order they first come (for the trace)."""
    kinds: dict[str, int] = {}
    for action in plan.actions:
        kinds[type(action).__name__] = kinds.get(type(action).__name__, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in kinds.items()) or "nothing to do"


# Actions that go at once when they are next to each other in a plan: a change of one node
# (each names it) and a pod's deletion. None needs another's answer, and none is what a pod
# the plan creates, or a guest it evicts, waits for: those come after them, one run apart.
_TOGETHER = (
    ClaimNode,
    SetNodeRole,
    ReleaseNode,
    QuarantineNode,
    UnquarantineNode,
    StartClearing,
    FinishClearing,
    DeletePod,
)


def _makes_active(action: Action) -> bool:
    """A node made active: promoted, or claimed as an active."""
    return isinstance(action, SetNodeRole | ClaimNode) and action.role == NodeRole.ACTIVE


def _changes_another_way(action: Action) -> bool:
    """A node change that makes no node active, which one made active must wait for."""
    return not (_makes_active(action) or isinstance(action, DeletePod))


def batches(actions: Iterable[Action]) -> Iterator[tuple[Action, ...]]:
    """A plan's actions (its events aside) as they are sent: each batch at once, one batch
    after another, in the plan's order.

    A run of node changes and pod deletions next to each other in the plan goes at once, so
    long as no node comes twice in it (a second change of a node begins the next batch, after
    the first has landed) and no node is made active after another change of a node in it
    (the node it replaces leaves first: a promotion that landed without the demotion or the
    quarantine before it, the pass killed between them, left the pool an active beyond
    ``nodes.max`` once the node it replaced was well again, which a running generation keeps
    as a resize still to come). The run's pod deletions all go in its first batch, after
    its node changes: none waits for a node change, and a new generation waits for the
    workers they stop. The node changes after them do not wait for them either
    (``Reconciler._act``): they land before the next batch of anything else and before the
    pass ends. A failure's answer — the failed node quarantined, then a spare promoted and
    another node claimed to refill, the gang's workers deleted meanwhile — is two round
    trips of node changes one after another, the deletions beside them.

    A run of pod creations goes in batches of 1, 2, 4, ..., as the ReplicaSet and Job
    controllers create pods ("slow start"): one create refused by the namespace (a quota, a
    webhook) stops the run after one request, not after a gang's worth of them, and a gang
    of 100 workers is asked for in 7 round trips, not 100. Anything else (an eviction, a
    Service, Secret or claim ensured) goes alone."""
    acts = [a for a in actions if not isinstance(a, EmitEvent)]
    start = 0
    while start < len(acts):
        kind = type(acts[start])
        end = start + 1
        if isinstance(acts[start], _TOGETHER):
            while end < len(acts) and isinstance(acts[end], _TOGETHER):
                end += 1
            yield from _run_batches(acts[start:end])
        elif kind is CreatePod:
            while end < len(acts) and type(acts[end]) is CreatePod:
                end += 1
            size, at = 1, start
            while at < end:
                yield tuple(acts[at : min(at + size, end)])
                at, size = at + size, size * 2
        else:
            yield (acts[start],)
        start = end


def _run_batches(run: Sequence[Action]) -> Iterator[tuple[Action, ...]]:
    """A run of node changes and pod deletions next to each other in a plan, in batches:
    its deletions all in the first, after its node changes (none waits for a node change,
    and the first node changes — a failed node's quarantine — are not sent behind them),
    its node changes split where a node comes twice or one is made active after another
    change (:func:`batches`)."""
    changes = [a for a in run if not isinstance(a, DeletePod)]
    at, first = 0, True
    while at < len(changes) or first:
        nodes: set[str] = set()
        others = False
        end = at
        while end < len(changes):
            node = str(getattr(changes[end], "node", ""))
            if node in nodes or (_makes_active(changes[end]) and others):
                break
            nodes.add(node)
            others = others or _changes_another_way(changes[end])
            end += 1
        if first:
            yield (*changes[at:end], *(a for a in run if isinstance(a, DeletePod)))
            first = False
        else:
            yield tuple(changes[at:end])
        at = end


_NODE_CHANGES = tuple(kind for kind in _TOGETHER if kind is not DeletePod)
# Turns of the event loop a pass gives the watches before its node changes: a socket read,
# the watch task woken, its step (ours comes first in each turn), and one to spare.
_CATCH_UP = 4


async def _take_waiting_events() -> None:
    """Let the watches take the events that reached their sockets while the pass held the
    event loop (decide runs in it: tens of milliseconds at thousands of nodes on a busy
    machine). A node change made from the view without them loses to the write it has not
    seen (409) and is made again: on a failed node, the node lifecycle controller's
    ``unreachable`` or ``not-ready`` taint, written as the failure was seen, arrived during
    the decide that answers it in most failures of the scale bench at 5,000 nodes."""
    for _ in range(_CATCH_UP):
        await asyncio.sleep(0)


def _waits_for_deletions(batch: Sequence[Action]) -> bool:
    """A batch sent only once the pod deletions sent before it have landed: any but node
    changes and deletions (a pod created, a guest evicted, a Service ensured) — a new
    generation waits for the workers the deletions stop, and an error in a deletion stops
    the plan before it."""
    return not all(isinstance(a, _TOGETHER) for a in batch)


async def _landed(sent: list[tuple[Action, asyncio.Future[None]]]) -> None:
    """Await requests sent at once, every one before an error stops the plan (none is
    left in flight); the first error in the order they were sent is the one raised, a
    refusal by what guards the namespace as :class:`_Refused`. Empties ``sent``."""
    results = await asyncio.gather(*(f for _, f in sent), return_exceptions=True)
    actions = [a for a, _ in sent]
    sent.clear()
    for action, result in zip(actions, results, strict=True):
        if not isinstance(result, BaseException):
            continue
        if (
            isinstance(result, KubeError)
            and isinstance(action, _IN_NAMESPACE)
            and result.status in _REFUSED
        ):
            raise _Refused(result) from result
        raise result


def _acts_before_claims(plan: Plan) -> bool:
    """The plan claims a node, and its first batch (:func:`batches`) claims none: the look
    at the nodes it would claim can go beside the actions sent before them."""
    if not any(isinstance(a, ClaimNode) for a in plan.actions):
        return False
    first = next(batches(plan.actions), ())
    return not any(isinstance(a, ClaimNode) for a in first)


def _settle(task: asyncio.Future[Any]) -> None:
    """A request the pass no longer waits for: cancelled if still in flight, its error (if
    any) taken so that it is not reported as never retrieved."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


def _with_deletions(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """A merge patch from ``old`` to ``new``: a key gone from a mapping is sent as null (a
    merge patch leaves absent keys alone); lists are replaced whole, as merge patches do."""
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            patch[key] = _with_deletions(value, before)
        else:
            patch[key] = value
    for key in old.keys() - new.keys():
        patch[key] = None
    return patch


def status_patch(new: dict[str, Any], stored: Any, unreadable: tuple[str, ...]) -> dict[str, Any]:
    """The merge patch from the stored status to ``new``. Fields that could not be read are
    neither written nor nulled: a person must look at them (``StatusUnreadable``)."""
    old = stored if isinstance(stored, dict) else {}
    keep = {k: v for k, v in new.items() if k not in unreadable}
    return _with_deletions(keep, {k: v for k, v in old.items() if k not in unreadable})


def _phased_annotations(raw: dict[str, Any]) -> dict[str, str]:
    """The job's ``phased.dev/`` annotations (a person's instructions, e.g. proceed)."""
    found = (raw.get("metadata") or {}).get("annotations") or {}
    return {str(k): str(v) for k, v in found.items() if str(k).startswith(f"{labels.PREFIX}/")}


def _waiting_for(raw: dict[str, Any]) -> dict[str, Any]:
    """The capacity a job's status says it waits for in line (``status.waitingFor``)."""
    status = raw.get("status")
    wanted = status.get("waitingFor") if isinstance(status, dict) else None
    return wanted if isinstance(wanted, dict) else {}


def _spares_wanted(raw: dict[str, Any]) -> dict[str, Any]:
    """The spares a running job's status says it is short of (``status.sparesWanted``)."""
    status = raw.get("status")
    wanted = status.get("sparesWanted") if isinstance(status, dict) else None
    return wanted if isinstance(wanted, dict) else {}


def _in_line(raw: dict[str, Any]) -> dict[str, Any]:
    """What a job is in line for: the nodes it waits for, or the spares it runs short of."""
    return _waiting_for(raw) or _spares_wanted(raw)


def _count(value: Any) -> int:
    """A count in a ``waitingFor`` as written (0 for what does not read as one)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _priority(raw: dict[str, Any]) -> int:
    """The job's place in the line for capacity, before its age: ``spec.priority``."""
    return int((raw.get("spec") or {}).get("priority") or 0)


def _quarantined(node: NodeInfo | None) -> bool:
    return node is not None and node.role == NodeRole.QUARANTINED


def _same_state(a: NodeInfo, b: NodeInfo) -> bool:
    return replace(a, resource_version="") == replace(b, resource_version="")


def _material(status: dict[str, Any]) -> dict[str, Any]:
    """The status without the figures that move every second (accounting, utilization).

    The accounting's basis (the pool the next interval is charged at) and its unobserved
    time are not such figures: a change of them is written at once."""
    out = {
        k: v
        for k, v in status.items()
        if k not in ("accounting", "utilization", "utilizationPercent")
    }
    acc = status.get("accounting") or {}
    out["accounting"] = {k: acc.get(k) for k in ("basis", "unobservedSeconds")}
    out["phases"] = [
        {k: v for k, v in p.items() if k not in _VOLATILE_PHASE_KEYS}
        for p in status.get("phases", [])
    ]
    interruption = dict(status.get("interruption") or {})
    interruption.pop("used", None)
    interruption.pop("usedSeconds", None)
    out["interruption"] = interruption
    out["failures"] = [
        {k: v for k, v in f.items() if k != "interruptionSeconds"}
        for f in status.get("failures", [])
    ]
    return out
