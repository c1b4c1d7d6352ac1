"""The operator's in-memory index of worker Pods by job, fed by its own Pod watch, by the
answers to its own creates and deletes, and corrected by relists.

A pass reads its job's pods from here rather than by a LIST per pass (:mod:`phased.reconcile`
says when it still lists). What the index holds is what the watch delivered, plus what our
own requests' answers said — which the watch may not have delivered yet — and never goes
back: an event, an answer or a list older than what is held for a pod changes nothing.

- A pod is indexed under its ``phased.dev/job-uid`` label; the watch selects pods carrying
  that label, so a pod whose label is taken away leaves the watch's selection (the API
  server sends ``DELETED`` for it) and leaves the index.
- A deletion is remembered (its resourceVersion) until the next full list, so an answer or a
  late event about the pod from before it cannot bring it back.
- The index is "synced" once a first full list has been applied: until then it cannot say
  that a job has no pods, and the reconciler lists them instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from phased.core import labels
from phased.core.model import PodInfo
from phased.kube.convert import pod_from_raw
from phased.kube.versions import at_least, newer

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Indexed:
    """One pod as the index keeps it: converted once, when it arrives."""

    namespace: str
    job_uid: str
    resource_version: str
    pod: PodInfo

    @property
    def key(self) -> Key:
        return self.namespace, self.pod.name


def indexed(raw: dict[str, Any]) -> Indexed | None:
    """``raw`` as the index keeps it; ``None`` for an object that is no job's pod."""
    meta = raw.get("metadata") or {}
    name, uid = meta.get("name"), (meta.get("labels") or {}).get(labels.LABEL_JOB_UID)
    if not isinstance(name, str) or not name or not isinstance(uid, str) or not uid:
        return None
    return Indexed(
        namespace=str(meta.get("namespace") or ""),
        job_uid=uid,
        resource_version=str(meta.get("resourceVersion") or ""),
        pod=pod_from_raw(raw),
    )


class PodIndex:
    def __init__(self) -> None:
        self._pods: dict[Key, Indexed] = {}
        self._by_job: dict[str, dict[Key, Indexed]] = {}
        self._deleted: dict[Key, str] = {}  # deletions seen since the last full list
        self._synced = False
        self._unlisted = {""}  # namespaces still to be listed before the index is synced

    @property
    def synced(self) -> bool:
        return self._synced

    def of(self, job_uid: str, namespace: str) -> tuple[PodInfo, ...]:
        """The pods of job ``job_uid`` in its ``namespace``, by name (as a LIST orders them)."""
        held = self._by_job.get(job_uid) or {}
        return tuple(held[key].pod for key in sorted(held) if key[0] == namespace)

    def apply(self, event_type: str | None, raw: dict[str, Any]) -> set[str]:
        """One watch event (or, with ``event_type`` None, one of our own requests' answers:
        a pod as created, or as its deletion began); returns the jobs whose pods changed."""
        meta = raw.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        rv = str(meta.get("resourceVersion") or "")
        if event_type == "DELETED":
            return self._drop(key, rv)
        gone = self._deleted.get(key)
        if gone is not None and at_least(gone, rv):
            return set()  # news from before its deletion
        held = self._pods.get(key)
        if held is not None and newer(held.resource_version, rv):
            return set()  # the watch lags an answer already taken
        fresh = indexed(raw)
        if fresh is None:
            # No longer any job's pod (its label taken away): gone from the index.
            return self._drop(key, rv) if held is not None else set()
        self._deleted.pop(key, None)
        return self._put(fresh)

    def vanished(self, namespace: str, name: str) -> set[str]:
        """Our own request found no such pod (``404``): it is gone, whatever was held."""
        key = (namespace, name)
        held = self._pods.get(key)
        return self._drop(key, held.resource_version if held is not None else "")

    def replace(
        self, entries: Iterable[Indexed], list_version: str = "", namespace: str = ""
    ) -> set[str]:
        """Replace what the index holds of ``namespace`` ("": of every namespace) with a full
        list of it taken at ``list_version``; return the jobs whose pods changed. Never
        rolled back: a pod held at a later version than the list's stays as held, one the
        list lacks stays when held at a later version than the list (it came after), and one
        whose deletion came after the list stays deleted. The index is synced once every
        namespace it is to hold has been listed (:meth:`expect`)."""

        def covered(key: Key) -> bool:
            return not namespace or key[0] == namespace

        fresh: dict[Key, Indexed] = {k: e for k, e in self._pods.items() if not covered(k)}
        for entry in entries:
            mine = self._pods.get(entry.key)
            gone = self._deleted.get(entry.key)
            if mine is not None and newer(mine.resource_version, entry.resource_version):
                fresh[entry.key] = mine
            elif gone is not None and at_least(gone, entry.resource_version):
                continue
            else:
                fresh[entry.key] = entry
        for key, mine in self._pods.items():
            if key in fresh or not covered(key):
                continue
            if list_version and newer(mine.resource_version, list_version):
                fresh[key] = mine
        changed: set[str] = set()
        for key in set(fresh) | set(self._pods):
            now, before = fresh.get(key), self._pods.get(key)
            if _differ(now, before):
                changed.update(e.job_uid for e in (now, before) if e is not None)
        self._pods = {}
        self._by_job = {}
        for entry in fresh.values():
            self._put(entry)
        self._deleted = {
            key: rv
            for key, rv in self._deleted.items()
            if not covered(key) or (list_version and newer(rv, list_version))
        }
        self._unlisted.discard(namespace)
        self._synced = not self._unlisted
        return changed

    def expect(self, namespaces: Iterable[str]) -> None:
        """The index is to hold these namespaces ("": every one), each by its own list: it is
        synced once each has been listed."""
        self._unlisted = set(namespaces) or {""}
        self._synced = False

    def _put(self, entry: Indexed) -> set[str]:
        held = self._pods.get(entry.key)
        if held is not None and held.pod == entry.pod and held.job_uid == entry.job_uid:
            self._pods[entry.key] = self._by_job[held.job_uid][entry.key] = entry
            return set()
        changed = {entry.job_uid}
        if held is not None and held.job_uid != entry.job_uid:
            changed |= self._forget(held)
        self._pods[entry.key] = entry
        self._by_job.setdefault(entry.job_uid, {})[entry.key] = entry
        return changed

    def _drop(self, key: Key, rv: str) -> set[str]:
        held = self._pods.get(key)
        if held is not None and newer(held.resource_version, rv):
            return set()  # a deletion from before what is held (the name made again since)
        gone = self._deleted.get(key)
        if rv and (gone is None or newer(rv, gone)):
            self._deleted[key] = rv
        return self._forget(held) if held is not None else set()

    def _forget(self, held: Indexed) -> set[str]:
        self._pods.pop(held.key, None)
        pods = self._by_job.get(held.job_uid)
        if pods is not None:
            pods.pop(held.key, None)
            if not pods:
                del self._by_job[held.job_uid]
        return {held.job_uid}


def _differ(a: Indexed | None, b: Indexed | None) -> bool:
    if a is None or b is None:
        return a is not b
    return a.job_uid != b.job_uid or a.pod != b.pod
