"""Pod and Service verbs for a job's workers. Names are deterministic, so a repeated create
is answered by AlreadyExists and ignored: creating twice never makes two workers."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from phased.kube.client import JSON, Conflict, KubeClient, KubeError, NotFound


class Eviction(StrEnum):
    """What an eviction request came to."""

    EVICTED = "evicted"  # the pod is on its way out (graceful termination)
    BLOCKED = "blocked"  # a PodDisruptionBudget does not allow it now (429)
    GONE = "gone"  # no such pod any more


class PodVerbs:
    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def select(self, namespace: str, label_selector: str) -> list[JSON]:
        data = await self._kube.request(
            "list",
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            resource="pods",
            query={"labelSelector": label_selector},
        )
        items: list[JSON] = data.get("items") or []
        return items

    async def on_node(self, node: str) -> list[JSON]:
        """Every pod bound to ``node``, in any namespace."""
        data = await self._kube.request(
            "list",
            "GET",
            "/api/v1/pods",
            resource="pods",
            query={"fieldSelector": f"spec.nodeName={node}"},
        )
        items: list[JSON] = data.get("items") or []
        return items

    async def evict(self, namespace: str, name: str) -> Eviction:
        """Ask a pod to leave through the Eviction API (policy/v1), which honours its
        PodDisruptionBudgets: BLOCKED when one does not allow it now."""
        body: JSON = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        try:
            await self._kube.request(
                "create",
                "POST",
                f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                resource="pods/eviction",
                body=body,
                retry=False,
            )
        except NotFound:
            return Eviction.GONE
        except KubeError as exc:
            if exc.status == 429:
                return Eviction.BLOCKED
            raise
        return Eviction.EVICTED

    async def create(self, namespace: str, manifest: Mapping[str, Any]) -> JSON | None:
        """Create a pod; the pod as created, or None when it already exists."""
        try:
            return await self._kube.request(
                "create",
                "POST",
                f"/api/v1/namespaces/{namespace}/pods",
                resource="pods",
                body=dict(manifest),
            )
        except Conflict as exc:
            if exc.already_exists:
                return None
            raise

    async def delete(
        self, namespace: str, name: str, *, force: bool = False, grace_seconds: int | None = None
    ) -> JSON | None:
        """Delete a pod; with ``force`` skip the grace period (its kubelet is gone), else
        with ``grace_seconds`` when given (the pod's own period otherwise). The answer: the
        pod as its deletion left it (or a ``Status``); None when there was no such pod."""
        body: JSON = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        }
        if force:
            body["gracePeriodSeconds"] = 0
        elif grace_seconds is not None:
            body["gracePeriodSeconds"] = max(0, grace_seconds)
        try:
            return await self._kube.request(
                "delete",
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{name}",
                resource="pods",
                body=body,
            )
        except NotFound:
            return None

    async def ensure_service(self, namespace: str, manifest: Mapping[str, Any]) -> bool:
        """Create the rendezvous Service unless it exists; True when created."""
        try:
            await self._kube.request(
                "create",
                "POST",
                f"/api/v1/namespaces/{namespace}/services",
                resource="services",
                body=dict(manifest),
            )
        except Conflict as exc:
            if exc.already_exists:
                return False
            raise
        return True

    async def ensure_secret(self, namespace: str, manifest: Mapping[str, Any]) -> bool:
        """Create the job's report-token Secret unless it exists (never read back)."""
        try:
            await self._kube.request(
                "create",
                "POST",
                f"/api/v1/namespaces/{namespace}/secrets",
                resource="secrets",
                body=dict(manifest),
            )
        except Conflict as exc:
            if exc.already_exists:
                return False
            raise
        return True

    async def ensure_claim(self, namespace: str, manifest: Mapping[str, Any]) -> bool:
        """Create the job's checkpoint claim unless it exists."""
        try:
            await self._kube.request(
                "create",
                "POST",
                f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
                resource="persistentvolumeclaims",
                body=dict(manifest),
            )
        except Conflict as exc:
            if exc.already_exists:
                return False
            raise
        return True
