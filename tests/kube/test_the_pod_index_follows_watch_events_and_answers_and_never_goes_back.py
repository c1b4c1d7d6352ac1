"""The pod index (kube/podindex.py) a pass reads its job's pods from: fed by the Pod watch's
events and by the answers to the operator's own creates and deletes, whichever comes first,
and replaced by full lists. Whatever order they arrive in, it never goes back: an event, an
answer or a list older than what it holds for a pod changes nothing, and a pod whose
deletion it saw does not come back from news older than the deletion."""

from __future__ import annotations

from typing import Any

from phased.core import labels
from phased.core.model import PodPhase
from phased.kube.podindex import PodIndex, indexed


def pod(
    name: str, rv: int, *, uid: str = "u1", ns: str = "ml", phase: str = "Running", **meta: Any
) -> dict[str, Any]:
    tags = {labels.LABEL_JOB_UID: uid} if uid else {}
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "resourceVersion": str(rv),
            "labels": tags,
            **meta,
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": phase},
    }


def phases(index: PodIndex, uid: str = "u1", ns: str = "ml") -> dict[str, PodPhase]:
    return {p.name: p.phase for p in index.of(uid, ns)}


def listed(*raws: dict[str, Any]) -> list[Any]:
    return [indexed(raw) for raw in raws]


def test_pods_are_kept_by_job_and_namespace_in_name_order() -> None:
    index = PodIndex()
    for raw in (pod("w-2", 5), pod("w-1", 6), pod("w-9", 7, uid="u2"), pod("w-3", 8, ns="other")):
        index.apply("ADDED", raw)
    assert [p.name for p in index.of("u1", "ml")] == ["w-1", "w-2"]
    assert [p.name for p in index.of("u2", "ml")] == ["w-9"]
    # The same label in another namespace is not the job's (a pass listed in its namespace).
    assert [p.name for p in index.of("u1", "other")] == ["w-3"]
    assert index.of("u3", "ml") == ()


def test_a_change_wakes_its_job_and_news_already_held_wakes_nothing() -> None:
    index = PodIndex()
    assert index.apply(None, pod("w-0", 10, phase="Pending")) == {"u1"}  # our create's answer
    assert index.apply("ADDED", pod("w-0", 10, phase="Pending")) == set()  # its watch event
    assert index.apply("MODIFIED", pod("w-0", 11, phase="Running")) == {"u1"}


def test_an_event_older_than_an_answer_already_taken_keeps_the_answer() -> None:
    index = PodIndex()
    index.apply(None, pod("w-0", 20, deletionTimestamp="2026-01-01T00:00:30Z"))  # our delete
    assert index.apply("MODIFIED", pod("w-0", 18, phase="Running")) == set()
    (held,) = index.of("u1", "ml")
    assert held.stop_by is not None


def test_a_deleted_pod_does_not_come_back_from_older_news_but_its_name_made_again_does() -> None:
    index = PodIndex()
    index.apply("ADDED", pod("w-0", 10))
    assert index.apply("DELETED", pod("w-0", 30)) == {"u1"}
    assert index.apply(None, pod("w-0", 25)) == set()  # an answer sent before the deletion
    assert index.apply("MODIFIED", pod("w-0", 30)) == set()
    assert phases(index) == {}
    assert index.apply(None, pod("w-0", 40, phase="Pending")) == {"u1"}
    assert phases(index) == {"w-0": PodPhase.PENDING}
    # The older deletion's event coming after the pod made again changes nothing.
    assert index.apply("DELETED", pod("w-0", 30)) == set()
    assert phases(index) == {"w-0": PodPhase.PENDING}


def test_a_pod_no_delete_finds_is_gone_at_once() -> None:
    index = PodIndex()
    index.apply("ADDED", pod("w-0", 10))
    assert index.vanished("ml", "w-0") == {"u1"}
    assert phases(index) == {}
    assert index.apply("MODIFIED", pod("w-0", 10)) == set()  # a late event of the same version


def test_a_pod_whose_job_label_is_taken_away_or_changed_leaves_the_job() -> None:
    index = PodIndex()
    index.apply("ADDED", pod("w-0", 10))
    index.apply("ADDED", pod("w-1", 11))
    assert index.apply("MODIFIED", pod("w-0", 12, uid="u2")) == {"u1", "u2"}
    assert phases(index) == {"w-1": PodPhase.RUNNING}
    assert phases(index, "u2") == {"w-0": PodPhase.RUNNING}
    # Out of the watch's selection: the server says DELETED; an answer without the label
    # (our own delete of a pod someone relabelled) takes it out as well.
    assert index.apply(None, pod("w-1", 13, uid="")) == {"u1"}
    assert phases(index) == {}


def test_a_full_list_replaces_what_the_watch_missed_and_keeps_what_came_after_it() -> None:
    index = PodIndex()
    assert not index.synced
    assert index.replace(listed(pod("ghost", 5), pod("w-0", 6)), "10") == {"u1"}
    assert index.synced
    index.apply("ADDED", pod("late", 12))  # created after the next list's snapshot
    index.apply("MODIFIED", pod("w-0", 13, phase="Failed"))  # changed after it
    index.apply("DELETED", pod("w-1", 14))  # deleted after it (the list still has it)
    changed = index.replace(listed(pod("w-0", 6), pod("w-1", 9), pod("w-2", 11, uid="u2")), "11")
    # The ghost (deleted while no watch ran: no event) is gone; the rest is as the watch had
    # it; w-2 is new to the index.
    assert phases(index) == {"late": PodPhase.RUNNING, "w-0": PodPhase.FAILED}
    assert phases(index, "u2") == {"w-2": PodPhase.RUNNING}
    assert changed == {"u1", "u2"}
    # A list that finds everything as the index has it changes nothing and wakes nobody.
    same = listed(pod("late", 12), pod("w-0", 13, phase="Failed"), pod("w-2", 11, uid="u2"))
    assert index.replace(same, "20") == set()


def test_an_operator_limited_to_namespaces_lists_each_and_a_list_replaces_only_its_own() -> None:
    index = PodIndex()
    index.expect(["ml", "research"])
    index.replace(listed(pod("w-0", 5)), "10", "ml")
    assert not index.synced  # research not listed yet: it cannot say a job there has no pods
    index.replace(listed(pod("r-0", 6, ns="research", uid="u2")), "11", "research")
    assert index.synced
    # A relist of one namespace says nothing of the other's pods.
    assert index.replace([], "20", "research") == {"u2"}
    assert phases(index) == {"w-0": PodPhase.RUNNING}
    assert phases(index, "u2", "research") == {}
