"""Reads for people: what ``kubectl phased`` shows, with the caller's own credentials.

Nothing here writes, and the operator never imports this module (an import-linter contract
says so): its calls are not the operator's, so the chart's RBAC does not grant them (listing
Events, for one) and ``tests/helm/test_rbac_matches_the_api_calls_in_the_code.py`` leaves
this file out.
"""

from __future__ import annotations

import os

from phased.api.v1alpha1 import GROUP, KIND, PLURAL, VERSION
from phased.core import labels
from phased.kube.client import JSON, KubeClient, NotFound, _kubeconfig_path


def current_namespace(kubeconfig: str | None) -> str:
    """The namespace of the kubeconfig's current context, as kubectl uses it; else ``default``."""
    from kubernetes.config import ConfigException, list_kube_config_contexts

    path = _kubeconfig_path(kubeconfig)
    if not path or not os.path.exists(path):
        return "default"
    try:
        _, current = list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError):
        return "default"
    namespace = ((current or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"


async def read_trainingjob(kube: KubeClient, namespace: str, name: str) -> JSON | None:
    """The TrainingJob, or ``None`` when there is none of that name."""
    try:
        return await kube.request(
            "get",
            "GET",
            f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{name}",
            resource=PLURAL,
        )
    except NotFound:
        return None


async def trainingjob_events(kube: KubeClient, namespace: str, name: str, uid: str) -> list[JSON]:
    """The Events still kept about this TrainingJob (the API server expires them, 1 h by
    default), oldest first; events of an earlier job of the same name are left out."""
    selector = f"involvedObject.kind={KIND},involvedObject.name={name}"
    found = await kube.request(
        "list",
        "GET",
        f"/api/v1/namespaces/{namespace}/events",
        resource="events",
        query={"fieldSelector": selector},
    )
    items = [
        e
        for e in found.get("items") or []
        if not uid or (e.get("involvedObject") or {}).get("uid") in (None, "", uid)
    ]
    return sorted(items, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))


async def phased_nodes(kube: KubeClient) -> list[JSON]:
    """Every Node that carries Phased's role label: held by a job, or quarantined."""
    found = await kube.request(
        "list",
        "GET",
        "/api/v1/nodes",
        resource="nodes",
        query={"labelSelector": labels.LABEL_ROLE},
    )
    return sorted(found.get("items") or [], key=lambda n: str(n["metadata"]["name"]))
