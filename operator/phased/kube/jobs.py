"""TrainingJob verbs: read, write status once per reconcile, hold and drop our finalizer."""

from __future__ import annotations

from typing import Any

from phased.api.v1alpha1 import GROUP, PLURAL, VERSION
from phased.kube.client import JSON, MERGE_PATCH, Conflict, KubeClient, NotFound

FINALIZER = "phased.dev/release-nodes"


def _path(namespace: str, name: str = "") -> str:
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    return f"{base}/{name}" if name else base


class JobVerbs:
    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def get(self, namespace: str, name: str) -> JSON | None:
        try:
            return await self._kube.request("get", "GET", _path(namespace, name), resource=PLURAL)
        except NotFound:
            return None

    async def list_all(self) -> list[JSON]:
        data = await self._kube.request(
            "list", "GET", f"/apis/{GROUP}/{VERSION}/{PLURAL}", resource=PLURAL
        )
        items: list[JSON] = data.get("items") or []
        return items

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> JSON | None:
        """Write the whole status in one merge patch (lists are replaced, as intended)."""
        try:
            return await self._kube.request(
                "patch",
                "PATCH",
                _path(namespace, name) + "/status",
                resource=PLURAL + "/status",
                body={"status": status},
                content_type=MERGE_PATCH,
            )
        except NotFound:
            return None

    async def set_annotation(
        self, namespace: str, name: str, key: str, value: str, resource_version: str
    ) -> bool:
        """Set one annotation if the job is still at ``resource_version``; False if it moved."""
        try:
            await self._kube.request(
                "patch",
                "PATCH",
                _path(namespace, name),
                resource=PLURAL,
                body={
                    "metadata": {"annotations": {key: value}, "resourceVersion": resource_version}
                },
                content_type=MERGE_PATCH,
            )
        except Conflict:
            return False
        return True

    async def annotate(self, job: JSON, key: str, value: str | None) -> bool:
        """Set (or with ``None`` remove) one annotation, guarded by resourceVersion; False if
        the job changed or went away meanwhile."""
        meta = job.get("metadata") or {}
        try:
            await self._kube.request(
                "patch",
                "PATCH",
                _path(meta["namespace"], meta["name"]),
                resource=PLURAL,
                body={
                    "metadata": {
                        "annotations": {key: value},
                        "resourceVersion": meta["resourceVersion"],
                    }
                },
                content_type=MERGE_PATCH,
            )
        except (Conflict, NotFound):
            return False
        return True

    async def set_finalizer(self, job: JSON, present: bool) -> bool:
        """Add or remove our finalizer, guarded by resourceVersion; False if the job moved on."""
        meta = job.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if (FINALIZER in finalizers) == present:
            return True
        finalizers = (
            [*finalizers, FINALIZER] if present else [f for f in finalizers if f != FINALIZER]
        )
        try:
            await self._kube.request(
                "patch",
                "PATCH",
                _path(meta["namespace"], meta["name"]),
                resource=PLURAL,
                body={
                    "metadata": {
                        "finalizers": finalizers,
                        "resourceVersion": meta["resourceVersion"],
                    }
                },
                content_type=MERGE_PATCH,
            )
        except (Conflict, NotFound):
            return False
        return True
