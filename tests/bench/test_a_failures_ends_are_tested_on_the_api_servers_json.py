"""The scale bench tests a failure's ends (the node NotReady and cordoned, a worker pod not
among the gang's before) on objects as the API server sent them: plain dicts, read off its
watches without the client's models (``bench/moments.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import scale  # noqa: E402


def _node(*conditions: tuple[str, str], unschedulable: bool | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {
        "metadata": {"name": "n1"},
        "status": {"conditions": [{"type": t, "status": s} for t, s in conditions]},
    }
    if unschedulable is not None:
        node["spec"] = {"unschedulable": unschedulable}
    return node


def test_a_node_is_not_ready_only_when_its_ready_condition_says_false() -> None:
    assert scale._not_ready(_node(("MemoryPressure", "False"), ("Ready", "False")))
    assert not scale._not_ready(_node(("MemoryPressure", "False"), ("Ready", "True")))
    assert not scale._not_ready(_node(("Ready", "Unknown")))
    assert not scale._not_ready({"metadata": {"name": "n1"}})  # no status yet


def test_a_node_is_cordoned_once_its_spec_says_unschedulable() -> None:
    assert scale._cordoned(_node(unschedulable=True))
    assert not scale._cordoned(_node(unschedulable=False))
    assert not scale._cordoned(_node())  # no spec field: schedulable


def test_the_replacement_is_a_pod_the_gang_did_not_have() -> None:
    new = scale._not_among({"u1", "u2"})
    assert not new({"metadata": {"uid": "u1"}})
    assert new({"metadata": {"uid": "u3"}})
