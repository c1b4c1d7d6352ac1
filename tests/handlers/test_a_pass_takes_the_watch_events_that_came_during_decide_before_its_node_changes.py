"""A pass takes the watch events that reached the operator while decide ran before it makes
a node change from the node view.

Decide runs in the event loop: at thousands of nodes on a busy machine it holds it for tens
of milliseconds, and a watch event that arrives meanwhile waits in its socket. On a failed
node the node lifecycle controller writes its ``unreachable`` taint as the failure is seen,
so the event of that write came in during the decide that answers the failure, and the
quarantine, made from a view without it, lost (409) and was made again: a round trip more
on the swap's path. The pass now lets the watches take what waits before its node
changes; a plan with no node change does not wait."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
from typing import Any

from phased.api.v1alpha1 import NodeRole, TrainingJobStatus
from phased.core import labels
from phased.core.model import CreatePod, Plan, QuarantineNode
from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.kube.nodes import NodeVerbs
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests.handlers.test_a_plans_node_changes_and_pod_deletions_go_at_once_and_its_creations_in_doubling_batches import (  # noqa: E501
    NOW,
    RAW,
)
from tests.kube.fake_cluster import FakeCluster
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi

UNREACHABLE = {
    "key": "node.kubernetes.io/unreachable",
    "effect": "NoExecute",
    "timeAdded": "2026-03-01T12:00:00Z",
}


def _held() -> dict[str, str]:
    return {
        labels.LABEL_JOB_UID: "u1",
        labels.LABEL_JOB: "llm",
        labels.LABEL_JOB_NAMESPACE: "ml",
        labels.LABEL_ROLE: NodeRole.ACTIVE.value,
        labels.LABEL_INSTALLATION: Settings().installation,
    }


async def _pass_after_a_decide_that_held_the_loop(plan: Plan) -> FakeCluster:
    """The node ``n`` in the view; the node lifecycle controller taints it while decide
    runs, and the watch's event of that write waits in a socket until the pass lets it in.
    Then the pass acts on ``plan``."""
    cluster = FakeCluster()
    raw = cluster.add_node("n", _held())
    rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
    rec.node_verbs = NodeVerbs(
        cluster,  # type: ignore[arg-type]
        rec.settings.installation,
        on_seen=rec._node_seen,
        known=rec.nodes.get,
    )
    rec.nodes.refresh("n", copy.deepcopy(raw))
    entry = JobEntry(ref=job_ref_from_raw(RAW), raw=RAW)
    rec.jobs["u1"] = entry

    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)

    async def watch() -> None:  # one event, as a watch stream carries it: a JSON line
        line = await reader.readline()
        rec.nodes.refresh("n", json.loads(line))

    watching = asyncio.ensure_future(watch())
    await asyncio.sleep(0)  # the watch waits on its socket
    # "decide": no await in it; the controller's taint lands and its event reaches the socket
    raw["spec"]["taints"] = [UNREACHABLE]
    cluster._bump(raw)
    theirs.sendall(json.dumps(raw).encode() + b"\n")
    try:
        await rec._act(entry, plan, NOW)
    finally:
        watching.cancel()
        writer.close()
        theirs.close()
    return cluster


def test_the_quarantine_is_made_from_the_view_with_the_taint_that_came_during_decide() -> None:
    quarantine = QuarantineNode("n", "NodeNotReady", "not ready", NOW, NOW)
    plan = Plan(actions=(quarantine,), status=TrainingJobStatus())
    cluster = asyncio.run(_pass_after_a_decide_that_held_the_loop(plan))
    assert cluster.calls == [("PATCH", "/api/v1/nodes/n")]  # one patch, no 409 before it
    node = cluster.nodes["n"]
    assert UNREACHABLE in node["spec"]["taints"]
    assert node["metadata"]["labels"][labels.LABEL_ROLE] == NodeRole.QUARANTINED.value


def test_a_plan_with_no_node_change_does_not_wait_for_the_watches(
    monkeypatch: Any,
) -> None:
    turns = 0
    real_sleep = asyncio.sleep

    async def counted(delay: float, *args: Any) -> Any:
        nonlocal turns
        turns += 1
        return await real_sleep(delay, *args)

    async def created(namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        return manifest

    async def run() -> None:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
        monkeypatch.setattr(rec.pod_verbs, "create", created)
        entry = JobEntry(ref=job_ref_from_raw(RAW), raw=RAW)
        rec.jobs["u1"] = entry
        plan = Plan(
            actions=(CreatePod(manifest={"metadata": {"name": "w-0"}}),),
            status=TrainingJobStatus(),
        )
        monkeypatch.setattr(asyncio, "sleep", counted)
        await rec._act(entry, plan, NOW)

    asyncio.run(run())
    assert turns == 0
