"""Gang admission: a phase gets its nodes.min at once or holds nothing; the line is priority,
then age; jobs ahead keep what they need; running jobs' refills and replacements never wait;
a wait has a timeout."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import JobState, NodeRole, PhaseRecord, TrainingJobStatus
from phased.core.decide import decide
from phased.core.model import (
    Claimant,
    ClaimNode,
    JobRef,
    NodeInfo,
    NodeSet,
    Plan,
    ReleaseNode,
    Snapshot,
)
from phased.core.times import format_time
from tests.core.builders import (
    JOB,
    SETTINGS,
    T0,
    at,
    events,
    node,
    nodes,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
)

TRAIN = spec(phase("train", 8, 10))
OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)
# Its need already published: what it holds is given back only then.
IN_LINE = TrainingJobStatus(waiting_for={"H100": 8})


def _cond(plan: Plan, kind: str):
    found = [c for c in plan.status.conditions if c.type == kind]
    return found[0] if found else None


def _claimed(plan: Plan) -> list[str]:
    return sorted(c.node for c in of_type(plan, ClaimNode))


def test_a_cluster_too_small_for_min_claims_nothing_and_blocks_nobody():
    plan = decide(snapshot(TRAIN, nodes("h", 5)), SETTINGS, T0)
    assert plan.status.state == JobState.WAITING
    assert of_type(plan, ClaimNode) == []
    cond = _cond(plan, "CapacityShort")
    assert cond.status == "True" and "need 8 H100 nodes" in cond.message
    assert "only 5" in cond.message
    assert plan.status.waiting_for == {}
    assert events(plan) == ["CapacityShort"]


def test_free_nodes_short_of_min_are_not_claimed_and_the_need_is_published():
    busy = [owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("b", 5)]
    plan = decide(snapshot(TRAIN, [*busy, *nodes("h", 5)]), SETTINGS, T0)
    assert of_type(plan, ClaimNode) == []
    assert plan.status.waiting_for == {"H100": 8}
    assert "5 could be claimed now" in _cond(plan, "CapacityShort").message


def test_min_is_claimed_at_once_with_the_spares_then_up_to_max():
    the_spec = spec(phase("train", 8, 10), spares=2)
    plan = decide(snapshot(the_spec, nodes("h", 11)), SETTINGS, T0)
    claims = of_type(plan, ClaimNode)
    assert sum(c.role == NodeRole.ACTIVE for c in claims) == 9
    assert sum(c.role == NodeRole.SPARE for c in claims) == 2
    assert plan.status.waiting_for == {}


def test_part_of_a_pool_below_min_is_given_back():
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("m", 3)]
    busy = [owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("b", 8)]
    snap = snapshot(TRAIN, [*held, *busy, *nodes("h", 2)], status=IN_LINE)
    plan = decide(snap, SETTINGS, T0)
    assert of_type(plan, ClaimNode) == []
    assert sorted(r.node for r in of_type(plan, ReleaseNode)) == ["m00", "m01", "m02"]
    assert plan.status.state == JobState.WAITING


def test_what_it_holds_plus_what_is_free_reaching_min_is_completed_at_once():
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("m", 3)]
    plan = decide(snapshot(TRAIN, [*held, *nodes("h", 5)]), SETTINGS, T0)
    assert len(of_type(plan, ClaimNode)) == 5 and of_type(plan, ReleaseNode) == []


def test_the_first_acceptable_type_that_reaches_min_wins():
    the_spec = spec(phase("train", 3, 3, gpu_types=["H100", "H200"]))
    pool = nodes("h", 2) + nodes("k", 3, gpu="H200")
    plan = decide(snapshot(the_spec, pool), SETTINGS, T0)
    assert _claimed(plan) == ["k00", "k01", "k02"]


def test_nodes_that_are_not_free_are_never_claimed():
    from phased.core.model import Taint

    busy = [
        node("cordoned", unschedulable=True),
        node("notready", ready=False),
        node("tainted", taints=(Taint("other", "x"),)),
        node("small", gpus=4),
        node("cpu", gpu=None),
    ]
    plan = decide(snapshot(TRAIN, busy), SETTINGS, T0)
    assert of_type(plan, ClaimNode) == []


def test_a_job_behind_another_claims_only_beyond_what_the_job_ahead_needs():
    ahead = Claimant("uid-a", priority=5, created=T0, wants={"H100": 4})
    held = [owned(n, NodeRole.ACTIVE) for n in nodes("m", 3)]
    snap = snapshot(TRAIN, [*held, *nodes("h", 8)], status=IN_LINE, waiting=(ahead,))
    short = decide(snap, SETTINGS, T0)
    assert of_type(short, ClaimNode) == []  # 3 held + (8 - 4) free < 8
    assert sorted(r.node for r in of_type(short, ReleaseNode)) == ["m00", "m01", "m02"]
    assert "4 free ones are kept for jobs ahead" in _cond(short, "CapacityShort").message
    enough = decide(snapshot(TRAIN, nodes("h", 12), waiting=(ahead,)), SETTINGS, T0)
    assert len(of_type(enough, ClaimNode)) == 8  # 12 free, 4 kept for the job ahead


def test_an_older_job_of_equal_priority_goes_first():
    younger = Claimant(
        "uid-y", priority=0, created=JOB.created + timedelta(hours=1), wants={"H100": 8}
    )
    plan = decide(snapshot(TRAIN, nodes("h", 9), waiting=(younger,)), SETTINGS, T0)
    assert len(of_type(plan, ClaimNode)) == 9


def test_a_higher_priority_goes_before_an_older_job():
    urgent = Claimant("uid-u", priority=1, created=T0, wants={"H100": 8})
    plan = decide(snapshot(TRAIN, nodes("h", 10), waiting=(urgent,)), SETTINGS, T0)
    assert of_type(plan, ClaimNode) == []


def test_claimants_wanting_another_type_do_not_block():
    other = Claimant("uid-o", priority=99, created=None, wants={"H200": 8})
    plan = decide(snapshot(TRAIN, nodes("h", 8), waiting=(other,)), SETTINGS, T0)
    assert len(of_type(plan, ClaimNode)) == 8


def test_more_than_max_plus_spares_is_released_spares_first_farthest_first():
    the_spec = spec(phase("train", 2, 2), spares=1)
    held = [owned(node("a0"), NodeRole.ACTIVE), owned(node("a1"), NodeRole.ACTIVE)]
    held += [owned(node("s-near"), NodeRole.SPARE), owned(node("s-far", zone="z9"), NodeRole.SPARE)]
    plan = decide(snapshot(the_spec, held), SETTINGS, T0)
    assert [r.node for r in of_type(plan, ReleaseNode)] == ["s-far"]


# --- running jobs never wait in line ---------------------------------------------------------


def _running(spares: int, held_spares: int, free: int, waiting) -> Snapshot:
    the_spec = spec(phase("train", 2, 2), spares=spares)
    actives = [owned(n, NodeRole.ACTIVE) for n in nodes("a", 2)]
    spare_nodes = [owned(n, NodeRole.SPARE) for n in nodes("s", held_spares)]
    pods = [pod(f"llm-train-g0-{i}", "train", i, world=2, node_name=f"a{i:02d}") for i in range(2)]
    status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        phases=[PhaseRecord(name="train", start_time=format_time(at(-3600)), gpu_type="H100")],
        pool={"active": ["a00", "a01"], "spares": [n.name for n in spare_nodes]},
    )
    return snapshot(
        the_spec, [*actives, *spare_nodes, *nodes("h", free)], pods, status, waiting=waiting
    )


def test_a_running_jobs_spare_refill_is_not_held_back_by_jobs_ahead_in_line():
    ahead = Claimant("uid-a", priority=99, created=None, wants={"H100": 50})
    plan = decide(_running(spares=2, held_spares=0, free=3, waiting=(ahead,)), SETTINGS, T0)
    assert [c.role for c in of_type(plan, ClaimNode)] == [NodeRole.SPARE, NodeRole.SPARE]
    assert "SparesRefilled" in events(plan)


def test_a_started_phase_reforming_after_a_failure_is_not_held_back_by_the_line():
    ahead = Claimant("uid-a", priority=99, created=None, wants={"H100": 50})
    snap = _running(spares=0, held_spares=0, free=1, waiting=(ahead,))
    broken = [
        replace(n, conditions=(replace(n.conditions[0], status="False"),)) if n.name == "a01" else n
        for n in snap.nodes.values()
    ]
    plan = decide(replace(snap, nodes=NodeSet.of(broken)), SETTINGS, T0)
    assert _claimed(plan) == ["h00"]  # the replacement, despite the job ahead


# --- the wait's timeout ------------------------------------------------------------------------


def _waiting_since(seconds: float, **admission) -> tuple[Snapshot, Plan]:
    the_spec = spec(phase("train", 8, 10), admission=admission) if admission else TRAIN
    busy = [owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("b", 8)]
    snap = snapshot(the_spec, [*busy, *nodes("h", 2)])
    first = decide(snap, SETTINGS, at(-seconds))
    return snap, first


def test_a_wait_asks_to_be_woken_when_its_timeout_runs_out():
    snap, first = _waiting_since(600)
    plan = decide(replace(snap, status=first.status), SETTINGS, T0)
    assert plan.requeue_after is not None and plan.requeue_after <= 3000
    assert _cond(plan, "AdmissionTimedOut") is None


def test_past_the_timeout_the_job_keeps_waiting_with_a_condition_and_one_event():
    snap, first = _waiting_since(3601)
    plan = decide(replace(snap, status=first.status), SETTINGS, T0)
    cond = _cond(plan, "AdmissionTimedOut")
    assert cond.status == "True" and "waitTimeout 1h" in cond.message
    # (the hour between the two calls had no operator watching: AccountingGap says so)
    assert [e for e in events(plan) if e != "AccountingGap"] == ["AdmissionTimedOut"]
    assert plan.status.state == JobState.WAITING and plan.status.waiting_for == {"H100": 8}
    again = decide(replace(snap, status=plan.status), SETTINGS, at(60))
    assert events(again) == []


def test_past_the_timeout_a_job_that_asked_to_fail_fails():
    snap, first = _waiting_since(601, waitTimeout="10m", onTimeout="Fail")
    plan = decide(replace(snap, status=first.status), SETTINGS, T0)
    assert plan.status.state == JobState.FAILED
    failed = _cond(plan, "Failed")
    assert failed.reason == "AdmissionTimedOut"
    assert "AdmissionTimedOut" in events(plan)


# --- two jobs competing -------------------------------------------------------------------------


def _apply(cluster: dict[str, NodeInfo], plan: Plan, job: JobRef) -> None:
    for action in plan.actions:
        if isinstance(action, ClaimNode):
            if cluster[action.node].owner_uid is None:  # the API refuses a lost race
                cluster[action.node] = owned(cluster[action.node], action.role, job)
        elif isinstance(action, ReleaseNode):
            n = cluster[action.node]
            cluster[action.node] = replace(
                n,
                labels={k: v for k, v in n.labels.items() if not k.startswith("phased.dev")},
                taints=(),
            )


def test_two_jobs_wanting_more_than_there_is_never_deadlock_on_half_pools():
    a = JobRef(namespace="ml", name="a", uid="uid-a", created=T0)
    b = JobRef(namespace="ml", name="b", uid="uid-b", created=T0 + timedelta(seconds=1))
    the_spec = spec(phase("train", 6, 6))
    cluster = {n.name: n for n in nodes("h", 10)}
    # Half pools to start from, as a crash between claims could leave them.
    for name in ["h00", "h01", "h02", "h03", "h04"]:
        cluster[name] = owned(cluster[name], NodeRole.ACTIVE, b)
    for name in ["h05", "h06", "h07", "h08"]:
        cluster[name] = owned(cluster[name], NodeRole.ACTIVE, a)
    status = {a.uid: TrainingJobStatus(), b.uid: TrainingJobStatus()}
    for step in range(6):
        for job, other in ((b, a), (a, b)):
            wants = status[other.uid].waiting_for
            line = (Claimant(other.uid, 0, other.created, dict(wants)),) if wants else ()
            snap = snapshot(the_spec, cluster.values(), job=job, waiting=line)
            snap = replace(snap, status=status[job.uid])
            plan = decide(snap, SETTINGS, at(step))
            _apply(cluster, plan, job)
            status[job.uid] = plan.status
    held = {j.uid: sorted(n.name for n in cluster.values() if n.owner_uid == j.uid) for j in (a, b)}
    # b completed its half pool from the one free node before a published its need; a
    # could not, and gave its half back instead of sitting on it.
    assert len(held[b.uid]) == 6 and held[a.uid] == [], held
    assert status[a.uid].waiting_for == {"H100": 6}
