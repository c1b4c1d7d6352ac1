"""Kubernetes Events about a TrainingJob, for `kubectl describe tj`."""

from __future__ import annotations

import logging
import secrets
from datetime import datetime

from phased.api.v1alpha1 import API_VERSION, KIND
from phased.core.model import JobRef
from phased.kube.client import KubeClient, KubeError

logger = logging.getLogger(__name__)
COMPONENT = "phased-operator"


class EventVerbs:
    def __init__(self, kube: KubeClient, instance: str = "") -> None:
        self._kube = kube
        self._instance = instance or COMPONENT

    async def post(self, job: JobRef, type_: str, reason: str, message: str, now: datetime) -> None:
        """Post one event; a failure to post is logged, never raised (events are best effort)."""
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{job.name[:200]}.{secrets.token_hex(8)}",
                "namespace": job.namespace,
            },
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": job.name,
                "namespace": job.namespace,
                "uid": job.uid,
            },
            "reason": reason[:128],
            "message": message[:1024],
            "type": type_,
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
        }
        try:
            await self._kube.request(
                "create",
                "POST",
                f"/api/v1/namespaces/{job.namespace}/events",
                resource="events",
                body=body,
                retry=False,
            )
        except KubeError as exc:
            logger.warning(
                "could not post event %s on %s/%s: %s", reason, job.namespace, job.name, exc
            )
