"""The quarantine's JSON patch, against the real API server. A node is quarantined as it
fails, just when the node lifecycle controller taints it. The quarantine holds the fields it
read with ``test`` ops and appends its taint, with no resourceVersion: a taint written after
the operator's view was taken lands beside it, in one request. A cordon written meanwhile (a
field the quarantine reads) fails a test, and the API server answers 422: the node is read
and the quarantine made from the read, whose note says the cordon was someone else's.

The node is a Node object of the test's own, of an installation no operator of the suite
runs, so no operator acts on it (the API server and the node lifecycle controller may taint
it, as any node that never reported); it is deleted at the end."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from phased.core import labels
from phased.core.model import JobRef
from phased.core.quarantine import QuarantineNote, decode_quarantine, encode_quarantine
from phased.kube.client import JSON_PATCH, MERGE_PATCH, KubeClient, NotFound
from phased.kube.nodes import NodeVerbs
from phased.kube.nodeview import NodeView

pytestmark = pytest.mark.timeout(120)

INSTALLATION = "e2e-json-patch"
JOB = JobRef(namespace="e2e", name="quarantine", uid=str(uuid.uuid4()))
NOW = datetime.now(UTC).replace(microsecond=0)
NOTE = encode_quarantine(QuarantineNote(JOB.uid, "NodeNotReady", "test", NOW, NOW))
POOL = {"key": labels.TAINT_POOL, "value": JOB.uid, "effect": "NoSchedule"}
# Another writer's taint, appended as the node lifecycle controller appends its own (a key of
# the test's, so that the controller, which taints this node too, never rewrites it).
THEIRS = {
    "key": "e2e.phased.dev/another-writer",
    "effect": "NoExecute",
    "timeAdded": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
}


class Counted:
    """The client, with each request it sends recorded: (method, content type)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.calls: list[tuple[str, str | None]] = []

    async def request(self, verb: str, method: str, path: str, **kw: Any) -> Any:
        self.calls.append((method, kw.get("content_type")))
        return await self.kube.request(verb, method, path, **kw)


@pytest.fixture
def node_name(kubeconfig: str) -> Iterator[str]:
    name = f"quarantine-{uuid.uuid4().hex[:8]}"
    yield name

    async def delete() -> None:
        kube = await KubeClient.connect(kubeconfig)
        try:
            await kube.request("delete", "DELETE", f"/api/v1/nodes/{name}", resource="nodes")
        except NotFound:
            pass
        finally:
            await kube.close()

    asyncio.run(delete())


def _quarantine(
    kubeconfig: str, name: str, meanwhile: Callable[[KubeClient], Awaitable[Any]]
) -> tuple[bool, list[tuple[str, str | None]], dict[str, Any]]:
    """Create a node the job holds, take the view's copy of it, let ``meanwhile`` write
    to it, quarantine it from the view: (done, the requests the quarantine made, the node)."""

    async def go() -> tuple[bool, list[tuple[str, str | None]], dict[str, Any]]:
        kube = await KubeClient.connect(kubeconfig)
        try:
            body = {
                "metadata": {
                    "name": name,
                    "labels": {
                        labels.LABEL_JOB_UID: JOB.uid,
                        labels.LABEL_JOB: JOB.name,
                        labels.LABEL_JOB_NAMESPACE: JOB.namespace,
                        labels.LABEL_ROLE: "active",
                        labels.LABEL_INSTALLATION: INSTALLATION,
                    },
                    "annotations": {labels.ANNOTATION_CLAIMED_AT: "2026-01-01T00:00:00Z"},
                },
                "spec": {"taints": [POOL]},
            }
            raw = await kube.request("create", "POST", "/api/v1/nodes", resource="nodes", body=body)
            view = NodeView()
            view.replace_all([raw])
            await meanwhile(kube)  # the view has not seen it
            counted = Counted(kube)
            verbs = NodeVerbs(
                counted,  # type: ignore[arg-type]
                INSTALLATION,
                on_seen=lambda n, fresh: view.refresh(n, fresh),
                known=view.get,
            )
            done = await verbs.quarantine(name, JOB, NOTE)
            node = await kube.request("get", "GET", f"/api/v1/nodes/{name}", resource="nodes")
            return done, counted.calls, node
        finally:
            await kube.close()

    return asyncio.run(go())


def test_a_taint_written_after_the_view_lands_beside_the_quarantine_in_one_request(
    kubeconfig: str, node_name: str
) -> None:
    async def taint(kube: KubeClient) -> None:
        add = [{"op": "add", "path": "/spec/taints/-", "value": THEIRS}]
        path = f"/api/v1/nodes/{node_name}"
        await kube.request(
            "patch", "PATCH", path, resource="nodes", body=add, content_type=JSON_PATCH
        )

    done, calls, node = _quarantine(kubeconfig, node_name, taint)
    assert done
    # One request: the tests of fields absent in the view (no cordon) passed on the API.
    assert calls == [("PATCH", JSON_PATCH)]
    taints = node["spec"]["taints"]
    assert POOL in taints and THEIRS in taints  # the other taint kept, its time too
    assert {"key": labels.TAINT_QUARANTINE, "value": JOB.uid, "effect": "NoSchedule"} in taints
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["labels"][labels.LABEL_ROLE] == "quarantined"
    assert node["metadata"]["annotations"][labels.ANNOTATION_QUARANTINE] == NOTE


def test_a_cordon_written_after_the_view_fails_a_test_and_the_read_notes_it(
    kubeconfig: str, node_name: str
) -> None:
    async def cordon(kube: KubeClient) -> None:
        body = {"spec": {"unschedulable": True}}
        path = f"/api/v1/nodes/{node_name}"
        await kube.request(
            "patch", "PATCH", path, resource="nodes", body=body, content_type=MERGE_PATCH
        )

    done, calls, node = _quarantine(kubeconfig, node_name, cordon)
    assert done
    # The JSON patch failed its test; the read came next and the merge patch last (a taint
    # the node lifecycle controller writes meanwhile may cost the merge patch a retry).
    assert calls[:2] == [("PATCH", JSON_PATCH), ("GET", None)]
    assert calls[-1] == ("PATCH", MERGE_PATCH)
    note = decode_quarantine(node["metadata"]["annotations"][labels.ANNOTATION_QUARANTINE])
    assert note is not None and note.cordoned_before  # its return will leave the cordon on
    assert node["metadata"]["labels"][labels.LABEL_ROLE] == "quarantined"
