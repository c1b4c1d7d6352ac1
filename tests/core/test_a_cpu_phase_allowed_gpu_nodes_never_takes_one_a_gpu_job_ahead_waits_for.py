"""A CPU phase allowed to run on GPU nodes (``cpu.allowGpuNodes``) waits in the same line as
everyone else: the free GPU nodes a GPU job ahead of it waits for are kept for that job, as
the same GPU type's jobs behind it would keep them. Reservations are counted per GPU type,
and a CPU phase's candidates span every type, so before this it counted only the CPU jobs
ahead and took the GPU nodes from under a GPU job ahead of it."""

from datetime import timedelta

from phased.core.decide import decide
from phased.core.model import Claimant, ClaimNode, NodeInfo
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import JOB, T0, node, nodes, of_type, phase, snapshot, spec

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))
PREP = spec(phase("prep", 4, 4, gpu_types=[]))
AHEAD = Claimant("uid-gpu", priority=5, created=T0, wants={"H100": 4})


def _cluster(h100: int, cpu: int) -> list[NodeInfo]:
    return [*nodes("h", h100), *(node(f"x{i:02d}", gpu=None) for i in range(cpu))]


def _claimed(nodes_: list[NodeInfo], *waiting: Claimant, settings: Settings = ALLOW) -> list[str]:
    plan = decide(snapshot(PREP, nodes_, waiting=waiting), settings, T0)
    return sorted(c.node for c in of_type(plan, ClaimNode))


def test_the_gpu_nodes_a_gpu_job_ahead_waits_for_are_not_taken() -> None:
    plan = decide(snapshot(PREP, _cluster(h100=4, cpu=2), waiting=(AHEAD,)), ALLOW, T0)
    assert of_type(plan, ClaimNode) == []  # 2 CPU nodes + (4 H100 - 4 kept) < 4
    short = next(c for c in plan.status.conditions if c.type == "CapacityShort")
    assert "4 free ones are kept for jobs ahead" in short.message
    assert plan.status.waiting_for == {"": 4}


def test_it_takes_only_the_gpu_nodes_beyond_what_the_gpu_job_ahead_needs() -> None:
    claimed = _claimed(_cluster(h100=6, cpu=2), AHEAD)
    assert len(claimed) == 4
    assert {"x00", "x01"} <= set(claimed)
    assert len([n for n in claimed if n.startswith("h")]) == 2  # 4 H100 left for the job ahead


def test_a_gpu_job_behind_it_keeps_nothing_from_it() -> None:
    behind = Claimant(
        "uid-gpu", priority=0, created=JOB.created + timedelta(hours=1), wants={"H100": 4}
    )
    assert len(_claimed(_cluster(h100=4, cpu=0), behind)) == 4


def test_cpu_jobs_ahead_keep_theirs_from_what_gpu_jobs_ahead_left() -> None:
    cpu_ahead = Claimant("uid-cpu", priority=5, created=T0, wants={"": 2})
    # 4 CPU + 6 H100 free: 4 H100 kept for the GPU job, 2 of the rest for the CPU job.
    assert len(_claimed(_cluster(h100=6, cpu=4), AHEAD, cpu_ahead)) == 4
    assert _claimed(_cluster(h100=5, cpu=4), AHEAD, cpu_ahead) == []  # 5 left, 2 kept: 3 < 4


def test_without_the_setting_a_cpu_phase_never_reaches_gpu_nodes_at_all() -> None:
    claimed = _claimed(_cluster(h100=4, cpu=4), AHEAD, settings=Settings())
    assert claimed == ["x00", "x01", "x02", "x03"]
