"""Jobs in line over scarce nodes, with an operator killed mid-pass, never share a node, lose
track of one, leave a worker on a node they do not hold, or starve one another.

Three jobs of different priorities and ages compete for six nodes, each its own pass,
deciding alone with the others' published needs as its line (as the reconciler builds it:
``waitingFor`` with the shape of the phase each waits to start). Random sequences drive
them — after each happening every job passes twice, one pass of one job maybe killed (a
prefix of its actions lands, its status write is lost): a quota in a job's namespace
refusing its workers past a number, and lifted again (the pool given back after
``pendingGrace``); nodes going dark and healing; workers failing; phases completing; time
passing; a person moving a job in line (its priority) or changing its spares. After every
pass:

* no node is held by two jobs (the simulator refuses a claim of a held node) and every
  job's status, once a pass of its own was not cut short, names exactly the nodes labelled
  as its own;
* no node is lost track of: each is free, held by exactly one of the jobs, or quarantined
  with its entry in the ledger of the job that quarantined it;
* no live worker of a job is on a node it does not hold.

Once nothing fails any more (every node healthy, every namespace admitting), every job runs
to its end (or waits saying the nodes left out of quarantine, a person's to return, are too
few for its phase); a job taking nodes to start leaves the free nodes the jobs ahead of it in line
wait for (no give-back livelock, no overtaking).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from phased.api.v1alpha1 import JobState, TrainingJobStatus
from phased.core import labels
from phased.core.model import Claimant, ClaimNode, CreatePod, EmitEvent, JobRef, PodPhase
from phased.core.pools import waiting_shape
from phased.core.quarantine import decode_quarantine
from phased.core.refusals import refused
from phased.core.times import format_time
from tests.core.builders import T0, Cluster, node, phase, spec, with_ready
from tests.hostile.test_an_operator_killed_mid_pass_carries_on_from_what_is_in_the_cluster import (
    landed_before_kill,
)
from tests.hostile.test_random_failure_sequences_keep_the_pool_and_the_ledger_whole import (
    BOUNDED,
    _healed,
)

NODES = 6
WHY = 'pods "w" is forbidden: exceeded quota: gpus, requested: nvidia.com/gpu=8'
# In line order: the highest priority first, then the oldest.
REFS = (
    JobRef(namespace="ml", name="urgent", uid="uid-urgent", created=T0 - timedelta(days=1)),
    JobRef(namespace="ml", name="elder", uid="uid-elder", created=T0 - timedelta(days=3)),
    JobRef(namespace="ml", name="younger", uid="uid-younger", created=T0 - timedelta(days=2)),
)
PRIORITIES = (5, 0, 0)

shapes = st.lists(
    st.fixed_dictionaries(
        {
            "min": st.integers(2, 4),
            "extra": st.integers(0, 2),
            "spares": st.integers(0, 1),
            "return": st.sampled_from(["Quarantine", "ReturnToSpares"]),
        }
    ),
    min_size=3,
    max_size=3,
)
# After each happening every job passes twice; one job's first pass may be killed, after
# this share (%) of its actions.
kills = st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(0, 100)))
events = st.one_of(
    # A quota in the job's namespace: that many live workers at most (None: no quota).
    st.tuples(st.just("quota"), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 3))),
    st.tuples(st.just("dark"), st.integers(0, NODES - 1)),
    st.tuples(st.just("heal"), st.integers(0, NODES - 1)),
    st.tuples(st.just("worker_fails"), st.integers(0, 2), st.integers(0, 9)),
    st.tuples(st.just("finish"), st.integers(0, 2)),
    st.tuples(st.just("wait"), st.sampled_from([30, 120, 700])),
    # A person edits a job's priority (its place in line moves) or its spares.
    st.tuples(st.just("priority"), st.integers(0, 2), st.sampled_from([0, 5, 10])),
    st.tuples(st.just("spares"), st.integers(0, 2), st.integers(0, 2)),
)


class Line:
    """The jobs, their shared nodes and clock, and what each pass may not break."""

    def __init__(self, shape: list[dict[str, Any]]) -> None:
        self.nodes = {f"n{i:02d}": node(f"n{i:02d}", rack=f"r{i % 2}") for i in range(NODES)}
        self.now = T0
        self.jobs: list[Cluster] = []
        for ref, prio, s in zip(REFS, PRIORITIES, shape, strict=True):
            lo = s["min"]
            the_spec = spec(
                phase("prep", lo, lo + s["extra"]),
                phase("train", lo, lo + s["extra"]),
                spares=s["spares"],
                priority=prio,
                failurePolicy={
                    "pendingGrace": "2m",
                    "nodeReturn": s["return"],
                    "healthyBeforeReturn": "2m",
                    "massFailure": {"maxFailedPercent": 100},
                },
            )
            self.jobs.append(Cluster(the_spec, self.nodes, job=ref))
        self.quota: list[int | None] = [None] * len(self.jobs)
        self.cut = [False] * len(self.jobs)  # its last pass was killed: its status is stale

    def _claimants(self, me: int) -> tuple[Claimant, ...]:
        out = []
        for i, other in enumerate(self.jobs):
            # As the reconciler reads the line: what a job waits for, or else the spares it
            # runs short of (``status.sparesWanted``, a claimant marked ``spares``).
            wants, spares = other.status.waiting_for, False
            if not wants:
                wants, spares = other.status.spares_wanted, True
            if i == me or not wants:
                continue
            shape = waiting_shape(other.the_spec, other.status.phase_index)
            assert shape is not None
            out.append(
                Claimant(
                    uid=other.job.uid,
                    priority=other.the_spec.priority,
                    created=other.job.created,
                    wants=dict(wants),
                    gpus_per_node=shape[0],
                    tolerations=shape[1],
                    fault_conditions=shape[2],
                    types=shape[3],
                    spares=spares,
                )
            )
        return tuple(out)

    def run(self, j: int, cut: int | None = None) -> list[str]:
        """Job ``j``'s pass; killed after ``cut`` % of its actions when given; its creates
        refused when its namespace refuses them. Returns the nodes it claimed."""
        cluster = self.jobs[j]
        if cluster.finished:
            return []
        self.now += timedelta(seconds=1)
        cluster.now = self.now
        cluster.waiting = self._claimants(j)
        plan = cluster.decide()
        acts = [a for a in plan.actions if not isinstance(a, EmitEvent)]
        landing = acts if cut is None else landed_before_kill(acts, cut)
        refused_at = self._refused_at(j, landing)
        if refused_at is not None:
            landing = landing[:refused_at]
        for action in landing:
            cluster.log.append(action)
            cluster._apply(action)
        if cut is None and refused_at is None:
            cluster.status, cluster.finished = plan.status, plan.finished
        elif cut is None:  # the reconciler writes the status as it was, with the refusal
            cluster.status, _ = refused(cluster.status, WHY, self.now, 1)
        # A pass cut short, or whose status write carried only the refusal: the status
        # is stale until the job's next whole pass.
        self.cut[j] = cut is not None or refused_at is not None
        cluster.schedule()
        self.check()
        return [a.node for a in landing if isinstance(a, ClaimNode)]

    def _refused_at(self, j: int, landing: list[Any]) -> int | None:
        """Where the first create over the job's quota is in ``landing``."""
        quota = self.quota[j]
        if quota is None:
            return None
        done = (PodPhase.SUCCEEDED, PodPhase.FAILED)
        live = sum(1 for p in self.jobs[j].pods.values() if p.phase not in done)
        for k, action in enumerate(landing):
            if isinstance(action, CreatePod):
                if live >= quota:
                    return k
                live += 1
        return None

    def check(self) -> None:
        uids = {c.job.uid: c for c in self.jobs}
        for name, n in self.nodes.items():
            marked = {k for k in n.labels if k.startswith("phased.dev/")}
            note = decode_quarantine(n.annotations.get(labels.ANNOTATION_QUARANTINE))
            if note is not None:
                owner = uids.get(note.job)
                assert owner is not None, (name, note)
                i = self.jobs.index(owner)
                keys = {(e.node, e.detected) for e in owner.status.failures}
                if not self.cut[i]:
                    assert (name, format_time(note.detected)) in keys, f"{name}: no ledger entry"
            elif marked:
                assert n.owner_uid in uids and n.role is not None, f"{name} lost: {n.labels}"
        for i, cluster in enumerate(self.jobs):
            for p in cluster.pods.values():
                on = self.nodes.get(p.node_name or "")
                live = p.phase in (PodPhase.PENDING, PodPhase.RUNNING) and p.stop_by is None
                if on is not None and live:
                    assert on.owner_uid == cluster.job.uid, f"{p.name} on {on.name}, not its own"
            if not self.cut[i]:
                pool = cluster.status.pool
                assert sorted([*pool.active, *pool.spares, *pool.quarantined]) == sorted(
                    n.name for n in self.nodes.values() if n.owner_uid == cluster.job.uid
                ), cluster.job.name

    def happen(self, step: tuple[Any, ...]) -> None:
        kind = step[0]
        if kind == "quota":
            self.quota[step[1]] = step[2]
        elif kind == "dark":
            name = f"n{step[1]:02d}"
            self.nodes[name] = with_ready(self.nodes[name], False, self.now)
        elif kind == "heal":
            name = f"n{step[1]:02d}"
            self.nodes[name] = _healed(self.nodes[name], self.now)
        elif kind == "worker_fails":
            running = sorted(self.jobs[step[1]].running(), key=lambda p: p.name)
            if running:
                pods = self.jobs[step[1]].pods
                victim = running[step[2] % len(running)]
                pods[victim.name] = replace(victim, phase=PodPhase.FAILED, exit_code=1)
        elif kind == "finish":
            cluster = self.jobs[step[1]]
            if cluster.status.phase:
                cluster.finish_workers(cluster.status.phase)
        elif kind == "wait":
            self.now += timedelta(seconds=step[1])
        elif kind == "priority":
            cluster = self.jobs[step[1]]
            cluster.the_spec = cluster.the_spec.model_copy(update={"priority": step[2]})
        elif kind == "spares":
            cluster = self.jobs[step[1]]
            spares = cluster.the_spec.spares.model_copy(update={"count": step[2]})
            cluster.the_spec = cluster.the_spec.model_copy(update={"spares": spares})

    def drain(self) -> None:
        """Nothing fails any more: every job runs to its end, none overtaking a job ahead."""
        for name, n in list(self.nodes.items()):
            self.nodes[name] = _healed(n, self.now)
        self.quota = [None] * len(self.jobs)
        for _ in range(30):
            if all(c.finished or self._too_few(c) for c in self.jobs):
                break
            self.now += timedelta(minutes=2)
            for j, cluster in enumerate(self.jobs):
                free = self._free()
                held = any(n.owner_uid == cluster.job.uid for n in self.nodes.values())
                claimed = self.run(j)
                if not held and claimed:  # admitted: beyond what the jobs ahead wait for
                    # (of the nodes they could take)
                    waits = [
                        c
                        for c in self.jobs
                        if c.status.waiting_for and _in_line(c) < _in_line(cluster)
                    ]
                    theirs = [m for m in claimed if any(self._fits(c, m) for c in waits)]
                    free_theirs = sum(1 for m in free if any(self._fits(c, m) for c in waits))
                    ahead = sum(sum(c.status.waiting_for.values()) for c in waits)
                    assert len(theirs) <= max(0, free_theirs - ahead), (cluster.job.name, claimed)
                self.run(j)
                if cluster.status.state == JobState.RUNNING and _whole(cluster):
                    cluster.finish_workers(cluster.status.phase or "")
        states = {c.job.name: (c.status.state, c.status.message) for c in self.jobs}
        for c in self.jobs:
            assert c.status.state == JobState.SUCCEEDED or self._too_few(c), states

    def _too_few(self, cluster: Cluster) -> bool:
        """It waits because the nodes left out of quarantine (a person's to return) are
        fewer than its phase needs, and says so."""
        usable = sum(
            1
            for n in self.nodes.values()
            if labels.ANNOTATION_QUARANTINE not in n.annotations and self._fits(cluster, n.name)
        )
        the_phase = cluster.the_spec.phases[cluster.status.phase_index]
        return (
            cluster.status.state == JobState.WAITING
            and usable < the_phase.nodes.min
            and "the cluster has only" in cluster.status.message
        )

    def _free(self) -> list[str]:
        return [
            n.name
            for n in self.nodes.values()
            if not any(k.startswith("phased.dev/") for k in n.labels)
        ]

    def _fits(self, cluster: Cluster, name: str) -> bool:
        """The phase ``cluster`` is at could run on node ``name`` (here: every node)."""
        return True


def _in_line(cluster: Cluster) -> tuple[int, datetime]:
    """Its place in line: the highest priority first, then the oldest."""
    assert cluster.job.created is not None
    return -cluster.the_spec.priority, cluster.job.created


def _whole(cluster: Cluster) -> bool:
    status: TrainingJobStatus = cluster.status
    ranks = {
        p.rank
        for p in cluster.pods.values()
        if p.phase_name == status.phase
        and p.generation == status.restart_generation
        and p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED)
    }
    return status.world_size > 0 and len(ranks) == status.world_size and bool(cluster.running())


@BOUNDED
@given(shape=shapes, happenings=st.lists(st.tuples(events, kills), min_size=1, max_size=12))
def test_jobs_in_line_never_share_lose_or_starve_a_node(
    shape: list[dict[str, Any]],
    happenings: list[tuple[tuple[Any, ...], tuple[int, int] | None]],
) -> None:
    line = Line(shape)
    for j in range(len(line.jobs)):
        line.run(j)
    for step, (event, kill) in enumerate(happenings):
        line.happen(event)
        if kill is not None:
            line.run(*kill)
        for k in range(2 * len(line.jobs)):  # each job in turn, from a turning start
            line.run((step + k) % len(line.jobs))
    line.drain()
