"""CPU phases allowed GPU nodes (``cpu.allowGpuNodes``) and GPU phases in line over a cluster
of CPU and GPU nodes, running jobs short of spares among them, never leave a free node to one
another for ever, and keep every rule of the line of jobs with an operator killed mid-pass.

As :mod:`test_jobs_in_line_with_an_operator_killed_mid_pass_never_share_lose_or_starve_a_node`
(its simulator and checks, reused), but each job's phases drawn CPU-only or GPU, with its
spares, its priority, and a cluster of CPU and H100 nodes; the happenings also take the spare
nodes of a job (it runs short of spares, ``status.sparesWanted``, in line at its place). Then
every node heals, and the jobs pass, their workers left running, until nothing moves. Then
no mutual leaving: a free node some job in line could take (a waiting job its phase's type,
a running one short of spares its spares') stays free only while a waiting job that could
take it waits for more nodes than are free for it (the nodes kept for it, as the line says).
Before, with each of three rules broken, a CPU phase short of spares, a waiting GPU job and
a GPU job's refill each left the free GPU nodes to another, and they sat idle for ever.
Then every job runs to its end, as there.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from phased.api.v1alpha1 import JobState, NodeRole, Phase
from phased.core.model import ReleaseNode
from phased.core.settings import CPUSettings, Settings
from tests.core.builders import T0, Cluster, node, phase, spec, with_ready
from tests.hostile.test_jobs_in_line_with_an_operator_killed_mid_pass_never_share_lose_or_starve_a_node import (  # noqa: E501
    NODES,
    REFS,
    Line,
    _in_line,
    events,
    kills,
)
from tests.hostile.test_random_failure_sequences_keep_the_pool_and_the_ledger_whole import (
    BOUNDED,
    _healed,
)

ALLOW = Settings(cpu=CPUSettings(allow_gpu_nodes=True))

jobs = st.lists(
    st.fixed_dictionaries(
        {
            "min": st.integers(1, 3),
            "extra": st.integers(0, 1),
            "spares": st.integers(0, 2),
            "priority": st.sampled_from([0, 5]),
            # Which of its two phases run on CPU only.
            "cpu": st.tuples(st.booleans(), st.booleans()),
            "return": st.sampled_from(["Quarantine", "ReturnToSpares"]),
        }
    ),
    min_size=3,
    max_size=3,
)
# The job's spare nodes fail: the first (by name) of job j's spares goes dark.
spare_fails = st.tuples(st.just("spare_dark"), st.integers(0, 2))
happenings = st.lists(st.tuples(st.one_of(events, spare_fails, spare_fails), kills), max_size=12)


class MixedLine(Line):
    """The line, over ``cpu`` CPU nodes and H100 nodes, CPU phases allowed GPU nodes."""

    def __init__(self, shape: list[dict[str, Any]], cpu: int) -> None:
        self.nodes = {}
        for i in range(NODES):
            name = f"n{i:02d}"
            self.nodes[name] = node(name, gpu=None if i < cpu else "H100", rack=f"r{i % 2}")
        self.now = T0
        self.jobs = []
        for ref, s in zip(REFS, shape, strict=True):
            lo, hi = s["min"], s["min"] + s["extra"]
            phases = [
                phase(name, lo, hi, gpu_types=[] if on_cpu else None)
                for name, on_cpu in zip(("prep", "train"), s["cpu"], strict=True)
            ]
            the_spec = spec(
                *phases,
                spares=s["spares"],
                priority=s["priority"],
                failurePolicy={
                    "pendingGrace": "2m",
                    "nodeReturn": s["return"],
                    "healthyBeforeReturn": "2m",
                    "massFailure": {"maxFailedPercent": 100},
                },
            )
            self.jobs.append(Cluster(the_spec, self.nodes, settings=ALLOW, job=ref))
        self.quota = [None] * len(self.jobs)
        self.cut = [False] * len(self.jobs)
        self.last: tuple[int, set[str]] | None = None  # the last pass: its job, its claims

    def run(self, j: int, cut: int | None = None) -> list[str]:
        """As the line's pass; and a job's pass right after its own, nothing between, gives
        back nothing the one before claimed (no claim-and-give-back cycle)."""
        cluster = self.jobs[j]
        before = len(cluster.log)
        claimed = super().run(j, cut)
        given = {a.node for a in cluster.log[before:] if isinstance(a, ReleaseNode)}
        if self.last is not None and self.last[0] == j:
            again = given.intersection(self.last[1])
            assert not again, f"{cluster.job.name} gave back {again} it had just claimed"
        self.last = (j, set(claimed))
        return claimed

    def happen(self, step: tuple[Any, ...]) -> None:
        self.last = None
        if step[0] != "spare_dark":
            super().happen(step)
            return
        spares = self.jobs[step[1]].held(NodeRole.SPARE)
        if spares:
            self.nodes[spares[0]] = with_ready(self.nodes[spares[0]], False, self.now)

    def quiet(self) -> None:
        """Every node heals, and the jobs pass, their workers left running, until a round
        moves no node and changes no one's place in line; then no free node is left idle to
        one another."""
        for name, n in list(self.nodes.items()):
            self.nodes[name] = _healed(n, self.now)
        self.quota = [None] * len(self.jobs)
        last: object = None
        for _ in range(12):
            self.now += timedelta(minutes=2)
            for j in range(len(self.jobs)):
                self.run(j)
                self.run(j)
            seen = (
                {name: dict(n.labels) for name, n in self.nodes.items()},
                [(c.status.waiting_for, c.status.spares_wanted) for c in self.jobs],
            )
            if seen == last:
                break
            last = seen
        else:
            raise AssertionError("the nodes never stopped moving")
        self.check_none_left_idle()

    def check_none_left_idle(self) -> None:
        """In line order: a waiting job keeps the free nodes it could take (beside those kept
        for the jobs ahead of it), and so must wait for more than those; a running job short
        of spares takes any it could take (a CPU phase's, none of as many GPU nodes as the
        waiting GPU jobs want, whatever their place)."""
        free = self._free()
        live = sorted((c for c in self.jobs if not c.finished), key=_in_line)
        gpu_wanted = sum(
            sum(c.status.waiting_for.values())
            for c in live
            if c.status.waiting_for and not self._phase(c).is_cpu_only
        )
        line = {c.job.name: (c.status.waiting_for, c.status.spares_wanted) for c in live}
        kept: set[str] = set()
        for c in live:
            mine = [m for m in free if m not in kept and self._fits(c, m)]
            if c.status.waiting_for:
                need = sum(c.status.waiting_for.values())
                assert len(mine) < need, f"{c.job.name} waits beside {mine}, free: {line}"
                kept.update(mine)
            elif c.status.spares_wanted:
                if self._phase(c).is_cpu_only:
                    gpu = [m for m in mine if self._is_gpu(m)]
                    mine = [m for m in mine if m not in gpu[len(gpu) - min(gpu_wanted, len(gpu)) :]]
                assert not mine, f"{c.job.name} short of spares beside {mine}, free: {line}"

    def _phase(self, cluster: Cluster) -> Phase:
        return cluster.the_spec.phases[cluster.status.phase_index]

    def _is_gpu(self, name: str) -> bool:
        return "nvidia.com/gpu.product" in self.nodes[name].labels

    def _fits(self, cluster: Cluster, name: str) -> bool:
        """The phase ``cluster`` is at could run on node ``name``: any node for a CPU phase
        (allowed GPU nodes), an H100 node for a GPU phase."""
        return self._phase(cluster).is_cpu_only or self._is_gpu(name)


def _job(lo: int, spares: int, cpu: tuple[bool, bool], extra: int = 0, priority: int = 0) -> Any:
    return {
        "min": lo,
        "extra": extra,
        "spares": spares,
        "priority": priority,
        "cpu": cpu,
        "return": "Quarantine",
    }


GPU, CPU_THEN_GPU, GPU_THEN_CPU = (False, False), (True, False), (False, True)


@BOUNDED
@given(shape=jobs, cpu=st.integers(1, NODES - 2), happenings=happenings)
# Found with each of three rules undone: a waiting GPU job kept the GPU nodes for a CPU phase
# short of spares that never takes them ...
@example(
    shape=[_job(1, 1, GPU), _job(1, 2, GPU_THEN_CPU), _job(2, 0, GPU)],
    cpu=1,
    happenings=[(("dark", 0), None), (("finish", 1), None)],
)
# ... (and a CPU phase short of spares was kept, by a CPU phase waiting behind it, GPU nodes
# its refill leaves to a waiting GPU job, which kept them for the CPU phase waiting) ...
@example(
    shape=[
        _job(3, 2, CPU_THEN_GPU, extra=1, priority=5),
        _job(1, 0, CPU_THEN_GPU),
        _job(1, 0, GPU),
    ],
    cpu=1,
    happenings=[],
)
# ... and a CPU phase admitted took as spares GPU nodes a waiting GPU job wanted, given back
# at its next pass.
@example(
    shape=[_job(1, 2, GPU_THEN_CPU), _job(1, 1, GPU_THEN_CPU, extra=1), _job(1, 0, GPU)],
    cpu=1,
    happenings=[],
)
# A job that gave its pool back (its workers refused past a quota) and waited in line took its
# whole last world once the nodes came free, from under an older job waiting for one of them.
@example(
    shape=[_job(2, 0, GPU, extra=1), _job(1, 0, CPU_THEN_GPU), _job(1, 2, GPU)],
    cpu=3,
    happenings=[(("quota", 0, 1), None)],
)
def test_cpu_and_gpu_jobs_in_line_never_leave_a_free_node_to_one_another(
    shape: list[dict[str, Any]],
    cpu: int,
    happenings: list[tuple[tuple[Any, ...], tuple[int, int] | None]],
) -> None:
    line = MixedLine(shape, cpu)
    for j in range(len(line.jobs)):
        line.run(j)
    for step, (event, kill) in enumerate(happenings):
        line.happen(event)
        if kill is not None:
            line.run(*kill)
        for k in range(2 * len(line.jobs)):
            line.run((step + k) % len(line.jobs))
    line.quiet()
    line.drain()
    assert all(c.status.state == JobState.SUCCEEDED or line._too_few(c) for c in line.jobs)
