"""Whose node is it? Phased takes a node only when no one has marked it, and calls a node
its own only when the marks are the ones it writes.

The marks (:mod:`phased.core.labels`, ``OWNERSHIP_*``) are the labels ``job-uid``, ``job``,
``job-namespace``, ``role`` and ``installation``, the annotations ``claimed-at``,
``quarantine`` and ``clearing-since``, and the taints ``pool``, ``spare`` and
``quarantined``, all under ``phased.dev/``. For one installation (``settings.installation``)
a node is:

* **unmarked** — it carries none of them. Only such a node may be claimed (and only if it
  is also free and unoccupied: :mod:`phased.core.pools`, :mod:`phased.core.occupancy`);
* **ours** — ``job-uid``, ``job``, ``job-namespace``, a valid ``role`` and
  ``installation`` equal to ours, as a claim writes them together, and every ``pool``,
  ``spare`` or ``quarantined`` taint it carries has the value Phased gives them, that same
  UID, a ``quarantined`` taint only with the quarantined role (:func:`agree`). Held by the
  job of that UID; released as an orphan when that job is provably gone;
* **left alone**, with a reason, otherwise:

  - ``OtherInstallation``: another installation's node, whatever else it carries;
  - ``NoInstallation``: a consistent set of marks but no ``installation`` label (written
    by a Phased from before installations, or by hand). The job whose UID it names keeps
    it (a UID is assigned by the API server and cannot be guessed), but no job claims it
    and it is never released as an orphan: no one can prove whose it is;
  - ``PartialMarks``: some marks without a consistent set (e.g. ``job`` and ``role`` with
    no ``job-uid``, a pool taint alone, a ``job-uid`` label naming another UID than the
    node's pool taint, or a quarantine taint on an active or spare node: a person edited
    one of them). Phased did not write this; ``phased release-node`` clears it when no
    job holds it and its marks name this installation or none;
  - ``Quarantined``: a quarantined node whose job let go of it: it waits for a person
    (``phased release-node``).

A job *holds* a node when its ``job-uid`` is the job's UID, its taints agree with it, its
``role`` is valid, and its ``installation`` is ours — or absent on a node that also carries
the ``claimed-at`` a claim writes (the ``NoInstallation`` case above: a pool claimed before
installations survives an upgrade; a hand-made copy of the labels alone does not make a
node the job's).

Anything left alone is surfaced, never touched: a Warning event on a job that wanted such a
node, the ``phased_nodes_left_alone`` metric, and ``kubectl get nodes`` with the labels as
columns (docs/design.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import NodeInfo

_ROLES = frozenset(r.value for r in NodeRole)


class LeftAlone(StrEnum):
    """Why Phased will not claim, release or adopt a node. Also the metric's ``reason``."""

    OTHER_INSTALLATION = "OtherInstallation"
    NO_INSTALLATION = "NoInstallation"
    PARTIAL_MARKS = "PartialMarks"
    QUARANTINED = "Quarantined"
    RUNNING_PODS = "RunningPods"  # not a mark: pods of others run there (core.occupancy)


class Kind(StrEnum):
    UNMARKED = "Unmarked"
    OURS = "Ours"
    LEFT_ALONE = "LeftAlone"


@dataclass(frozen=True)
class Ownership:
    kind: Kind
    uid: str | None = None  # the job UID the marks name (ours, or NoInstallation)
    reason: LeftAlone | None = None

    @property
    def unmarked(self) -> bool:
        return self.kind == Kind.UNMARKED


def marks(node: NodeInfo) -> frozenset[str]:
    """The ownership marks ``node`` carries (label, annotation and taint keys)."""
    return node.marks


def agree(node: NodeInfo) -> bool:
    """The node's ``pool``, ``spare`` and ``quarantined`` taints all carry the UID its
    ``job-uid`` label names, and a ``quarantined`` taint sits only on a node whose role is
    quarantined, as Phased writes them. A label edited to another UID (another job's, or no
    job's) leaves the taint naming the job that claimed the node: such a node is no one's,
    neither the job the label names (its workers tolerate their own pool taint only) nor the
    one the taint names (its label no longer selects its workers). A quarantined node whose
    role a person set back to active or spare, the taint left on, is no one's either: the
    workers do not tolerate that taint and would wait Pending there."""
    uid = node.owner_uid
    quarantined = node.labels.get(labels.LABEL_ROLE) == NodeRole.QUARANTINED.value
    return all(
        t.value == uid and (quarantined or t.key != labels.TAINT_QUARANTINE)
        for t in node.taints
        if t.key in labels.OWNERSHIP_TAINTS
    )


def ownership(node: NodeInfo, installation: str) -> Ownership:
    """What ``node``'s marks say, for the installation named ``installation``."""
    if not marks(node):
        return Ownership(Kind.UNMARKED)
    theirs = node.labels.get(labels.LABEL_INSTALLATION)
    if theirs is not None and theirs != installation:
        return Ownership(Kind.LEFT_ALONE, node.owner_uid, LeftAlone.OTHER_INSTALLATION)
    uid = node.owner_uid
    role = node.labels.get(labels.LABEL_ROLE)
    if not uid:
        if role == NodeRole.QUARANTINED.value:
            return Ownership(Kind.LEFT_ALONE, None, LeftAlone.QUARANTINED)
        return Ownership(Kind.LEFT_ALONE, None, LeftAlone.PARTIAL_MARKS)
    named = bool(node.labels.get(labels.LABEL_JOB)) and bool(
        node.labels.get(labels.LABEL_JOB_NAMESPACE)
    )
    if role not in _ROLES or not named or not agree(node):
        return Ownership(Kind.LEFT_ALONE, uid, LeftAlone.PARTIAL_MARKS)
    if theirs is None:
        return Ownership(Kind.LEFT_ALONE, uid, LeftAlone.NO_INSTALLATION)
    return Ownership(Kind.OURS, uid)


def holds(node: NodeInfo, job_uid: str, installation: str) -> bool:
    """The job with ``job_uid`` holds ``node`` (module docstring)."""
    if not job_uid or node.owner_uid != job_uid:
        return False  # most nodes, asked of each one a pass: the one cheap test first
    theirs = node.installation
    legacy = theirs is None and labels.ANNOTATION_CLAIMED_AT in node.annotations
    return agree(node) and node.role is not None and (theirs == installation or legacy)
