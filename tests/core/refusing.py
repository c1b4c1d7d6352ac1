"""A cluster with one node whose kubelet refuses every worker running on it (rejects it at
admission, evicts it, ...), and the job's small gang both refusal tests start from."""

from __future__ import annotations

from collections.abc import Callable

from phased.core.model import EmitEvent, PodInfo, PodPhase
from tests.core.builders import Cluster, node, of_type, phase, spec


class Refusing:
    """``cluster``, with the node of the first worker of ``rank`` placed refusing every
    worker that runs there: ``refuse`` turns the running pod into what the kubelet leaves."""

    def __init__(self, cluster: Cluster, rank: int, refuse: Callable[[PodInfo], PodInfo]) -> None:
        self.cluster = cluster
        self.rank = rank
        self.refuse = refuse
        self.bad: str | None = None
        self.events: list[str] = []

    def step(self) -> None:
        plan = self.cluster.step()
        self.events += [f"{e.reason}: {e.message}" for e in of_type(plan, EmitEvent)]
        pods = self.cluster.pods
        if self.bad is None:
            self.bad = next((p.node_name for p in pods.values() if p.rank == self.rank), None)
        for name, p in pods.items():
            if p.node_name == self.bad and p.phase == PodPhase.RUNNING:
                pods[name] = self.refuse(p)
        self.cluster.advance(1)

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()


def gang(spares: int, **policy: object) -> Cluster:
    """A gang of 3 (torchrun, so a rank can be replaced alone) with ``spares`` spares and no
    restart budget unless ``policy`` gives one."""
    the_spec = spec(
        phase("train", 3, 3),
        spares=spares,
        failurePolicy={"restartBudget": 0, **policy},
        launcher={"type": "Torchrun", "rendezvous": "C10d"},
    )
    return Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(3 + spares)})
