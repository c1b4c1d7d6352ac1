"""kopf wiring only: watch events in, :class:`~phased.reconcile.Reconciler` triggers out.

Only an ``on.event`` handler is used, for TrainingJobs: it writes nothing onto the objects
(no progress annotations, no kopf finalizer). Phased keeps its own finalizer on TrainingJobs
and its own state on Nodes, so kopf is a watch loop here, and the reconciler is level-based.
Nodes and the jobs' worker Pods are not watched through kopf: the reconciler's own watches
(``phased.kube.nodewatch``, ``phased.kube.podwatch``) start here, after start-up; the Node
watch drops heartbeats before kopf would have deep-copied them, and both know when their
first full list has landed (the "synced" gate a pass needs to read from them).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import kopf

from phased.api.durations import parse_duration
from phased.api.v1alpha1 import GROUP, PLURAL, VERSION
from phased.reconcile import Reconciler

logger = logging.getLogger(__name__)

Startup = Callable[[], Awaitable[Reconciler]]


class NoEssence(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base for a registry of ``on.event`` handlers only: no essence is built.

    kopf builds the "essence" of every event's object (a deep copy of the whole body, status
    included, then cut down) to tell its change handlers (``on.create``, ``on.update``,
    ``on.resume``, ``on.field``) what changed; event handlers never read it. For an operator
    whose only handlers are event handlers that copy is waste on every TrainingJob and Pod
    event (13 % of the operator's busy time at 2,000 nodes): a TrainingJob's status, which
    the copy includes, grows with its ledger. :func:`build_registry` registers no change
    handler, which its test holds it to.
    """

    def build(
        self,
        *,
        body: kopf.Body,
        extra_fields: Iterable[kopf.FieldSpec] | None = None,
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()


def build_registry(start: Startup, stop: Callable[[], Awaitable[None]]) -> kopf.OperatorRegistry:
    """A kopf registry whose handlers feed the reconciler that ``start`` creates."""
    registry = kopf.OperatorRegistry()
    holder: dict[str, Reconciler] = {}
    background: list[asyncio.Task[None]] = []

    @kopf.on.startup(registry=registry)
    async def _startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.persistence.finalizer = "phased.dev/kopf-finalizer"
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="phased.dev")
        settings.persistence.diffbase_storage = NoEssence(
            prefix="phased.dev", key="last-handled-configuration"
        )
        settings.posting.enabled = False  # events are posted by the reconciler itself
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.networking.error_backoffs = [1, 2, 5, 10]
        try:
            reconciler = await start()
        except Exception as exc:
            # A start-up failure (bad kubeconfig, a port in use) will not fix itself: stop.
            raise kopf.PermanentError(f"cannot start: {exc}") from exc
        holder["r"] = reconciler
        await reconciler.relist_jobs()
        # The first full list of Nodes (the view's "synced" gate), then the Node watch in the
        # background (filtered on the server by settings.nodeSelector); the same for the
        # jobs' worker Pods (filtered on the server by their job-uid label) into the pod
        # index. drain() stops both.
        await reconciler.node_watch.start()
        await reconciler.pod_watch.start()
        reconciler.survey()
        quiet_collector()
        background.append(asyncio.create_task(_periodic(reconciler)))
        reconciler.trigger_all()

    @kopf.on.login(registry=registry)
    def _login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # In a pod: the mounted ServiceAccount token; elsewhere: $KUBECONFIG or ~/.kube/config.
        info: kopf.ConnectionInfo | None = kopf.login_with_service_account(**kwargs)
        return info or kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.cleanup(registry=registry)
    async def _cleanup(**_: Any) -> None:
        for task in background:
            task.cancel()
        for task in background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await stop()

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def _job(event: kopf.RawEvent, **_: Any) -> None:
        if "r" in holder:
            holder["r"].job_event(event.get("type"), dict(event["object"]))

    return registry


# Allocations of container objects between two young collections (CPython's default: 700).
YOUNG_THRESHOLD = 10_000


def quiet_collector() -> None:
    """Keep the cyclic garbage collector's pauses short and rare; called once start-up is done.

    Everything start-up made and the process keeps — the modules of kopf, the Kubernetes
    client and pydantic, the first list of every Node — is moved out of the collector's sight
    (``gc.freeze``), after one last collection so that no garbage is kept with it: those
    objects are freed by reference counting as ever, only never scanned again. Left in
    sight, at 5,000 nodes each full collection walked them all, 150-200 ms with the event
    loop stopped, every few seconds while nodes failed: a swap decided in that moment waited
    it out, once or twice (the tail of the reaction time). The young generation is collected
    after 10,000 allocations instead of 700, so the objects of a pass in flight (a decoded
    pod list, a snapshot) are less often found alive and promoted to the old generations,
    whose growth is what sets off the full collections.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


async def _periodic(reconciler: Reconciler) -> None:
    """Resync every job, relist Nodes (a deletion missed while a watch was down sends no
    event), and release nodes whose job is gone."""
    relist_every = parse_duration(reconciler.settings.node_relist_interval)
    resync_every = parse_duration(reconciler.settings.resync_interval)
    last_relist = time.monotonic()
    while True:
        # Every job once a period, spread over it (Reconciler.resync), not all at once.
        await reconciler.resync(max(1, resync_every))
        try:
            if time.monotonic() - last_relist >= relist_every:
                await reconciler.relist_nodes()
                await reconciler.relist_pods()
                await reconciler.relist_jobs()
                last_relist = time.monotonic()
            await reconciler.release_orphans()
            reconciler.survey()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("periodic resync failed; will try again")
