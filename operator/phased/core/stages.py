"""The order in which a plan's actions are carried out: stages whose actions run together.

A plan lists its actions in the order decide thought of them. Carried out one request after
another, a node failure's answer — cordon the node, delete its worker, promote a spare,
stop the seven survivors, create eight new workers — was some twenty API round trips before
the first new worker existed. Most of them do not depend on each other, so they run in five
stages, each waiting for the one before it:

1. **what workers need**: the rank-0 Service, the report Secret, the checkpoint claim;
2. **pods leave**: deletions and evictions (before any node is released or changes role,
   as a person would stop a worker before giving its node back);
3. **nodes change**: claim, role, quarantine, return from quarantine, release, clearing
   done;
4. **pods come**: the new workers, once their nodes are held and the old ones asked to stop;
5. **spares claimed**: no worker waits for a new spare, so its claim (a look at the node's
   pods, the patch, a second look) comes after the workers.

Within a stage the actions run at once, except two on the same object (a node, a pod):
those keep the plan's order, the second in a wave after the first. Events are not actions
here; the reconciler posts them after the plan.
"""

from __future__ import annotations

from collections.abc import Sequence

from phased.api.v1alpha1 import NodeRole
from phased.core.model import (
    Action,
    ClaimNode,
    CreatePod,
    DeletePod,
    EmitEvent,
    EnsureClaim,
    EnsureSecret,
    EnsureService,
    EvictPod,
    FinishClearing,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
    UnquarantineNode,
)

Wave = tuple[Action, ...]


def stage_of(action: Action) -> int:
    """The stage an action runs in (0 to 4, as in the module docstring)."""
    match action:
        case EnsureService() | EnsureSecret() | EnsureClaim():
            return 0
        case ClaimNode(role=NodeRole.SPARE):
            return 4
        case DeletePod() | EvictPod():
            return 1
        case (
            ClaimNode()
            | SetNodeRole()
            | QuarantineNode()
            | UnquarantineNode()
            | ReleaseNode()
            | FinishClearing()
        ):
            return 2
        case CreatePod():
            return 3
        case _:
            raise ValueError(f"not an action carried out in stages: {action!r}")


def target(action: Action) -> tuple[str, ...]:
    """The object an action changes: two actions on one object never run at once."""
    match action:
        case (
            ClaimNode(node=name)
            | SetNodeRole(node=name)
            | QuarantineNode(node=name)
            | UnquarantineNode(node=name)
            | ReleaseNode(node=name)
            | FinishClearing(node=name)
        ):
            return ("node", name)
        case DeletePod(name=name):
            return ("pod", "", name)  # in the job's namespace
        case EvictPod(namespace=namespace, name=name):
            return ("pod", namespace, name)
        case CreatePod(manifest=manifest):
            return ("pod", "", str((manifest.get("metadata") or {}).get("name", "")))
        case EnsureService():
            return ("service",)
        case EnsureSecret():
            return ("secret",)
        case EnsureClaim():
            return ("claim",)
        case _:
            raise ValueError(f"not an action carried out in stages: {action!r}")


def waves(actions: Sequence[Action]) -> list[Wave]:
    """The plan's actions (events left out) as waves: each runs at once, after the one before.

    A stage is one wave, or several when it changes one object twice. Within a wave the
    plan's order is kept, so the first error in it is the one the plan met first."""
    out: list[Wave] = []
    for stage in range(5):
        wave: list[Action] = []
        seen: set[tuple[str, ...]] = set()
        for action in actions:
            if isinstance(action, EmitEvent) or stage_of(action) != stage:
                continue
            key = target(action)
            if key in seen:
                out.append(tuple(wave))
                wave, seen = [], set()
            wave.append(action)
            seen.add(key)
        if wave:
            out.append(tuple(wave))
    return out
