"""Leader election on a ``coordination.k8s.io/v1`` Lease, for running two or more replicas.

Exactly one replica holds the Lease and runs the operator; the others wait and take over
when the holder stops renewing it (a crash, a lost node). Every write is guarded by the
Lease's ``resourceVersion``, so two candidates can never both believe they won. A leader
that cannot renew before its lease would expire stops itself (the process exits and is
restarted as a candidate): acting without the lease could mean acting twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from phased.kube.client import JSON, Conflict, KubeClient, KubeError, NotFound

logger = logging.getLogger(__name__)


def _micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class LeaderLost(RuntimeError):
    """The lease could not be renewed in time: this replica must stop acting."""


class LeaseElector:
    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_seconds: int = 15,
        renew_every: float = 2.0,
    ) -> None:
        self._kube = kube
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._create_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._namespace, self._name = namespace, name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_every = renew_every

    async def _get(self) -> JSON | None:
        try:
            return await self._kube.request("get", "GET", self._path, resource="leases")
        except NotFound:
            return None

    async def try_acquire(self, now: datetime | None = None) -> bool:
        """One attempt to take or keep the lease; True when this replica holds it."""
        now = now or datetime.now(UTC)
        lease = await self._get()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "renewTime": _micro(now),
        }
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._name, "namespace": self._namespace},
                "spec": {**spec, "acquireTime": _micro(now), "leaseTransitions": 0},
            }
            try:
                await self._kube.request(
                    "create", "POST", self._create_path, resource="leases", body=body
                )
            except Conflict:
                return False
            return True
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        renewed = _parse(current.get("renewTime")) or datetime.min.replace(tzinfo=UTC)
        duration = int(current.get("leaseDurationSeconds") or self.lease_seconds)
        expired = now >= renewed + timedelta(seconds=duration)
        if holder and holder != self.identity and not expired:
            return False
        new_spec = dict(current, **spec)
        if holder != self.identity:
            new_spec["acquireTime"] = _micro(now)
            new_spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        try:
            await self._kube.request("update", "PUT", self._path, resource="leases", body=lease)
        except Conflict:
            return False
        return True

    async def acquire(self) -> None:
        """Wait until this replica holds the lease."""
        announced = False
        while True:
            try:
                if await self.try_acquire():
                    logger.info("leader election: %s holds the lease", self.identity)
                    return
            except KubeError as exc:
                logger.warning("leader election: %s", exc)
            if not announced:
                logger.info("leader election: another replica leads; %s waits", self.identity)
                announced = True
            await asyncio.sleep(self.renew_every)

    async def keep(self) -> None:
        """Renew until the lease is lost; then raise :class:`LeaderLost`."""
        last_renewed = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(self.renew_every)
            try:
                if await self.try_acquire():
                    last_renewed = asyncio.get_running_loop().time()
                    continue
                raise LeaderLost(f"{self.identity}: another replica took the lease")
            except KubeError as exc:
                logger.warning("leader election: renewal failed: %s", exc)
            # Give up before the lease can expire in others' eyes.
            if asyncio.get_running_loop().time() - last_renewed > self.lease_seconds * 0.8:
                raise LeaderLost(f"{self.identity}: could not renew the lease in time")

    async def release(self) -> None:
        """Hand the lease over at a clean shutdown, so a standby need not wait for it."""
        lease = await self._get()
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"]["holderIdentity"] = None
        lease["spec"]["renewTime"] = None
        with contextlib.suppress(KubeError):  # it expires by itself anyway
            await self._kube.request("update", "PUT", self._path, resource="leases", body=lease)
