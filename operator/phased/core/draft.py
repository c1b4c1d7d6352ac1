"""The working state of one decide call: actions so far, the status being built, roles.

A :class:`Draft` is mutable and lives only inside :func:`phased.core.decide.decide`; what
leaves decide is the frozen :class:`~phased.core.model.Plan` made by :meth:`Draft.plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from phased.api.v1alpha1 import (
    Condition,
    FailureRecord,
    NodeRole,
    Phase,
    PhaseRecord,
    TrainingJobSpec,
    TrainingJobStatus,
)
from phased.core import conditions as conds
from phased.core.edits import carried_record
from phased.core.model import (
    Action,
    ClaimNode,
    DeletePod,
    EmitEvent,
    NodeInfo,
    NodeSet,
    Plan,
    PodInfo,
    Snapshot,
)
from phased.core.occupancy import blocking
from phased.core.ownership import holds
from phased.core.podlabels import trusted
from phased.core.settings import Settings
from phased.core.tolerations import Toleration, of_pod_spec

NORMAL = "Normal"
WARNING = "Warning"


@dataclass
class Draft:
    snap: Snapshot
    spec: TrainingJobSpec
    settings: Settings
    now: datetime
    status: TrainingJobStatus
    records: list[PhaseRecord]
    ledger: list[FailureRecord]
    conditions: tuple[Condition, ...]
    nodes: NodeSet  # the snapshot's, never changed
    roles: dict[str, NodeRole]  # the job's nodes, roles as they will be after the actions
    pods: tuple[PodInfo, ...]  # the job's pods whose labels Phased could have written
    actions: list[Action] = field(default_factory=list)
    wake: list[float] = field(default_factory=list)
    waiting: bool = False
    breaker_nodes: set[str] = field(default_factory=set)  # failed, but held by the breaker
    suspect_nodes: set[str] = field(default_factory=set)
    # Actives swapped out this pass because a worker never started on them -> the mark
    # written on each (phased.core.recovery.stalled_nodes reads it back from the node later).
    stalled: dict[str, str] = field(default_factory=dict)
    # Nodes failing as flapping in the trouble they are in now -> when it began: marked as
    # one that stopped the workers only if the failure is answered (core.recovery).
    flap_troubles: dict[str, datetime] = field(default_factory=dict)
    awaiting_final: bool = False  # the phase's workers are done; its final checkpoint is due
    # Ledger ids of failures answered this pass before the phase had made any worker.
    unstarted_failures: set[int] = field(default_factory=set)
    # Nodes not held by the job on which others' pods run (seen in snap.node_pods): never
    # claimed. Node name -> the pods, "namespace/name", for the event.
    occupied: dict[str, list[str]] = field(default_factory=dict)
    # The name the phase the job waits to start had in the written status, when an edit
    # renamed it and its record followed its place (phased.core.edits.carried_record).
    carried_from: str = ""
    # The unheld candidates (phased.core.sizing._unheld) by the set of nodes the job holds
    # when they were looked for: the nodes and the pods seen on them do not change in a pass.
    unheld_memo: dict[frozenset[str], tuple[NodeInfo, ...]] = field(default_factory=dict)
    # The tolerations of each phase's workers by its index (the spec does not change in a
    # pass; a pass asked a dozen times, each building the worker's pod spec).
    tolerations_memo: dict[int, tuple[Toleration, ...]] = field(default_factory=dict)
    # ... and what they are taken from, whatever the job holds: the nodes in the operator's
    # nodeSelector with no pod of others seen and no fault condition (walked once a pass).
    claimable: tuple[NodeInfo, ...] | None = None

    @classmethod
    def for_snapshot(
        cls, snap: Snapshot, spec: TrainingJobSpec, settings: Settings, now: datetime
    ) -> Draft:
        status = snap.status
        # The spec may have been edited to fewer phases (even after the job finished), and a
        # person with status access may write anything: the index always names a phase.
        index = min(max(0, status.phase_index), len(spec.phases) - 1)
        if index != status.phase_index:
            status = status.model_copy(update={"phase_index": index})
        if status.spares_wanted:
            # Said anew by each pass that refills a running generation's spares and is still
            # short of them (sizing.refill_spares); any other pass (waiting, finished,
            # failed, the breaker holding) leaves the line for spares.
            status = status.model_copy(update={"spares_wanted": {}})
        by_name = {r.name: r for r in status.phases}
        records = [by_name.get(p.name) or PhaseRecord(name=p.name) for p in spec.phases]
        carried = carried_record(spec, status, snap.pods)  # the waited phase, renamed
        carried_from = status.phases[index].name if carried is not None else ""
        if carried is not None:
            records[index] = carried
        running = (status.phase or "", status.world_size)
        # The job's nodes are those carrying its job-uid label that it holds: found by the
        # label (the node set keeps the names by it), not by asking every node of the cluster.
        roles: dict[str, NodeRole] = {}
        for name in sorted(snap.nodes.labelled(snap.job.uid)):
            node = snap.nodes[name]
            if holds(node, snap.job.uid, settings.installation) and node.role is not None:
                roles[name] = node.role
        occupied = {
            name: [p.key + (" (terminating)" if p.deleting else "") for p in busy]
            for name, pods in snap.node_pods.items()
            if name not in roles and (busy := blocking(pods, settings))
        }
        return cls(
            snap=snap,
            spec=spec,
            settings=settings,
            now=now,
            status=status,
            records=records,
            ledger=list(status.failures),
            conditions=tuple(status.conditions),
            nodes=snap.nodes,
            roles=roles,
            pods=tuple(p for p in snap.pods if trusted(spec, p, running)),
            occupied=occupied,
            carried_from=carried_from,
        )

    # --- status -----------------------------------------------------------------------------

    def set(self, **fields: Any) -> None:
        self.status = self.status.model_copy(update=fields)

    @property
    def index(self) -> int:
        return self.status.phase_index

    @property
    def phase(self) -> Phase:
        return self.spec.phases[self.index]

    @property
    def tolerations(self) -> tuple[Toleration, ...]:
        """The tolerations of the phase's workers, as its templates set them: which taints
        a node may carry and still take one (:mod:`phased.core.tolerations`)."""
        found = self.tolerations_memo.get(self.index)
        if found is None:
            found = of_pod_spec(self.spec.worker_pod(self.phase).spec)
            self.tolerations_memo[self.index] = found
        return found

    @property
    def record(self) -> PhaseRecord:
        return self.records[self.index]

    def update_record(self, **fields: Any) -> None:
        self.records[self.index] = self.record.model_copy(update=fields)

    def condition(
        self,
        kind: str,
        status: bool,
        reason: str,
        message: str,
        event: str | None = None,
        event_reason: str | None = None,
    ) -> bool:
        """Set a condition; on a flip to True emit an event of type ``event`` (if given),
        whose reason is ``event_reason`` or else the condition's type."""
        change = conds.set_condition(
            self.conditions, kind, status, reason, message, self.now, self.snap.job.generation
        )
        self.conditions = change.conditions
        if change.flipped and status and event is not None:
            self.event(event, event_reason or kind, message)
        return change.flipped

    def is_true(self, kind: str) -> bool:
        return conds.is_true(self.conditions, kind)

    # --- actions ----------------------------------------------------------------------------

    def act(self, action: Action) -> None:
        """Queue ``action``; a second delete of the same pod in one plan is dropped."""
        if isinstance(action, DeletePod) and action.name in self.deleted_pods():
            return
        self.actions.append(action)

    def deleted_pods(self) -> frozenset[str]:
        return frozenset(a.name for a in self.actions if isinstance(a, DeletePod))

    def event(self, kind: str, reason: str, message: str) -> None:
        self.actions.append(EmitEvent(type=kind, reason=reason, message=message))

    def later(self, seconds: float | None) -> None:
        if seconds is not None:
            self.wake.append(max(0.0, seconds))

    # --- the pool ---------------------------------------------------------------------------

    def held(self, role: NodeRole) -> list[NodeInfo]:
        return sorted(
            (self.nodes[n] for n, r in self.roles.items() if r == role and n in self.nodes),
            key=lambda n: n.name,
        )

    def legacy_active(self) -> tuple[str, ...]:
        """The active nodes the job holds with no installation label: claimed by a Phased
        from before installations (``holds`` accepted them by their ``claimed-at``). A
        worker's affinity names them (:class:`phased.core.workers.Worker`)."""
        uid, installation = self.snap.job.uid, self.settings.installation
        return tuple(
            n.name
            for n in self.held(NodeRole.ACTIVE)
            if n.installation is None and holds(n, uid, installation)
        )

    def claiming_active(self) -> bool:
        return any(isinstance(a, ClaimNode) and a.role == NodeRole.ACTIVE for a in self.actions)

    def phase_pods(self, name: str | None = None) -> list[PodInfo]:
        wanted = name if name is not None else self.phase.name
        return [p for p in self.pods if p.phase_name == wanted]

    # --- the result -------------------------------------------------------------------------

    def plan(self, finished: bool = False) -> Plan:
        status = self.status.model_copy(
            update={
                "phases": list(self.records),
                "failures": list(self.ledger),
                "conditions": list(self.conditions),
                "observed_generation": self.snap.job.generation,
            }
        )
        return Plan(
            actions=tuple(self.actions),
            status=status,
            requeue_after=min(self.wake) if self.wake else None,
            finished=finished,
        )
