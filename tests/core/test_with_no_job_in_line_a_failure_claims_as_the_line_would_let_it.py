"""With no job in line, a pass looks for the free nodes it may claim without asking what the
line keeps (``sizing._available``): there is nothing to keep. It claims what it would claim
with a line that keeps it nothing — a job behind it — and still never a free node on which
one of its ``gpuFaultConditions`` is True, however near its pool."""

from datetime import timedelta

import pytest

from phased.api.v1alpha1 import (
    JobState,
    NodeRole,
    PhaseRecord,
    PhaseState,
    TrainingJobStatus,
)
from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, NodeCondition, Plan
from phased.core.times import format_time
from tests.core.builders import (
    SETTINGS,
    T0,
    at,
    node,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)

A, S = NodeRole.ACTIVE, NodeRole.SPARE
XID = NodeCondition("GPUXidError", "True", at(-5), message="XID 79")


def _failure_pass(waiting: tuple[Claimant, ...], spares: int) -> Plan:
    """Three workers on a0..a2 (rack r1), one spare; a0 NotReady past its grace. Free: 20
    nodes over five racks and two blocks, and ``f-near`` in the pool's rack with a GPU
    fault (its name sorts first)."""
    held = [owned(node(f"a{i}"), A) for i in range(3)] + [owned(node("s0"), S)]
    held[0] = with_ready(held[0], False, at(-60))
    free = [node(f"f{i:02d}", rack=f"r{i % 5}", block=f"b{i % 2}") for i in range(20)]
    free.append(node("f-near", extra=(XID,)))
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=3, node_name=f"a{i}") for i in range(3)]
    started = format_time(T0 - timedelta(hours=1))
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=3,
        pool={"active": ["a0", "a1", "a2"], "spares": ["s0"]},
        phases=[PhaseRecord(name="train", state=PhaseState.RUNNING, start_time=started)],
    )
    the_spec = spec(phase("train", 3, 3), spares=spares)
    snap = snapshot(the_spec, [*held, *free], pods, status, service_exists=True, waiting=waiting)
    return decide(snap, SETTINGS, T0)


def _claims(plan: Plan) -> list[tuple[str, NodeRole]]:
    return [(a.node, a.role) for a in plan.actions if isinstance(a, ClaimNode)]


BEHIND = Claimant("u-behind", priority=-10, created=T0, wants={"H100": 4})


@pytest.mark.parametrize("spares", [1, 3])
def test_a_failure_with_no_job_in_line_claims_what_a_line_keeping_nothing_lets_it(spares):
    alone = _claims(_failure_pass((), spares))
    assert alone == _claims(_failure_pass((BEHIND,), spares))
    # The refill: the nearest free nodes (rack r1, block b1: f01, f11), never the faulting one.
    assert alone[:2] == [("f01", S), ("f11", S)][: len(alone)]
    assert len(alone) == spares
    assert "f-near" not in [name for name, _ in alone]
