"""Leader election on a ``coordination.k8s.io/v1`` Lease, with fencing of the leader's writes.

Exactly one replica acts; the others wait and take over when the holder stops renewing (a
crash, a lost node, a partition). The rules, the ones client-go's elector follows:

- **Observed time.** A candidate never compares the holder's ``renewTime`` with its own
  clock (clocks of two machines differ). It notes *when its own monotonic clock saw the
  record change* (a new ``resourceVersion``), and takes over only when the record has stayed
  unchanged for ``leaseDurationSeconds`` measured on that clock since then. ``renewTime`` is
  written for people and tools, never read for a decision.
- **Writes guarded by resourceVersion.** Taking over or renewing is an update carrying the
  resourceVersion last read; two candidates can never both win.
- **Fencing.** The leader may act only until ``acting deadline = (when it *sent* its last
  successful renewal) + leaseDuration - margin``, on its own monotonic clock. A candidate's
  observation of that renewal is later than the send, so no other replica can take over
  before the leader's deadline has passed; the margin covers the two clocks running at
  slightly different rates and a write already in flight. :meth:`LeaseElector.may_act` is
  checked before every write the operator sends (``KubeClient(fence=...)``), so a leader
  that cannot renew stops writing on its own, even while a renewal request hangs.

Why not ``kubernetes.leaderelection`` or ``kubernetes.aio.leaderelection``: the first is
thread-based; the asyncio one (kubernetes 37) does use observed time, but measures it with
the wall clock (``time.time()``, which steps under NTP), counts its renew deadline from the
start of each retry round rather than from the last successful renewal, does not bound a
hanging request, and offers no acting deadline: a leader cut off from the API server keeps
acting past the moment another replica may take over. It also lets connection errors other
than ``ApiException`` end the election, and cannot hand the Lease over at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from phased.kube.client import JSON, Conflict, KubeError, NotFound

logger = logging.getLogger(__name__)

Clock = Callable[[], float]  # monotonic seconds, this replica's own
WallClock = Callable[[], datetime]
Sleep = Callable[[float], Awaitable[None]]


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderLost(RuntimeError):
    """The lease could not be renewed before the acting deadline: stop acting."""


class LeaseElector:
    def __init__(
        self,
        kube: Any,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_seconds: float = 15.0,
        renew_every: float = 2.0,
        margin: float = 3.0,
        clock: Clock = time.monotonic,
        wall: WallClock | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not 0 < margin < lease_seconds or renew_every * 2 > lease_seconds - margin:
            raise ValueError("need 0 < margin < lease, and two renewals within lease - margin")
        self._kube = kube
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._create_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._namespace, self._name = namespace, name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_every = renew_every
        self.margin = margin
        self._clock = clock
        self._wall = wall or (lambda: datetime.now(UTC))
        self._sleep = sleep
        self._seen_version: str | None = None  # resourceVersion last seen
        self._seen_at = 0.0  # when this clock saw it change
        self._acting_until = float("-inf")

    # --- fencing --------------------------------------------------------------------------

    def may_act(self) -> bool:
        """True while this replica holds the lease and its acting deadline has not passed."""
        return self._clock() < self._acting_until

    def remaining(self) -> float:
        """Seconds of acting time left (negative once the deadline passed)."""
        return self._acting_until - self._clock()

    # --- one attempt ----------------------------------------------------------------------

    async def _bounded(self, call: Awaitable[JSON], limit: float) -> JSON:
        # One try (no retries), bounded: a hanging request must not outlive the deadline.
        return await asyncio.wait_for(call, timeout=max(0.001, limit))

    def _get(self) -> Awaitable[JSON]:
        return self._kube.request("get", "GET", self._path, resource="leases", retry=False)  # type: ignore[no-any-return]

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the lease; True when this replica now holds it."""
        bound = self.lease_seconds - self.margin
        try:
            lease: JSON | None = await self._bounded(self._get(), bound)
        except NotFound:
            lease = None
        received = self._clock()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_seconds),
            "renewTime": _micro(self._wall()),
        }
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": {**spec, "acquireTime": spec["renewTime"], "leaseTransitions": 0},
            }
            return await self._write(
                self._kube.request(
                    "create", "POST", self._create_path, resource="leases", body=body, retry=False
                )
            )
        current = lease.get("spec") or {}
        version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        if version != self._seen_version:
            self._seen_version, self._seen_at = version, received
        holder = current.get("holderIdentity") or ""
        if holder != self.identity:
            self._acting_until = float("-inf")  # someone else's (or nobody's) lease
            duration = float(current.get("leaseDurationSeconds") or self.lease_seconds)
            if holder and received - self._seen_at < duration:
                return False  # held, and not yet unchanged for a whole lease on our clock
        new_spec = dict(current, **spec)
        if holder != self.identity:
            new_spec["acquireTime"] = spec["renewTime"]
            new_spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        return await self._write(
            self._kube.request(
                "update", "PUT", self._path, resource="leases", body=lease, retry=False
            )
        )

    async def _write(self, call: Awaitable[JSON]) -> bool:
        sent = self._clock()  # the request starts only when awaited, below
        budget = self.lease_seconds - self.margin
        if self._acting_until > sent:  # renewing: no later than the current deadline
            budget = self._acting_until - sent
        try:
            written = await self._bounded(call, budget)
        except Conflict:
            return False
        # Others saw this write only after it was sent: act until sent + lease - margin.
        self._acting_until = sent + self.lease_seconds - self.margin
        self._seen_version = str((written.get("metadata") or {}).get("resourceVersion") or "")
        self._seen_at = self._clock()
        return True

    # --- loops ----------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Wait until this replica holds the lease."""
        announced = False
        while True:
            try:
                if await self.try_acquire_or_renew():
                    logger.info("leader election: %s holds the lease", self.identity)
                    return
            except (KubeError, TimeoutError) as exc:
                logger.warning("leader election: %s", exc or type(exc).__name__)
            if not announced:
                logger.info("leader election: another replica leads; %s waits", self.identity)
                announced = True
            await self._sleep(self.renew_every)

    async def keep(self) -> None:
        """Renew until the lease is lost or the acting deadline passes; then raise
        :class:`LeaderLost` (writes are refused from the deadline on, see :meth:`may_act`)."""
        while True:
            await self._sleep(min(self.renew_every, max(0.0, self.remaining())))
            if not self.may_act():
                raise LeaderLost(f"{self.identity}: could not renew the lease in time")
            try:
                if await self.try_acquire_or_renew():
                    continue
                if self._acting_until == float("-inf"):
                    raise LeaderLost(f"{self.identity}: another replica took the lease")
            except (KubeError, TimeoutError) as exc:
                logger.warning("leader election: renewal failed: %s", exc or "timed out")

    async def release(self) -> None:
        """Hand the lease over at a clean shutdown, so a standby need not wait for it."""
        self._acting_until = float("-inf")  # stop acting first
        with contextlib.suppress(KubeError, TimeoutError):  # it expires by itself anyway
            lease = await self._bounded(self._get(), self.lease_seconds)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = None
            lease["spec"]["renewTime"] = None
            await self._bounded(
                self._kube.request(
                    "update", "PUT", self._path, resource="leases", body=lease, retry=False
                ),
                self.lease_seconds,
            )
