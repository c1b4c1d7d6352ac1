"""Pod and Service verbs for a job's workers. Names are deterministic, so a repeated create
is answered by AlreadyExists and ignored: creating twice never makes two workers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phased.kube.client import JSON, Conflict, KubeClient, NotFound


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

    async def create(self, namespace: str, manifest: Mapping[str, Any]) -> bool:
        """Create a pod; False when it already exists."""
        try:
            await self._kube.request(
                "create",
                "POST",
                f"/api/v1/namespaces/{namespace}/pods",
                resource="pods",
                body=dict(manifest),
            )
        except Conflict as exc:
            if exc.already_exists:
                return False
            raise
        return True

    async def delete(
        self, namespace: str, name: str, *, force: bool = False, grace_seconds: int | None = None
    ) -> bool:
        """Delete a pod; with ``force`` skip the grace period (its kubelet is gone), else
        with ``grace_seconds`` when given (the pod's own period otherwise)."""
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
            await self._kube.request(
                "delete",
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{name}",
                resource="pods",
                body=body,
            )
        except NotFound:
            return False
        return True

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
