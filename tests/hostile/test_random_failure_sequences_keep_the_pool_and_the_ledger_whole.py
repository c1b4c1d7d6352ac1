"""Random sequences of failures, many at once or one by one, driven through decide and the
cluster simulator, with every rule that must hold checked after every pass.

What happens: nodes going dark alone or a rack at a time, flapping within their grace,
coming back; every node of the cluster going NotReady together (a control plane cut off from
its kubelets), its workers evicted meanwhile or not; the job's whole pool deleted with its
pods and as many new nodes joining (a node pool recreated); GPUs vanishing from allocatable
and GPU faults coming and going; nodes deleted (with their pods collected or not) and new
ones joining; workers failing on healthy nodes, or rejected or evicted by their node's
kubelet; nodes coming under memory pressure (tainted by the node controller) and out of it;
a person cordoning or uncordoning a node, tainting it for maintenance or relabelling it
another GPU product, and undoing it; a node whose kubelet starts no worker placed there;
phases completing; time passing; a person's proceed, or edits a person may make while the
job runs (spares, the later phases' sizes, the running phase's ``min`` and ``max``, the
image, the restart budget) — for jobs restarting the gang and for jobs restarting a lost
rank alone (``restartScope: Worker``). After every pass:

* the status's pool is exactly the nodes labelled as the job's, one role each, and the job
  holds no more than the phase's ``max + spares.count`` (besides nodes the breaker holds,
  never given back unanswered: an edit may lower either while it holds);
* the ledger loses no entry and changes none's identity; no failure is in it twice; every
  node the job quarantined has its entry; each ``NodeFailed`` event is one new entry;
* while the breaker holds, nothing is quarantined, promoted, claimed as active or created,
  and no node it holds is given back;
* only the job's own nodes are quarantined, given roles or released, and only free ones are
  claimed (the simulator refuses the rest);
* the restart counts never go down, and a finished job's breaker holds nothing;
* no worker is made twice under the same name (a gone generation is never made again, nor
  an attempt of a rank replaced alone whose newest attempt is gone);
* the interruption charged never goes down, never exceeds the time the job has run (no
  interval is counted twice) and keeps a bounded list of stops.

Once every node is healthy again (and a person has said proceed to a breaker that still
holds), the job makes progress: it runs a whole generation (each rank running, or done
beside a rank replaced alone), has finished, or waits with ``CapacityShort`` saying why.

And one node flapping — NotReady for a moment, seen by a pass or not, its worker dying with
it, Ready again — at any pace within ``failurePolicy.flapping.window`` restarts the gang at
most ``flapping.troubles`` times, and once more when its last blip went unseen: then it has
failed as ``NodeFlapping`` and is out.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobSpec, TrainingJobStatus
from phased.core import labels
from phased.core.interruptions import MAX_STOPS
from phased.core.model import (
    ClaimNode,
    CreatePod,
    EmitEvent,
    NodeCondition,
    NodeInfo,
    Plan,
    PodPhase,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
    Taint,
    UnquarantineNode,
)
from phased.core.quarantine import decode_quarantine
from phased.core.times import format_time, parse_time
from tests.core.builders import H100_LABELS, H200_LABELS, Cluster, node, phase, spec, with_ready

BOUNDED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RACKS = 5
GPU = "nvidia.com/gpu"

# What a person may edit while the job runs (the CRD refuses the rest): a field of the job
# dictionary, and the values it may take (the index drawn picks one).
EDITS: dict[str, tuple[Any, ...]] = {
    "spares": (0, 1, 2, 3),
    "train_min": (2, 3, 4, 6),
    "train_max": (4, 5, 6, 8, 12),
    "eval_max": (2, 3, 6),
    "image": ("registry.example/llm:1", "registry.example/llm:2"),
    "budget": (0, 1, 20),
}
PRESSURE = Taint("node.kubernetes.io/memory-pressure", "", "NoSchedule")
MAINTENANCE = Taint("example.com/maintenance", "", "NoSchedule")  # a person's, for good

events = st.one_of(
    st.tuples(st.just("dark"), st.integers(0, 40)),
    st.tuples(st.just("rack"), st.integers(0, RACKS - 1)),
    st.tuples(st.just("flap"), st.integers(0, 40)),
    st.tuples(st.just("heal"), st.integers(0, 40)),
    st.tuples(st.just("heal_all")),
    st.tuples(st.just("delete"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("join"), st.integers(0, RACKS - 1)),
    st.tuples(st.just("gpus"), st.integers(0, 40), st.sampled_from([0, 4, 8])),
    st.tuples(st.just("xid"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("worker_fails"), st.integers(0, 40)),
    st.tuples(st.just("refused"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("finish")),
    st.tuples(st.just("wait"), st.sampled_from([5, 20, 45, 120, 700])),
    st.tuples(st.just("proceed")),
    st.tuples(st.just("blackout"), st.booleans()),
    st.tuples(st.just("recreate"), st.booleans()),
    st.tuples(st.just("pressure"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("edit"), st.sampled_from(sorted(EDITS)), st.integers(0, 8)),
    st.tuples(st.just("cordon"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("taint"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("relabel"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("stall"), st.integers(0, 40), st.booleans()),
)

jobs = st.fixed_dictionaries(
    {
        "size": st.integers(10, 20),
        "spares": st.integers(0, 3),
        "percent": st.sampled_from([20, 50, 100]),
        "return": st.sampled_from(["Quarantine", "ReturnToSpares"]),
        "budget": st.sampled_from([1, 20]),
        "scope": st.sampled_from(["Gang", "Worker"]),
    }
)


def _cluster(job: dict[str, Any]) -> Cluster:
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}", rack=f"r{i % RACKS}") for i in range(job["size"])}
    return Cluster(_spec(job), the_nodes)


def _spec(job: dict[str, Any]) -> TrainingJobSpec:
    policy = {
        "massFailure": {"maxFailedPercent": job["percent"]},
        "nodeReturn": job["return"],
        "healthyBeforeReturn": "2m",
        "restartBudget": job["budget"],
        "restartScope": job["scope"],
    }
    # restartScope Worker needs a launcher a rank restarted alone can rejoin.
    elastic = {"type": "Torchrun", "rendezvous": "C10d"}
    train_min = job.get("train_min", 4)
    return spec(
        phase("prep", 2, 4),
        phase("train", train_min, max(train_min, job.get("train_max", 8))),
        phase("eval", 2, job.get("eval_max", 3)),
        spares=job["spares"],
        failurePolicy=policy,
        template={"image": job.get("image", "registry.example/llm:1"), "command": ["train"]},
        **({"launcher": elastic} if job["scope"] == "Worker" else {}),
    )


def _pick(cluster: Cluster, index: int) -> str | None:
    names = sorted(cluster.nodes)
    return names[index % len(names)] if names else None


def _xid(n: NodeInfo, on: bool, now: Any) -> NodeInfo:
    others = tuple(c for c in n.conditions if c.type != "GPUXidError")
    return replace(n, conditions=(*others, NodeCondition("GPUXidError", str(on), now)))


def _pressure(n: NodeInfo, on: bool, now: Any) -> NodeInfo:
    """The kubelet's MemoryPressure condition, and the taint the node controller derives."""
    others = tuple(c for c in n.conditions if c.type != "MemoryPressure")
    taints = tuple(t for t in n.taints if t.key != PRESSURE.key) + ((PRESSURE,) if on else ())
    cond = NodeCondition("MemoryPressure", str(on), now)
    return replace(n, conditions=(*others, cond), taints=taints)


def _healed(n: NodeInfo, now: Any) -> NodeInfo:
    if not n.ready:
        n = with_ready(n, True, now)
    xid = n.condition("GPUXidError")
    if xid is not None and xid.status == "True":
        n = _xid(n, False, now)
    if any(t.key == PRESSURE.key for t in n.taints):
        n = _pressure(n, False, now)
    return replace(n, allocatable={**n.allocatable, GPU: 8})


def _happen(cluster: Cluster, event: tuple[Any, ...], job: dict[str, Any] | None = None) -> None:
    """``event`` happens to the cluster; an edit changes ``job`` and the spec made from it."""
    kind = event[0]
    name = _pick(cluster, event[1]) if len(event) > 1 and isinstance(event[1], int) else None
    now = cluster.now
    if kind in ("dark", "flap") and name is not None:
        cluster.nodes[name] = with_ready(cluster.nodes[name], False, now)
        if kind == "flap":
            _pass(cluster)
            cluster.nodes[name] = with_ready(cluster.nodes[name], True, cluster.now)
    elif kind == "rack":
        for n in list(cluster.nodes.values()):
            if n.labels.get("topology.phased.dev/rack") == f"r{event[1]}":
                cluster.nodes[n.name] = with_ready(n, False, now)
    elif kind == "heal" and name is not None:
        cluster.nodes[name] = _healed(cluster.nodes[name], now)
    elif kind == "heal_all":
        for n in list(cluster.nodes.values()):
            cluster.nodes[n.name] = _healed(n, now)
        _stop_evicted(cluster)
    elif kind == "blackout":  # every kubelet's status goes stale at once
        for n in list(cluster.nodes.values()):
            cluster.nodes[n.name] = with_ready(n, False, now)
        if event[1]:  # past the workers' unreachable toleration: evicted, Terminating
            for p in list(cluster.pods.values()):
                if p.stop_by is None and p.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED):
                    cluster.pods[p.name] = replace(p, stop_by=now + timedelta(seconds=30))
    elif kind == "recreate":  # the job's node pool recreated under new names
        mine = [n for n in cluster.nodes.values() if n.owner_uid == cluster.job.uid]
        for n in mine:
            del cluster.nodes[n.name]
            for p in [p for p in cluster.pods.values() if p.node_name == n.name]:
                if event[1]:  # the pod garbage collector came by
                    del cluster.pods[p.name]
        for i, n in enumerate(mine):
            fresh = f"p{len(cluster.log):04d}{i:02d}"
            cluster.nodes[fresh] = node(fresh, rack=n.labels.get("topology.phased.dev/rack", "r0"))
    elif kind == "delete" and name is not None:
        del cluster.nodes[name]
        if event[2]:  # the pod garbage collector came by
            for p in [p for p in cluster.pods.values() if p.node_name == name]:
                del cluster.pods[p.name]
    elif kind == "join":
        fresh = f"j{len(cluster.log):04d}"
        cluster.nodes[fresh] = node(fresh, rack=f"r{event[1]}")
    elif kind == "gpus" and name is not None:
        n = cluster.nodes[name]
        cluster.nodes[name] = replace(n, allocatable={**n.allocatable, GPU: event[2]})
    elif kind == "xid" and name is not None:
        cluster.nodes[name] = _xid(cluster.nodes[name], event[2], now)
    elif kind == "worker_fails":
        running = sorted(cluster.running(), key=lambda p: p.name)
        if running:
            victim = running[event[1] % len(running)]
            cluster.pods[victim.name] = replace(victim, phase=PodPhase.FAILED, exit_code=1)
    elif kind == "refused":
        running = sorted(cluster.running(), key=lambda p: p.name)
        if running:
            victim = running[event[1] % len(running)]
            refused = (
                replace(victim, rejected=True, reason="UnexpectedAdmissionError")
                if event[2]
                else replace(victim, exit_code=137, disruption="TerminationByKubelet: memory")
            )
            cluster.pods[victim.name] = replace(refused, phase=PodPhase.FAILED)
    elif kind == "finish" and cluster.status.phase:
        cluster.finish_workers(cluster.status.phase)
    elif kind == "wait":
        cluster.advance(event[1])
    elif kind == "proceed":
        cluster.annotations = {labels.ANNOTATION_PROCEED: format_time(now)}
    elif kind == "pressure" and name is not None:
        cluster.nodes[name] = _pressure(cluster.nodes[name], event[2], now)
    elif kind == "cordon" and name is not None:  # a person's cordon, or uncordon
        cluster.nodes[name] = replace(cluster.nodes[name], unschedulable=event[2])
    elif kind == "taint" and name is not None:  # a person's maintenance taint, or its removal
        n = cluster.nodes[name]
        kept = tuple(t for t in n.taints if t.key != MAINTENANCE.key)
        cluster.nodes[name] = replace(n, taints=kept + ((MAINTENANCE,) if event[2] else ()))
    elif kind == "relabel" and name is not None:  # another GPU product, or back
        n = cluster.nodes[name]
        product = H200_LABELS if event[2] else H100_LABELS
        cluster.nodes[name] = replace(n, labels={**n.labels, **product})
    elif kind == "stall" and name is not None:  # its kubelet starts no pod placed there
        if event[2]:
            cluster.stalling.add(name)
        else:
            cluster.stalling.discard(name)
    elif kind == "edit" and job is not None:
        values = EDITS[event[1]]
        job[event[1]] = values[event[2] % len(values)]
        cluster.the_spec = _spec(job)


def _stop_evicted(cluster: Cluster) -> None:
    """Workers evicted while their kubelet was away are stopped once it is back."""
    for p in list(cluster.pods.values()):
        node_ = cluster.nodes.get(p.node_name or "")
        if p.stop_by is not None and (node_ is None or node_.ready):
            del cluster.pods[p.name]


def _mine(cluster: Cluster) -> dict[str, NodeRole]:
    return {
        n.name: n.role
        for n in cluster.nodes.values()
        if n.owner_uid == cluster.job.uid and n.role is not None
    }


def _holding(status: TrainingJobStatus) -> bool:
    return any(c.type == "MassFailure" and c.status == "True" for c in status.conditions)


def _pass(cluster: Cluster) -> Plan:
    before = cluster.status
    owned_before = _mine(cluster)
    cluster.advance(1)
    plan = cluster.decide()
    claimed: set[str] = set()  # a node claimed earlier in the same plan is the job's then
    for action in plan.actions:
        if isinstance(action, ClaimNode):
            claimed.add(action.node)
        if isinstance(action, QuarantineNode | SetNodeRole | ReleaseNode | UnquarantineNode):
            assert action.node in {*owned_before, *claimed}, f"{action} touches a stranger"
    cluster.apply(plan)
    cluster.schedule()
    _check(cluster, before, plan)
    return plan


def _check(cluster: Cluster, before: TrainingJobStatus, plan: Plan) -> None:
    status = plan.status
    mine = _mine(cluster)

    def having(role: NodeRole) -> list[str]:
        return sorted(n for n, r in mine.items() if r == role)

    pool = status.pool
    assert (pool.active, pool.spares, pool.quarantined) == (
        having(NodeRole.ACTIVE),
        having(NodeRole.SPARE),
        having(NodeRole.QUARANTINED),
    )
    the_phase = cluster.the_spec.phases[status.phase_index]
    cap = the_phase.nodes.max + cluster.the_spec.spares.count
    # A node the breaker holds is never given back unanswered, even once an edit of the
    # spares or of max leaves it beyond what the job can use.
    held = {h.node for h in status.breaker.held}
    kept = [n for n in (*pool.active, *pool.spares) if n not in held]
    if len(kept) > cap:
        # A lowered max waits while the breaker holds failures, and once a worker of the
        # running generation has succeeded (docs/design.md, "The resource"): the pool stays
        # beyond it then, but never grows.
        ours = [p for p in cluster.pods.values() if p.phase_name == the_phase.name]
        running = max((p.generation for p in ours), default=None)
        done = any(p.phase == PodPhase.SUCCEEDED and p.generation == running for p in ours)
        was = [n for n in (*before.pool.active, *before.pool.spares) if n not in held]
        assert _holding(status) or done, (pool, the_phase.name, held)
        assert len(kept) <= len(was), (pool, before.pool, the_phase.name, held)

    keys = [(e.node, e.detected) for e in status.failures]
    assert len(set(keys)) == len(keys), keys
    assert len({e.id for e in status.failures}) == len(keys)
    now_by_id = {e.id: (e.node, e.detected) for e in status.failures}
    for e in before.failures:
        assert now_by_id.get(e.id) == (e.node, e.detected), f"ledger entry {e.id} lost"
    for name in pool.quarantined:
        note = decode_quarantine(cluster.nodes[name].annotations.get(labels.ANNOTATION_QUARANTINE))
        assert note is not None and (name, format_time(note.detected)) in keys, name
    said = [a.reason for a in plan.actions if isinstance(a, EmitEvent)]
    assert said.count("NodeFailed") == len(status.failures) - len(before.failures)

    if _holding(status) and "MassFailureReleased" not in said:
        held = {h.node for h in status.breaker.held}
        for action in plan.actions:
            assert not isinstance(action, QuarantineNode | SetNodeRole | CreatePod), action
            assert not (isinstance(action, ClaimNode) and action.role == NodeRole.ACTIVE)
            assert not (isinstance(action, ReleaseNode) and action.node in held), action

    assert status.restarts >= before.restarts
    made = [a.manifest["metadata"]["name"] for a in cluster.log if isinstance(a, CreatePod)]
    assert len(made) == len(set(made)), "a worker made twice under the same name"
    # Interruptions are charged as they go (no reports here: nothing closes in the past), and
    # never twice: never more than the time the job has run.
    spent, started = status.interruption, parse_time(status.start_time)
    assert spent.used_seconds >= before.interruption.used_seconds - 1e-3
    assert started is not None
    assert spent.used_seconds <= (cluster.now - started).total_seconds() + 1e-3
    assert len(spent.stops) <= MAX_STOPS
    assert status.worker_restarts >= before.worker_restarts
    assert status.worker_restarts <= status.restarts
    if status.state in (JobState.SUCCEEDED, JobState.FAILED):
        assert not _holding(status) and status.breaker.held == []


def _progress(cluster: Cluster) -> None:
    """Every node healthy again: the job runs whole, has finished, or says why it waits."""
    for n in list(cluster.nodes.values()):
        cluster.nodes[n.name] = _healed(n, cluster.now)
    cluster.stalling.clear()
    _stop_evicted(cluster)
    for step in range(40):
        if step == 10 and _holding(cluster.status):
            cluster.annotations = {labels.ANNOTATION_PROCEED: format_time(cluster.now)}
        cluster.advance(timedelta(minutes=1).total_seconds())
        _pass(cluster)
        if cluster.finished:
            break
    status = cluster.status
    if status.state in (JobState.SUCCEEDED, JobState.FAILED):
        return
    if status.state == JobState.WAITING:
        short = [c for c in status.conditions if c.type == "CapacityShort"]
        assert short and short[0].status == "True", status.message
        return
    assert status.state == JobState.RUNNING, (status.state, status.message)
    # Every rank of the generation runs, or has done its part (a rank replaced alone beside
    # peers that succeeded meanwhile).
    ranks = sorted(
        {
            p.rank
            for p in cluster.pods.values()
            if p.phase_name == status.phase
            and p.generation == status.restart_generation
            and p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED)
            and p.rank is not None
        }
    )
    assert ranks == list(range(status.world_size)), (ranks, status.world_size)
    assert cluster.running(), "nothing runs"


WORKER_SCOPE = {
    "size": 10,
    "spares": 0,
    "percent": 20,
    "return": "Quarantine",
    "budget": 1,
    "scope": "Worker",
}


@BOUNDED
@given(job=jobs, happenings=st.lists(events, min_size=1, max_size=25))
# Found once Worker scope was drawn: a rank replaced alone while the breaker held a deleted
# node (the worker had failed on a node that healed meanwhile) ...
@example(job=WORKER_SCOPE, happenings=[("gpus", 0, 0), ("delete", 1, False), ("worker_fails", 0)])
# ... and a rank replaced alone beside ranks that had succeeded, Recovering for ever.
@example(job=WORKER_SCOPE, happenings=[("dark", 2), ("dark", 0), ("worker_fails", 0), ("finish",)])
# Found once whole-cluster blips were drawn: every worker evicted while the kubelets were away
# came back as the same generation, made again from the phase's start ...
@example(job={**WORKER_SCOPE, "scope": "Gang"}, happenings=[("flap", 0), ("blackout", True)])
# ... as after the job's whole pool was deleted with its pods.
@example(job={**WORKER_SCOPE, "scope": "Gang", "percent": 100}, happenings=[("recreate", True)])
# Found once Worker scope was judged too: a rank whose newest attempt was evicted beside its
# kept failed first attempt was made again under the evicted attempt's name.
@example(job=WORKER_SCOPE, happenings=[("dark", 2), ("worker_fails", 0), ("blackout", True)])
# Found with 1,500 examples: max lowered below the running world while the breaker held a
# deleted node and another was dark. The resize waits, as designed; the check had counted
# only the held node as allowed beyond the new cap.
@example(
    job={
        "size": 10,
        "spares": 0,
        "percent": 20,
        "return": "Quarantine",
        "budget": 1,
        "scope": "Gang",
    },
    happenings=[
        ("heal_all",),
        ("finish",),
        ("dark", 0),
        ("delete", 1, False),
        ("edit", "train_max", 0),
    ],
)
def test_random_failure_sequences_keep_the_pool_and_the_ledger_whole(
    job: dict[str, Any], happenings: list[tuple[Any, ...]]
) -> None:
    job = dict(job)
    cluster = _cluster(job)
    _pass(cluster)
    for event in happenings:
        _happen(cluster, event, job)
        for _ in range(2):
            _pass(cluster)
        if cluster.finished:
            return
    _progress(cluster)


flaps = st.lists(
    st.tuples(st.sampled_from([1, 5, 30, 600, 3600]), st.booleans()), min_size=1, max_size=12
)


@BOUNDED
@given(job=jobs, pick=st.integers(0, 40), happenings=flaps)
def test_one_flapping_node_restarts_the_gang_a_bounded_number_of_times(
    job: dict[str, Any], pick: int, happenings: list[tuple[int, bool]]
) -> None:
    cluster = _cluster(job)
    for _ in range(4):
        _pass(cluster)
    actives = sorted(n for n, r in _mine(cluster).items() if r == NodeRole.ACTIVE)
    flappy = actives[pick % len(actives)]
    before = cluster.status.restarts
    for wait, seen in happenings:  # 12 h at most: all within the default 24 h window
        cluster.advance(wait)
        if _mine(cluster).get(flappy) != NodeRole.ACTIVE:
            continue
        cluster.nodes[flappy] = with_ready(cluster.nodes[flappy], False, cluster.now)
        if seen:
            _pass(cluster)
        cluster.advance(2)
        cluster.nodes[flappy] = with_ready(cluster.nodes[flappy], True, cluster.now)
        for pod in list(cluster.pods.values()):
            if pod.node_name == flappy and pod.phase == PodPhase.RUNNING:
                cluster.pods[pod.name] = replace(pod, phase=PodPhase.FAILED, exit_code=137)
        for _ in range(3):
            _pass(cluster)
    # Each blip that stopped the workers is one restart, up to ``troubles``; a node whose
    # last one a pass saw fails in it (its quarantine is that restart), one no pass saw
    # restarted them before it could be known, and its quarantine is one more.
    troubles = cluster.the_spec.failure_policy.flapping.troubles
    assert cluster.status.restarts - before <= troubles + 1, cluster.status.troubles
    assert cluster.status.state != JobState.FAILED, cluster.status.message
