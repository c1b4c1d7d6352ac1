"""Liveness and readiness over HTTP, on their own port.

``/readyz`` answers 200 once the node view and the job list are loaded. ``/healthz`` answers
200 while the operator keeps reconciling (a pass ran within three resync intervals) and its
node watch is alive: a relist that keeps finding changes the watch never delivered means the
stream is dead, and a restart is the cure kopf's own liveness probe would not notice.
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
        self._corrections_seen = 0
        self._stale_relists = 0

    def alive(self) -> tuple[bool, str]:
        r = self._reconciler
        resync = parse_duration(r.settings.resync_interval)
        idle = time.monotonic() - r.last_pass_at
        if r.jobs and idle > 3 * resync + 60:
            return False, f"no reconcile pass for {idle:.0f}s"
        if r.nodes.relist_corrections > self._corrections_seen:
            self._corrections_seen = r.nodes.relist_corrections
            watch_quiet = time.monotonic() - r.nodes.last_event_at > 2 * parse_duration(
                r.settings.node_relist_interval
            )
            self._stale_relists = self._stale_relists + 1 if watch_quiet else 0
        if self._stale_relists >= 2:
            return False, "the node watch delivers nothing while relists find changes"
        return True, "ok"

    async def _healthz(self, _: web.Request) -> web.Response:
        ok, why = self.alive()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        r = self._reconciler
        ready = r.nodes.synced and r.jobs_synced
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
