"""Node verbs: claim, change role, quarantine, release. Pool membership lives on the Nodes.

Every change reads the Node fresh, checks that Phased may touch it (it carries no Phased
mark at all, or the job holds it: :mod:`phased.core.ownership`), and patches it with its
``resourceVersion`` as a precondition, so two jobs (or two operator replicas, or two
installations) can never both win the same node. A lost race returns ``False``. A quarantine
holds the fields it reads with a JSON patch's ``test`` ops instead, and appends its taint
(:func:`_quarantine_ops`), so that the node lifecycle controller's taint, written as the
node fails, does not fail it.

Every patch of a held node writes this installation's ``phased.dev/installation`` label, so
a node claimed before installations existed becomes provably ours the first time its job
touches it.

Full lists, for the node view, are paged (:func:`list_nodes`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import JobRef, NodeInfo
from phased.core.ownership import holds, marks
from phased.core.quarantine import decode_quarantine, encode_quarantine
from phased.kube.client import (
    JSON,
    JSON_PATCH,
    MERGE_PATCH,
    Conflict,
    Invalid,
    KubeClient,
    NotFound,
)
from phased.kube.convert import node_from_raw
from phased.kube.nodeview import Listed, converted
from phased.kube.paging import LIST_PAGE, Paged, Pause, Query, list_paged

logger = logging.getLogger(__name__)

Mutation = Callable[[JSON], JSON | None]  # fresh node -> patch body, or None to give up
Seen = Callable[[str, JSON | None], None]  # (name, the node as the API holds it; None: gone)
Known = Callable[[str], NodeInfo | None]  # name -> the node as the caller's view holds it
_ATTEMPTS = 4
_FROM_VIEW = 2  # changes tried from the view before the node is read
_RELEASE_PAUSES = (0.2, 0.5, 1.0, 2.0)  # seconds between rounds of _ATTEMPTS (a person waits)
NODES = "/api/v1/nodes"


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _taints(node: JSON) -> list[JSON]:
    return list(((node.get("spec") or {}).get("taints")) or [])


def _labels(node: JSON) -> dict[str, str]:
    return dict(((node.get("metadata") or {}).get("labels")) or {})


def _annotations(node: JSON) -> dict[str, str]:
    return dict(((node.get("metadata") or {}).get("annotations")) or {})


def _raw(node: NodeInfo) -> JSON:
    """The fields of a Node that a change reads, as the API would send them, from the view's
    copy (:func:`~phased.kube.convert.node_from_raw` keeps them all)."""
    taints: list[JSON] = []
    for t in node.taints:
        taint: JSON = {"key": t.key, "effect": t.effect}
        if t.value:
            taint["value"] = t.value
        if t.time_added:
            taint["timeAdded"] = t.time_added
        taints.append(taint)
    spec: JSON = {"taints": taints} if taints else {}
    if node.unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": node.name,
            "uid": node.uid,
            "resourceVersion": node.resource_version,
            "labels": dict(node.labels),
            "annotations": dict(node.annotations),
        },
        "spec": spec,
    }


def _owner(node: JSON) -> str | None:
    return _labels(node).get(labels.LABEL_JOB_UID)


def _over_a_cordon(node: JSON, annotation: str) -> str:
    """The quarantine note for ``node``, which is not quarantined yet: an active or spare
    node already cordoned was cordoned by someone else (Phased cordons only the nodes it
    quarantines), and the note says so, so that the cordon outlives the quarantine."""
    note = decode_quarantine(annotation)
    if note is None or not (node.get("spec") or {}).get("unschedulable"):
        return annotation
    if _labels(node).get(labels.LABEL_ROLE) == NodeRole.QUARANTINED.value:
        return annotation
    return encode_quarantine(note.over_a_cordon())


def _cordoned_before(node: JSON) -> bool:
    """The node's quarantine note says someone else had cordoned it before."""
    note = decode_quarantine(_annotations(node).get(labels.ANNOTATION_QUARANTINE))
    return note is not None and note.cordoned_before


def _guards(node: JSON) -> dict[str, str]:
    """The annotations that keep cluster autoscalers from removing a node the job holds:
    each guard the node lacks ("true"), and the record of every guard Phased wrote on it.
    Empty when it has them all. A held spare runs no pod but DaemonSets', so Cluster
    Autoscaler and Karpenter take it for an empty node and remove it within minutes: the
    job's spares would quietly go, and their refills after them."""
    notes = _annotations(node)
    lacking = [key for key in labels.SCALE_DOWN_GUARDS if key not in notes]
    if not lacking:
        return {}
    written = {*_guards_written(node), *lacking}
    record = ",".join(key for key in labels.SCALE_DOWN_GUARDS if key in written)
    return {**dict.fromkeys(lacking, "true"), labels.ANNOTATION_GUARDS: record}


def _guards_written(node: JSON) -> list[str]:
    recorded = _annotations(node).get(labels.ANNOTATION_GUARDS) or ""
    return [key for key in recorded.split(",") if key in labels.SCALE_DOWN_GUARDS]


def _unguard(node: JSON) -> dict[str, None]:
    """The annotations a release takes away: the guards Phased wrote, as it wrote them (one
    a person has set to another value since is theirs now), and the record."""
    notes = _annotations(node)
    out: dict[str, None] = {key: None for key in _guards_written(node) if notes.get(key) == "true"}
    if labels.ANNOTATION_GUARDS in notes:
        out[labels.ANNOTATION_GUARDS] = None
    return out


def _without(taints: list[JSON], *keys: str) -> list[JSON]:
    return [t for t in taints if t.get("key") not in keys]


def _pointer(*parts: str) -> str:
    """The RFC 6901 JSON pointer to the field ``parts`` names."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def _test(path: str, value: Any) -> JSON:
    """A JSON patch ``test`` op; with ``None`` it holds the field absent (the API server's
    JSON patch takes a ``null`` test of a missing field as passed)."""
    return {"op": "test", "path": path, "value": value}


def _add(path: str, value: Any) -> JSON:
    return {"op": "add", "path": path, "value": value}


# The annotations a quarantine reads (that the job holds the node, which guards it lacks,
# whether it is being cleared), each tested in its JSON patch.
_QUARANTINE_READS = (
    labels.ANNOTATION_CLAIMED_AT,
    labels.ANNOTATION_CLEARING,
    labels.ANNOTATION_GUARDS,
    *labels.SCALE_DOWN_GUARDS,
)


def _quarantine_ops(
    node: JSON, uid: str, annotation: str, mine: dict[str, str]
) -> list[JSON] | None:
    """The quarantine of ``node``, as the caller's view holds it, as an RFC 6902 JSON patch
    that needs no resourceVersion; None when the view's copy already has a quarantine taint
    (the quarantine is then written whole, by :meth:`NodeVerbs._update`).

    Its ``test`` ops hold every field the quarantine reads to what the view read: the labels
    and annotations by which the job holds the node, the guards, the clearing mark, the
    cordon, and each ownership taint at its place in the list. Its quarantine taint is
    appended to the list, not written with it. So a write meanwhile to any other field — the
    node lifecycle controller's taint on a node gone NotReady, as the job quarantines it —
    no longer fails the patch, where a resourceVersion precondition lost to it (409) and
    cost a round trip; a write to a field the quarantine read fails a test (422). Not read:
    a taint of another key appended meanwhile (a second taint of an ownership key and
    effect, or a second quarantine taint, fails the API's validation, also 422)."""
    taints = _taints(node)
    if any(t.get("key") == labels.TAINT_QUARANTINE for t in taints):
        return None
    marks, notes = _labels(node), _annotations(node)
    ops = [
        _test(_pointer("metadata", "labels", key), marks.get(key))
        for key in (labels.LABEL_JOB_UID, labels.LABEL_ROLE, labels.LABEL_INSTALLATION)
    ]
    if notes:
        ops += [
            _test(_pointer("metadata", "annotations", k), notes.get(k)) for k in _QUARANTINE_READS
        ]
    else:
        ops.append(_test("/metadata/annotations", None))
    ops += [
        _test(_pointer("spec", "taints", str(i)), taint)
        for i, taint in enumerate(taints)
        if taint.get("key") in labels.OWNERSHIP_TAINTS
    ]
    ops.append(_test("/spec/unschedulable", (node.get("spec") or {}).get("unschedulable")))
    if not taints:
        ops.append(_test("/spec/taints", None))
    # The writes, as the merge patch of NodeVerbs.quarantine makes them.
    for key, value in {labels.LABEL_ROLE: NodeRole.QUARANTINED.value, **mine}.items():
        ops.append(_add(_pointer("metadata", "labels", key), value))
    written = {labels.ANNOTATION_QUARANTINE: _over_a_cordon(node, annotation), **_guards(node)}
    if notes:
        ops += [_add(_pointer("metadata", "annotations", k), v) for k, v in written.items()]
        if labels.ANNOTATION_CLEARING in notes:
            ops.append(
                {
                    "op": "remove",
                    "path": _pointer("metadata", "annotations", labels.ANNOTATION_CLEARING),
                }
            )
    else:
        ops.append(_add("/metadata/annotations", written))
    ops.append(_add("/spec/unschedulable", True))
    taint = {"key": labels.TAINT_QUARANTINE, "value": uid, "effect": "NoSchedule"}
    ops.append(_add("/spec/taints/-", taint) if taints else _add("/spec/taints", [taint]))
    return ops


def _role_taints(taints: list[JSON], uid: str, role: NodeRole, spare_taint: bool) -> list[JSON]:
    """The node's taints for ``role``: the pool taint keeps everyone else off; a Preemptible
    spare carries the spare taint instead, which other workloads may choose to tolerate."""
    kept = _without(taints, labels.TAINT_POOL, labels.TAINT_SPARE)
    key = labels.TAINT_SPARE if spare_taint and role == NodeRole.SPARE else labels.TAINT_POOL
    return [*kept, {"key": key, "value": uid, "effect": "NoSchedule"}]


def is_claimable(node: JSON) -> bool:
    """Free for a claim: no Phased mark of any installation (labels, annotations, taints),
    not cordoned."""
    return not marks(node_from_raw(node)) and not (node.get("spec") or {}).get(
        "unschedulable", False
    )


NodeList = Paged[Listed]  # a full list of Nodes as the view keeps them, converted page by page


async def list_nodes(
    kube: KubeClient,
    label_selector: str = "",
    *,
    limit: int = LIST_PAGE,
    pause: Pause | None = None,
    convert: Callable[[JSON], Listed] = converted,
) -> NodeList:
    """Every Node (matching ``label_selector``), paged (:func:`~phased.kube.paging.list_paged`),
    each page converted (``convert``: :func:`~phased.kube.nodeview.converted`, or a view's
    :meth:`~phased.kube.nodeview.NodeView.listed`) as soon as it is read; with ``pause``,
    awaited before each page."""

    async def fetch(query: Query) -> JSON:
        return await kube.request("list", "GET", NODES, resource="nodes", query=query)

    return await list_paged(fetch, convert, label_selector, limit=limit, what="node", pause=pause)


@dataclass(frozen=True)
class Claim:
    """The outcome of a claim: won or not, and the node as last read from the API (``None``
    when it is gone)."""

    won: bool
    fresh: JSON | None


@dataclass(frozen=True)
class HandRelease:
    """What ``phased release-node`` did with one node."""

    released: bool
    # released: "quarantined" or "partially marked"; else why it was left alone
    why: str
    # The marks taken away: label and annotation keys, taints as key:effect
    removed: tuple[str, ...] = ()
    uncordoned: bool = False
    # Left cordoned: its quarantine note says someone had cordoned it before the quarantine
    kept_cordon: bool = False


class NodeVerbs:
    """``on_seen`` is told every node as a change read or wrote it (the fresh read that gave
    up, the patch's answer; ``None`` when it is gone): the newest state the API has shown,
    for the caller's view, before the watch delivers it. ``known`` gives the node as that
    view holds it: a change is first made from it (:meth:`_update`)."""

    def __init__(
        self,
        kube: KubeClient,
        installation: str = "",
        on_seen: Seen | None = None,
        known: Known | None = None,
    ) -> None:
        self._kube = kube
        self.installation = installation
        self._on_seen = on_seen
        self._known = known

    def _seen(self, name: str, node: JSON | None) -> None:
        if self._on_seen is not None:
            self._on_seen(name, node)

    def _held(self, node: JSON, job: JobRef) -> bool:
        """``job`` holds the fresh ``node`` (core.ownership.holds)."""
        return holds(node_from_raw(node), job.uid, self.installation)

    def _mine(self) -> dict[str, str]:
        return {labels.LABEL_INSTALLATION: self.installation} if self.installation else {}

    async def get(self, name: str) -> JSON:
        return await self._kube.request("get", "GET", f"/api/v1/nodes/{name}", resource="nodes")

    async def _update(
        self,
        name: str,
        mutate: Mutation,
        gone: Callable[[], None] | None = None,
        from_view: bool = True,
    ) -> JSON | None:
        """Read, mutate, patch with a resourceVersion precondition; retry lost races.
        ``gone`` is called when the node turns out deleted (its read or its patch 404).

        The first try is made from the node as the caller's view holds it (``known``), as a
        controller writes from its informer's cache: the view keeps every field a change
        reads (labels, our annotations and the autoscalers' guards, taints with their
        ``timeAdded``, the cordon) at the resourceVersion it names, so the precondition
        holds exactly when the API still has that node, and a change is one request, not
        a read and a write. A view that is behind (409) is looked at again: the write that
        beat ours (the node lifecycle controller's taint on a node gone NotReady, as we
        quarantine it) has often reached it by the time the 409 comes back, and then the
        change is made again from it, still one request. A view that has not moved, or on
        which there is nothing to change (the API may know better), is followed by the read.
        Without ``from_view`` the node is read first."""
        tried: set[str] = set()
        cached = self._known(name) if self._known is not None and from_view else None
        while (
            cached is not None
            and cached.resource_version
            and cached.resource_version not in tried
            and len(tried) < _FROM_VIEW
        ):
            patch = mutate(_raw(cached))
            if patch is None:
                break
            tried.add(cached.resource_version)
            landed, written = await self._write(name, cached.resource_version, patch, gone)
            if landed:
                return written
            # 409: the view is behind the API: has the watch brought it on since?
            cached = self._known(name) if self._known is not None else None
        for _ in range(_ATTEMPTS):
            try:
                node = await self.get(name)
            except NotFound:
                self._gone(name, gone)
                return None
            patch = mutate(node)
            if patch is None:
                self._seen(name, node)
                return None
            rv = node["metadata"]["resourceVersion"]
            landed, written = await self._write(name, rv, patch, gone)
            if landed:
                return written
        logger.warning("node %s kept changing under us; will retry on the next reconcile", name)
        return None

    async def _patch(self, name: str, body: JSON | list[JSON], content_type: str) -> JSON:
        return await self._kube.request(
            "patch",
            "PATCH",
            f"/api/v1/nodes/{name}",
            resource="nodes",
            body=body,
            content_type=content_type,
            retry=True,
        )

    async def _write(
        self, name: str, rv: str, patch: JSON, gone: Callable[[], None] | None
    ) -> tuple[bool, JSON | None]:
        """Patch node ``name`` on the precondition that it is still at ``rv``: (True, the
        node as written, or None when it is gone), or (False, None) when it changed (409)."""
        patch.setdefault("metadata", {})["resourceVersion"] = rv
        try:
            written = await self._patch(name, patch, MERGE_PATCH)
        except Conflict:
            return False, None
        except NotFound:
            self._gone(name, gone)
            return True, None
        self._seen(name, written)
        return True, written

    def _gone(self, name: str, gone: Callable[[], None] | None) -> None:
        self._seen(name, None)
        if gone is not None:
            gone()

    async def claim(
        self,
        name: str,
        resource_version: str,
        job: JobRef,
        role: NodeRole,
        now: datetime,
        spare_taint: bool = False,
        clearing: bool = False,
        replaces: str | None = None,
    ) -> Claim:
        """Take a free node for ``job``. ``won`` is False when it is no longer free as the
        decision saw it (another job won, or it changed since); ``fresh`` is then the node as
        the API holds it now, for the caller's view (``None``: deleted, even between the
        claim's read and its patch).

        With ``clearing`` (an active claim of a node with pods of a preemptible class) the
        node is marked ``clearing-since``: decide evicts those pods. ``replaces`` (see
        ``ClaimNode``) is written on it."""
        seen: list[JSON] = []

        def mutate(node: JSON) -> JSON | None:
            seen[:] = [node]
            if self._held(node, job):
                if _labels(node).get(labels.LABEL_ROLE) == role.value and not _guards(node):
                    return None
                return {
                    "metadata": {
                        "labels": {labels.LABEL_ROLE: role.value, **self._mine()},
                        "annotations": _guards(node),
                    }
                }
            if not is_claimable(node):
                return None
            if resource_version and node["metadata"]["resourceVersion"] != resource_version:
                # Changed since the decision: let the next reconcile judge it afresh.
                return None
            taints = _role_taints(_taints(node), job.uid, role, spare_taint)
            annotations = {labels.ANNOTATION_CLAIMED_AT: _iso(now), **_guards(node)}
            if clearing and role == NodeRole.ACTIVE:
                annotations[labels.ANNOTATION_CLEARING] = _iso(now)
            if replaces is not None:
                annotations[labels.ANNOTATION_REPLACES] = replaces
            return {
                "metadata": {
                    "labels": {
                        labels.LABEL_JOB_UID: job.uid,
                        labels.LABEL_JOB: job.name[:63],
                        labels.LABEL_JOB_NAMESPACE: job.namespace,
                        labels.LABEL_ROLE: role.value,
                        **self._mine(),
                    },
                    "annotations": annotations,
                },
                "spec": {"taints": taints},
            }

        # A node deleted after its read (the patch answered 404) is gone: the read is not
        # what the API holds now. Before, it was handed back as ``fresh`` and put the
        # deleted node back into the view.
        result = await self._update(name, mutate, gone=seen.clear)
        if result is not None:
            return Claim(won=self._held(result, job), fresh=result)
        # Given up on a fresh read (the view's copy only ever leads to a patch or a read).
        return Claim(won=False, fresh=seen[0] if seen else None)

    async def set_role(
        self,
        name: str,
        job: JobRef,
        role: NodeRole,
        spare_taint: bool = False,
        replaces: str | None = None,
        now: datetime | None = None,
        stalled: str | None = None,
    ) -> bool:
        """Give a held node ``role``. A node that becomes active is marked
        ``clearing-since`` (``now``): guests that borrowed it must leave (core.guests).
        ``replaces`` (see ``SetNodeRole``) is written on it, and any earlier one cleared.
        ``stalled`` is written on it; without one, a ``stalled`` mark goes when the role
        changes and stays when it does not (a role written again keeps the node's past)."""

        def mutate(node: JSON) -> JSON | None:
            if not self._held(node, job):
                return None
            taints = _role_taints(_taints(node), job.uid, role, spare_taint)
            note = _annotations(node).get(labels.ANNOTATION_REPLACES)
            was = _labels(node).get(labels.LABEL_ROLE)
            guards = _guards(node)
            # The job's name labels and this installation's, as a claim writes them: someone
            # may have taken them off (or the node was claimed before installations)
            names = {
                labels.LABEL_JOB: job.name[:63],
                labels.LABEL_JOB_NAMESPACE: job.namespace,
                **self._mine(),
            }
            named = all(_labels(node).get(k) == v for k, v in names.items())
            mark = _annotations(node).get(labels.ANNOTATION_STALLED)
            if stalled is not None:
                marked: str | None = stalled
            else:
                marked = mark if was == role.value else None
            same = was == role.value and taints == _taints(node) and note == replaces
            if same and named and not guards and mark == marked:
                return None
            annotations: dict[str, str | None] = {**guards}
            if role == NodeRole.ACTIVE and was != role.value and now is not None:
                annotations[labels.ANNOTATION_CLEARING] = _iso(now)
            elif role != NodeRole.ACTIVE and labels.ANNOTATION_CLEARING in _annotations(node):
                annotations[labels.ANNOTATION_CLEARING] = None
            if note != replaces:
                annotations[labels.ANNOTATION_REPLACES] = replaces
            if mark != marked:
                annotations[labels.ANNOTATION_STALLED] = marked
            return {
                "metadata": {
                    "labels": {labels.LABEL_ROLE: role.value, **names},
                    "annotations": annotations,
                },
                "spec": {"taints": taints},
            }

        return await self._update(name, mutate) is not None

    async def release(self, name: str, job: JobRef) -> bool:
        """Give a node back: remove the job's labels, annotations and pool or spare taint.
        An active or spare node loses every ownership mark; a quarantined one keeps its
        role, installation, note, cordon and quarantine taint for a person."""

        def mutate(node: JSON) -> JSON | None:
            if not self._held(node, job):
                return None
            role = _labels(node).get(labels.LABEL_ROLE)
            patch: dict[str, Any] = {
                "metadata": {
                    "labels": {
                        labels.LABEL_JOB_UID: None,
                        labels.LABEL_JOB: None,
                        labels.LABEL_JOB_NAMESPACE: None,
                    },
                    "annotations": {
                        labels.ANNOTATION_CLAIMED_AT: None,
                        labels.ANNOTATION_REPLACES: None,
                        labels.ANNOTATION_CLEARING: None,
                    },
                },
                "spec": {"taints": _without(_taints(node), labels.TAINT_POOL, labels.TAINT_SPARE)},
            }
            if role != NodeRole.QUARANTINED.value:
                # A quarantined node stays cordoned and marked until a person releases it,
                # and kept from the autoscalers till then (a broken node held for a person).
                patch["metadata"]["labels"][labels.LABEL_ROLE] = None
                patch["metadata"]["labels"][labels.LABEL_INSTALLATION] = None
                # Every ownership mark goes: the note of a quarantine a person ended by
                # hand (role set back, taint removed, the note left) too, or the node,
                # its job labels gone, stayed "partially marked", never claimed again.
                patch["metadata"]["annotations"].update(
                    {**dict.fromkeys(labels.OWNERSHIP_ANNOTATIONS), **_unguard(node)}
                )
            return patch

        return await self._update(name, mutate) is not None

    async def quarantine(self, name: str, job: JobRef, annotation: str) -> bool:
        """Cordon the node, mark it quarantined, and record why and when.

        Made first from the view as a JSON patch with no resourceVersion
        (:func:`_quarantine_ops`): a node is quarantined as it fails, just when the node
        lifecycle controller taints it, and a precondition on the whole node lost that race
        (409) and cost a round trip. A test that fails (422: the view is behind on a field
        the quarantine reads) is followed by the read and the merge patch of
        :meth:`_update`."""
        cached = self._known(name) if self._known is not None else None
        ops = None
        if cached is not None and holds(cached, job.uid, self.installation):
            ops = _quarantine_ops(_raw(cached), job.uid, annotation, self._mine())
            if ops is not None:
                try:
                    written = await self._patch(name, ops, JSON_PATCH)
                except NotFound:
                    self._gone(name, None)
                    return False
                except Invalid as exc:
                    logger.debug("node %s is not as the view holds it (%s); reading it", name, exc)
                else:
                    self._seen(name, written)
                    return True

        def mutate(node: JSON) -> JSON | None:
            if not self._held(node, job):
                return None
            taints = _without(_taints(node), labels.TAINT_QUARANTINE)
            taints.append(
                {"key": labels.TAINT_QUARANTINE, "value": job.uid, "effect": "NoSchedule"}
            )
            return {
                "metadata": {
                    "labels": {labels.LABEL_ROLE: NodeRole.QUARANTINED.value, **self._mine()},
                    "annotations": {
                        labels.ANNOTATION_QUARANTINE: _over_a_cordon(node, annotation),
                        labels.ANNOTATION_CLEARING: None,
                        **_guards(node),
                    },
                },
                "spec": {"unschedulable": True, "taints": taints},
            }

        return await self._update(name, mutate, from_view=ops is None) is not None

    async def unquarantine(self, name: str, job: JobRef, role: NodeRole = NodeRole.SPARE) -> bool:
        """Uncordon a healthy quarantined node of the job and give it ``role``."""

        def mutate(node: JSON) -> JSON | None:
            if not self._held(node, job):
                return None
            spec: dict[str, Any] = {"taints": _without(_taints(node), labels.TAINT_QUARANTINE)}
            if not _cordoned_before(node):
                spec["unschedulable"] = None  # Phased's cordon; someone else's stays
            return {
                "metadata": {
                    "labels": {labels.LABEL_ROLE: role.value, **self._mine()},
                    "annotations": {labels.ANNOTATION_QUARANTINE: None, **_guards(node)},
                },
                "spec": spec,
            }

        return await self._update(name, mutate) is not None

    def _refusal(self, node: JSON) -> str | None:
        """Why ``phased release-node`` leaves the fresh ``node`` alone; None: it may clear
        it. It clears a quarantined node, and a node partially marked (marks no job holds
        it by, such as a quarantined node whose ``role`` label a person removed), when its
        marks name this installation or none; never another installation's node, nor one a
        job holds (the operator gives that back when the job lets go)."""
        info = node_from_raw(node)
        if not marks(info):
            return "carries no Phased mark"
        theirs = info.installation
        if theirs is not None and theirs != self.installation:
            return f"marked by installation {theirs}, not {self.installation} (--installation)"
        if info.role == NodeRole.QUARANTINED:
            return None
        uid = info.owner_uid or ""
        if uid and holds(info, uid, self.installation):
            found = _labels(node)
            job = f"{found.get(labels.LABEL_JOB_NAMESPACE, '?')}/{found.get(labels.LABEL_JOB, '?')}"
            return (
                f"held by job {job} (uid {uid}) as {info.role}: the operator gives it back "
                "when the job lets go"
            )
        return None

    async def release_by_hand(self, name: str) -> HandRelease:
        """A person's release (``phased release-node``): remove every Phased mark, and
        uncordon the node when the cordon is Phased's: a quarantined node unless its
        quarantine note says someone had cordoned it before (that cordon is theirs and
        stays, as it does when Phased returns a healed node), a partially marked one only
        when its note says Phased's quarantine cordoned it. :meth:`_refusal` says which
        nodes it takes.

        A node that keeps changing under the patch (a kubelet or a repair tool busy with it
        right after the repair) is tried again after a pause, and if it never settles this
        raises ``Conflict`` — a refusal would send the person looking for a problem that is
        not there.
        """
        done: list[HandRelease] = []

        def mutate(node: JSON) -> JSON | None:
            if self._refusal(node) is not None:
                return None
            found, notes = _labels(node), _annotations(node)
            quarantined = found.get(labels.LABEL_ROLE) == NodeRole.QUARANTINED.value
            note = decode_quarantine(notes.get(labels.ANNOTATION_QUARANTINE))
            cordoned = bool((node.get("spec") or {}).get("unschedulable"))
            ours = note is not None and not note.cordoned_before
            theirs = note is not None and note.cordoned_before
            uncordon = cordoned and (ours or (quarantined and note is None))
            unguard = _unguard(node)
            removed = (
                *(k for k in labels.OWNERSHIP_LABELS if k in found),
                *(k for k in labels.OWNERSHIP_ANNOTATIONS if k in notes),
                *(k for k in unguard if k in notes),
                *(
                    f"{t.get('key')}:{t.get('effect')}"
                    for t in _taints(node)
                    if t.get("key") in labels.OWNERSHIP_TAINTS
                ),
            )
            why = "quarantined" if quarantined else "partially marked"
            done[:] = [HandRelease(True, why, removed, uncordon, cordoned and theirs)]
            # Every ownership mark, from the list ownership reads: one left behind (it was
            # phased.dev/replaces, on a node that had replaced another before it failed)
            # made the node "partially marked", never claimed again.
            spec: dict[str, Any] = {"taints": _without(_taints(node), *labels.OWNERSHIP_TAINTS)}
            if uncordon:
                spec["unschedulable"] = None
            return {
                "metadata": {
                    "labels": dict.fromkeys(labels.OWNERSHIP_LABELS),
                    "annotations": {**dict.fromkeys(labels.OWNERSHIP_ANNOTATIONS), **unguard},
                },
                "spec": spec,
            }

        for pause in (*_RELEASE_PAUSES, None):
            if await self._update(name, mutate) is not None:
                return done[0]
            try:
                why = self._refusal(await self.get(name))
            except NotFound:
                return HandRelease(False, "not found")
            if why is not None:
                return HandRelease(False, why)
            if pause is None:
                break
            await asyncio.sleep(pause * (0.5 + random.random()))  # noqa: S311 - jitter
        raise Conflict(409, "Conflict", f"node {name} kept changing; try again", "patch", "nodes")

    async def release_quarantined(self, name: str) -> bool:
        """:meth:`release_by_hand`, said as whether the node was released."""
        return (await self.release_by_hand(name)).released

    async def start_clearing(self, name: str, job: JobRef, now: datetime) -> bool:
        """Mark an active node the job holds ``clearing-since`` (``now``): workers are about
        to be placed there, and guests that came while none held it must leave (core.guests).
        One already marked keeps its mark, and its deadline."""

        def mutate(node: JSON) -> JSON | None:
            if not self._held(node, job) or labels.ANNOTATION_CLEARING in _annotations(node):
                return None
            if _labels(node).get(labels.LABEL_ROLE) != NodeRole.ACTIVE.value:
                return None
            return {"metadata": {"annotations": {labels.ANNOTATION_CLEARING: _iso(now)}}}

        return await self._update(name, mutate) is not None

    async def finish_clearing(self, name: str, job: JobRef) -> bool:
        """Drop ``clearing-since`` from a held node: no guest is left on it."""

        def mutate(node: JSON) -> JSON | None:
            if not self._held(node, job) or labels.ANNOTATION_CLEARING not in _annotations(node):
                return None
            return {"metadata": {"annotations": {labels.ANNOTATION_CLEARING: None}}}

        return await self._update(name, mutate) is not None
