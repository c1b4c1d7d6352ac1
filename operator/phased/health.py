"""Liveness and readiness over HTTP, on their own port.

``/readyz`` answers 200 once the node view and the job list are loaded. ``/healthz`` answers
200 while the operator keeps reconciling (a pass ran within three resync intervals) and each
of its node watches is alive: a relist that keeps finding changes a watch never delivered
means that stream is dead, and a restart is the cure kopf's own liveness probe would not
notice. Each watch is judged on its own events: with a nodeSelector there are two (the
selector's, and the one keeping this installation's marked nodes in sight), and the first's
steady traffic must not hide that the second has gone silent.
"""

from __future__ import annotations

import time

from aiohttp import web

from phased.api.durations import parse_duration
from phased.reconcile import Reconciler


class HealthServer:
    def __init__(self, reconciler: Reconciler, port: int, host: str = "0.0.0.0") -> None:  # noqa: S104
        self._reconciler = reconciler
        self._port = port
        self._host = host
        self._runner: web.AppRunner | None = None
        # Per node watch (kube.nodeview.NodeViews.views): corrections already judged, and how
        # many relists in a row found changes while that watch had been quiet.
        self._corrections_seen: dict[int, int] = {}
        self._stale_relists: dict[int, int] = {}

    def alive(self) -> tuple[bool, str]:
        r = self._reconciler
        resync = parse_duration(r.settings.resync_interval)
        idle = time.monotonic() - r.last_pass_at
        if r.jobs and idle > 3 * resync + 60:
            return False, f"no reconcile pass for {idle:.0f}s"
        quiet_for = 2 * parse_duration(r.settings.node_relist_interval)
        for index, view in enumerate(r.nodes.views):
            if view.relist_corrections > self._corrections_seen.get(index, 0):
                self._corrections_seen[index] = view.relist_corrections
                quiet = time.monotonic() - view.last_event_at > quiet_for
                stale = self._stale_relists.get(index, 0)
                self._stale_relists[index] = stale + 1 if quiet else 0
            if self._stale_relists.get(index, 0) >= 2:
                which = r.nodes.selectors[index] or "every node"
                why = f"the node watch ({which}) delivers nothing while relists find changes"
                return False, why
        return True, "ok"

    async def _healthz(self, _: web.Request) -> web.Response:
        ok, why = self.alive()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        r = self._reconciler
        ready = r.nodes.synced and r.pods.synced and r.jobs_synced
        return web.Response(status=200 if ready else 503, text="ready\n" if ready else "syncing\n")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class StandbyHealth:
    """What a replica waiting for the leader Lease answers: alive (so the kubelet does not
    restart it) and ready, for a standby is doing its job: waiting to take over. (A standby
    answering 503 would stall every RollingUpdate of the Deployment, which waits for each new
    pod to become ready, and a new pod always starts as a standby.)"""

    def __init__(self, port: int, host: str = "0.0.0.0") -> None:  # noqa: S104
        self._port, self._host = port, host
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        async def alive(_: web.Request) -> web.Response:
            return web.Response(text="standby\n")

        async def standing_by(_: web.Request) -> web.Response:
            return web.Response(text="standby: another replica leads\n")

        app = web.Application()
        app.router.add_get("/healthz", alive)
        app.router.add_get("/readyz", standing_by)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
