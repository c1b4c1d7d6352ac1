"""The checkpoint contract in decide: reports into the status, CheckpointStale, the final
checkpoint at a boundary, what a new generation resumes from, resumed and lost work."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from phased.api.v1alpha1 import (
    CheckpointRecord,
    JobState,
    NodeRole,
    PhaseRecord,
    TrainingJobStatus,
)
from phased.core.decide import decide
from phased.core.model import (
    CreatePod,
    DeletePod,
    EnsureClaim,
    EnsureSecret,
    NodeSet,
    PodPhase,
    Snapshot,
)
from phased.core.reports import Report, ReportKind, ReportStore, merge, report_token
from phased.core.settings import ReportSettings, Settings
from phased.core.times import format_time
from tests.core.builders import (
    JOB,
    T0,
    at,
    events,
    landed,
    node,
    of_type,
    owned,
    phase,
    pod,
    snapshot,
    spec,
    with_ready,
)

A, S = NodeRole.ACTIVE, NodeRole.SPARE
REPORTING = Settings(
    reports=ReportSettings(url="http://phased.test:8082", key_file="/etc/phased/report-key")
)
TOKEN = report_token(b"k" * 32, JOB.namespace, JOB.name, JOB.uid)


def _spec(**checkpoint: Any) -> Any:
    return spec(
        phase("train", 2, 2),
        phase("validate", 2, 2),
        spares=1,
        checkpoint={"report": True, "interval": "1h", **checkpoint},
    )


def _report(kind: ReportKind, step: int, when: datetime, **kw: Any) -> Report:
    fields: dict[str, Any] = {"phase": "train", "generation": 0, "attempt": 0, "rank": 0}
    fields.update(kw)
    path = f"/checkpoints/llm/train/step-{step}" if kind == ReportKind.CHECKPOINT else ""
    return Report(kind=kind, step=step, time=when, path=fields.pop("path", path), **fields)


def _store(*reports: Report) -> ReportStore:
    store = ReportStore()
    for r in reports:
        store = merge(store, r)
    return store


def _running(
    *,
    generation: int = 0,
    state: PodPhase = PodPhase.RUNNING,
    record: dict[str, Any] | None = None,
    reports: ReportStore | None = None,
    the_spec: Any = None,
    **status: Any,
) -> Snapshot:
    """Two actives running the train phase (started at T0 - 2h), one spare."""
    actives, spare = [node("a0"), node("a1")], node("s0")
    held = [owned(n, A) for n in actives] + [owned(spare, S)]
    pods = [
        pod(
            f"llm-train-g{generation}-{i}",
            "train",
            i,
            world=2,
            node_name=f"a{i}",
            generation=generation,
            state=state,
        )
        for i in range(2)
    ]
    records = [
        PhaseRecord(
            name="train",
            state="Running",
            start_time=format_time(at(-7200)),
            gpu_type="H100",
            **(record or {}),
        ),
        PhaseRecord(name="validate"),
    ]
    the_status = TrainingJobStatus(
        phase="train",
        state=JobState.RUNNING,
        world_size=2,
        restart_generation=generation,
        start_time=format_time(at(-7200)),
        phases=records,
        pool={"active": ["a0", "a1"], "spares": ["s0"]},
        **status,
    )
    return snapshot(
        the_spec or _spec(),
        held,
        pods,
        the_status,
        reports=reports or ReportStore(),
        report_token=TOKEN,
        report_secret_exists=True,
        service_exists=True,
    )


def _condition(plan: Any, kind: str) -> Any:
    return next((c for c in plan.status.conditions if c.type == kind), None)


# --- reports into the status -----------------------------------------------------------------


def test_the_latest_checkpoint_and_progress_appear_in_their_phase_record():
    store = _store(
        _report(ReportKind.CHECKPOINT, 1000, at(-600)),
        _report(ReportKind.PROGRESS, 1100, at(-60)),
    )
    plan = decide(_running(reports=store), REPORTING, T0)
    train = plan.status.phases[0]
    assert train.last_checkpoint is not None and train.last_progress is not None
    assert (train.last_checkpoint.step, train.last_checkpoint.path) == (
        1000,
        "/checkpoints/llm/train/step-1000",
    )
    assert train.last_checkpoint.time == format_time(at(-600))
    assert train.last_progress.step == 1100
    assert plan.status.phases[1].last_checkpoint is None


def test_an_older_report_never_replaces_a_newer_record():
    newer = CheckpointRecord(step=2000, time=format_time(at(-30)), path="/c/2000")
    store = _store(_report(ReportKind.CHECKPOINT, 1000, at(-600)))
    plan = decide(_running(reports=store, record={"last_checkpoint": newer}), REPORTING, T0)
    assert plan.status.phases[0].last_checkpoint == newer


# --- CheckpointStale ---------------------------------------------------------------------------

STALENESS = [
    # (case, last checkpoint age in seconds or None, stale?)
    ("a checkpoint 30 minutes ago is fresh", 1800, False),
    ("a checkpoint 61 minutes ago is stale", 3660, True),
    ("no checkpoint since a phase start 2 hours ago is stale", None, True),
]


@pytest.mark.parametrize(("case", "age", "stale"), STALENESS, ids=[c[0] for c in STALENESS])
def test_checkpoint_stale_follows_the_declared_interval(case, age, stale):
    record = {}
    if age is not None:
        record["last_checkpoint"] = CheckpointRecord(step=5, time=format_time(at(-age)), path="/c")
    plan = decide(_running(record=record), REPORTING, T0)
    condition = _condition(plan, "CheckpointStale")
    assert condition is not None and condition.status == ("True" if stale else "False")
    assert ("CheckpointStale" in events(plan)) is stale
    if not stale:  # woken when the next checkpoint falls due
        assert plan.requeue_after is not None
        assert plan.requeue_after <= 3600 - age + 1


def test_checkpoint_stale_warns_once_and_clears_when_a_checkpoint_arrives():
    first = decide(_running(), REPORTING, T0)
    assert "CheckpointStale" in events(first)
    again = decide(_running(conditions=first.status.conditions), REPORTING, at(5))
    assert "CheckpointStale" not in events(again)
    store = _store(_report(ReportKind.CHECKPOINT, 50, at(8)))
    cleared = decide(_running(conditions=again.status.conditions, reports=store), REPORTING, at(10))
    assert _condition(cleared, "CheckpointStale").status == "False"


def test_a_finished_job_is_not_left_stale():
    first = decide(_running(), REPORTING, T0)
    assert _condition(first, "CheckpointStale").status == "True"
    the_spec = spec(phase("train", 2, 2), spares=1, checkpoint={"report": True})
    store = _store(_report(ReportKind.CHECKPOINT, 9, at(1), final=True))
    done = decide(
        _running(
            the_spec=the_spec,
            state=PodPhase.SUCCEEDED,
            reports=store,
            conditions=first.status.conditions,
        ),
        REPORTING,
        at(2),
    )
    assert done.status.state == JobState.SUCCEEDED
    assert _condition(done, "CheckpointStale").status == "False"


def test_without_reports_there_is_no_checkpoint_stale_condition():
    the_spec = spec(phase("train", 2, 2), phase("validate", 2, 2), spares=1)
    plan = decide(_running(the_spec=the_spec), REPORTING, T0)
    assert _condition(plan, "CheckpointStale") is None


# --- the final checkpoint at a phase boundary -------------------------------------------------


def test_a_phase_whose_workers_succeeded_waits_for_its_final_checkpoint():
    plan = decide(_running(state=PodPhase.SUCCEEDED), REPORTING, T0)
    assert plan.status.phase == "train"
    assert "WaitingForFinalCheckpoint" in events(plan)
    assert plan.status.phases[0].completed_workers_at == format_time(T0)
    assert plan.requeue_after == pytest.approx(600)
    assert "waiting for their final checkpoint" in plan.status.message


def test_the_final_checkpoint_of_the_running_generation_ends_the_phase():
    store = _store(_report(ReportKind.CHECKPOINT, 9000, at(-1), final=True))
    plan = decide(_running(state=PodPhase.SUCCEEDED, reports=store), REPORTING, T0)
    assert plan.status.phase == "validate"
    assert plan.status.phases[0].last_checkpoint.final is True


def test_a_final_checkpoint_of_an_earlier_generation_does_not_count():
    store = _store(_report(ReportKind.CHECKPOINT, 9000, at(-300), final=True, generation=0))
    plan = decide(_running(generation=1, state=PodPhase.SUCCEEDED, reports=store), REPORTING, T0)
    assert plan.status.phase == "train"


def test_the_boundary_waits_at_most_final_timeout_then_goes_on_with_a_warning():
    record = {"completed_workers_at": format_time(at(-600))}
    plan = decide(_running(state=PodPhase.SUCCEEDED, record=record), REPORTING, T0)
    assert plan.status.phase == "validate"
    assert "FinalCheckpointMissing" in events(plan)


def test_without_reports_a_phase_ends_when_its_workers_succeed():
    the_spec = spec(phase("train", 2, 2), phase("validate", 2, 2), spares=1)
    plan = decide(_running(state=PodPhase.SUCCEEDED, the_spec=the_spec), REPORTING, T0)
    assert plan.status.phase == "validate"


# --- storage and the worker environment ------------------------------------------------------


def _env(manifest: Any) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in manifest["spec"]["containers"][0]["env"]}


def test_a_new_job_creates_its_claim_and_token_secret_before_its_workers():
    the_spec = spec(
        phase("train", 2, 2),
        checkpoint={"report": True, "volume": {"size": "2Ti", "storageClassName": "nfs"}},
    )
    snap = snapshot(the_spec, [node("n0"), node("n1")], report_token=TOKEN)
    plan = decide(snap, REPORTING, T0)
    kinds = [type(a).__name__ for a in plan.actions]
    assert kinds.index("EnsureClaim") < kinds.index("EnsureSecret") < kinds.index("ClaimNode")
    (claim,) = of_type(plan, EnsureClaim)
    assert claim.manifest["metadata"]["name"] == "llm-checkpoints"
    assert claim.manifest["spec"]["storageClassName"] == "nfs"
    assert claim.manifest["metadata"]["ownerReferences"][0]["uid"] == JOB.uid
    (secret,) = of_type(plan, EnsureSecret)
    assert secret.manifest["stringData"] == {"token": TOKEN}
    assert secret.manifest["metadata"]["ownerReferences"][0]["uid"] == JOB.uid


def test_an_existing_claim_is_mounted_and_never_created():
    the_spec = spec(phase("train", 2, 2), checkpoint={"volume": {"claimName": "team-ckpt"}})
    held = [owned(node("n0"), A), owned(node("n1"), A)]
    plan = decide(snapshot(the_spec, held, service_exists=True), REPORTING, T0)
    assert not of_type(plan, EnsureClaim) and not of_type(plan, EnsureSecret)
    manifest = of_type(plan, CreatePod)[0].manifest
    assert manifest["spec"]["volumes"] == [
        {"name": "phased-checkpoints", "persistentVolumeClaim": {"claimName": "team-ckpt"}}
    ]
    assert manifest["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "phased-checkpoints", "mountPath": "/checkpoints"}
    ]
    assert "PHASED_REPORT_URL" not in _env(manifest)


def test_reporting_workers_get_the_endpoint_and_the_token_file_but_no_account_token():
    the_spec = spec(phase("train", 2, 2), checkpoint={"report": True})
    held = [owned(node("n0"), A), owned(node("n1"), A)]
    snap = snapshot(
        the_spec, held, service_exists=True, report_token=TOKEN, report_secret_exists=True
    )
    plan = decide(snap, REPORTING, T0)
    manifest = of_type(plan, CreatePod)[0].manifest
    env = _env(manifest)
    assert env["PHASED_REPORT_URL"] == "http://phased.test:8082"
    assert env["PHASED_REPORT_TOKEN_FILE"] == "/var/run/phased/report/token"
    assert TOKEN not in str(manifest)  # the token travels only in the Secret
    assert manifest["spec"]["automountServiceAccountToken"] is False
    (volume,) = manifest["spec"]["volumes"]
    assert volume["secret"]["secretName"] == "llm-report"


def test_reports_on_an_operator_without_an_endpoint_are_an_invalid_spec():
    the_spec = spec(phase("train", 2, 2), checkpoint={"report": True})
    plan = decide(snapshot(the_spec, [node("n0")]), Settings(), T0)
    assert plan.status.state == JobState.INVALID
    assert "reports.url and reports.keyFile" in plan.status.message


# --- a failure: lost work, survivors' grace, resume point, resumed ---------------------------


def _failed(**kw: Any) -> Snapshot:
    snap = _running(**kw)
    nodes = list(snap.nodes.values())
    nodes[0] = with_ready(nodes[0], False, at(-60))  # a0 NotReady for 60 s (grace 30 s)
    return Snapshot(**{**snap.__dict__, "nodes": NodeSet.of(nodes)})


def test_a_node_failure_records_lost_work_and_restarts_from_the_last_checkpoint():
    ckpt = CheckpointRecord(step=1000, time=format_time(at(-900)), path="/c/1000")
    snap = _failed(record={"last_checkpoint": ckpt})
    plan = decide(snap, REPORTING, T0)
    (entry,) = plan.status.failures
    assert entry.lost_work_seconds == pytest.approx(900 - 60)  # checkpoint to detection
    assert entry.resume_step == 1000 and entry.generation == 0
    deletes = {d.name: d for d in of_type(plan, DeletePod)}
    assert deletes["llm-train-g0-0"].force  # its kubelet is gone: no grace
    assert deletes["llm-train-g0-1"].grace_seconds == 30 and not deletes["llm-train-g0-1"].force
    assert of_type(plan, CreatePod) == []  # not while the survivor still stops
    created = of_type(landed(snap, plan, REPORTING).decide(), CreatePod)  # once it is gone
    assert sorted(c.manifest["metadata"]["name"] for c in created) == [
        "llm-train-g1-0",
        "llm-train-g1-1",
    ]
    env = _env(created[0].manifest)
    assert (env["PHASED_RESUME_FROM"], env["PHASED_RESUME_STEP"]) == ("/c/1000", "1000")
    assert env["PHASED_RESUME"] == "true" and env["PHASED_RESTART_GENERATION"] == "1"


def test_a_checkpoint_reported_after_detection_is_the_resume_step_with_no_lost_work():
    """A silent node is found after the node monitor grace; the other ranks went on and
    checkpointed meanwhile. The ledger names the step the new generation is told to resume
    from, and nothing before detection was lost."""
    ckpt = CheckpointRecord(step=1040, time=format_time(at(-30)), path="/c/1040")
    snap = _failed(record={"last_checkpoint": ckpt})
    plan = decide(snap, REPORTING, T0)
    (entry,) = plan.status.failures
    assert entry.resume_step == 1040 and entry.lost_work_seconds == 0
    env = _env(of_type(landed(snap, plan, REPORTING).decide(), CreatePod)[0].manifest)
    assert env["PHASED_RESUME_STEP"] == str(entry.resume_step)


def test_a_checkpoint_the_stopped_survivors_report_in_their_grace_is_the_resume_step():
    """The failure's pass records the last checkpoint then (step 1000); the survivor it
    stops checkpoints once more in its termination grace (step 1040), and the generation
    created once it is gone is told to resume from that one: the entry names the step the
    workers were told, and no work is lost before it."""
    ckpt = CheckpointRecord(step=1000, time=format_time(at(-900)), path="/c/1000")
    snap = _failed(record={"last_checkpoint": ckpt})
    plan = decide(snap, REPORTING, T0)
    (entry,) = plan.status.failures
    assert entry.resume_step == 1000
    cluster = landed(snap, plan, REPORTING)
    cluster.reports = merge(
        cluster.reports, _report(ReportKind.CHECKPOINT, 1040, at(2), rank=1, path="/c/1040")
    )
    cluster.advance(3)
    restart = cluster.decide()
    env = _env(of_type(restart, CreatePod)[0].manifest)
    (entry,) = restart.status.failures
    assert (env["PHASED_RESUME_STEP"], entry.resume_step) == ("1040", 1040)
    assert entry.lost_work_seconds == 0 and entry.resumed is None
    cluster.apply(restart)
    cluster.advance(5)
    (entry,) = cluster.decide().status.failures
    assert entry.resume_step == 1040  # what the workers were told, as long as it stays open


def test_the_step_the_workers_carry_is_taken_back_after_a_lost_status_write():
    """The pass that created the new generation (told step 1040) lost its status write: the
    entry still says what the failure's pass saw (1000). The next pass reads the step off
    the workers (``phased.dev/resume-step``) and takes it, with the lost work to it."""
    ckpt = CheckpointRecord(step=1000, time=format_time(at(-900)), path="/c/1000")
    snap = _failed(record={"last_checkpoint": ckpt})
    cluster = landed(snap, decide(snap, REPORTING, T0), REPORTING)
    cluster.reports = merge(
        cluster.reports, _report(ReportKind.CHECKPOINT, 1040, at(2), rank=1, path="/c/1040")
    )
    cluster.advance(3)
    before = cluster.status
    restart = cluster.decide()
    created = of_type(restart, CreatePod)
    assert {c.manifest["metadata"]["labels"]["phased.dev/resume-step"] for c in created} == {"1040"}
    cluster.apply(restart)
    cluster.status = before  # the write was lost
    (entry,) = before.failures
    assert entry.resume_step == 1000
    cluster.advance(1)
    (entry,) = cluster.decide().status.failures
    assert (entry.resume_step, entry.lost_work_seconds) == (1040, 0)


def test_without_any_checkpoint_the_whole_phase_so_far_is_lost_work():
    snap = _failed()
    plan = decide(snap, REPORTING, T0)
    (entry,) = plan.status.failures
    assert entry.lost_work_seconds == pytest.approx(7200 - 60)
    assert entry.resume_step is None
    env = _env(of_type(landed(snap, plan, REPORTING).decide(), CreatePod)[0].manifest)
    assert "PHASED_RESUME_FROM" not in env


def test_the_survivors_grace_is_the_spec_field():
    the_spec = spec(
        phase("train", 2, 2),
        phase("validate", 2, 2),
        spares=1,
        checkpoint={"report": True},
        failurePolicy={"survivorGracePeriod": "5s"},
    )
    plan = decide(_failed(the_spec=the_spec), REPORTING, T0)
    deletes = {d.name: d for d in of_type(plan, DeletePod)}
    assert deletes["llm-train-g0-1"].grace_seconds == 5


def _open_entry(generation: int = 0) -> dict[str, Any]:
    return {
        "id": 1,
        "node": "a9",
        "reason": "NodeNotReady",
        "phase": "train",
        "detected": format_time(at(-120)),
        "cordoned": format_time(at(-90)),
        "replaced_by": "a1",
        "replaced": format_time(at(-90)),
        "generation": generation,
    }


RESUMED = [
    # (case, reports, resumed at)
    ("the new generation Running is not enough", [], None),
    (
        "a report of the failed generation after the cordon does not count",
        [_report(ReportKind.PROGRESS, 10, at(-60), generation=0)],
        None,
    ),
    (
        "a report of the new generation from before the cordon does not count",
        [_report(ReportKind.PROGRESS, 10, at(-100), generation=1)],
        None,
    ),
    (
        "the first progress report of the new generation resumes it",
        [
            _report(ReportKind.PROGRESS, 10, at(-30), generation=1),
            _report(ReportKind.CHECKPOINT, 20, at(-10), generation=1),
        ],
        at(-30),
    ),
    (
        "a replacement rank's first report resumes a worker-scope failure",
        [_report(ReportKind.CHECKPOINT, 20, at(-20), generation=0, attempt=1)],
        at(-20),
    ),
]


@pytest.mark.parametrize(("case", "reports", "resumed"), RESUMED, ids=[c[0] for c in RESUMED])
def test_resumed_is_the_first_report_of_a_worker_started_after_the_failure(case, reports, resumed):
    generation = 1 if "new generation" in case else 0
    snap = _running(
        generation=generation,
        reports=_store(*reports),
        failures=[_open_entry(0)],
        record={"last_checkpoint": CheckpointRecord(step=5, time=format_time(at(-5)), path="/c")},
    )
    plan = decide(snap, REPORTING, T0)
    (entry,) = plan.status.failures
    if resumed is None:
        assert entry.resumed is None
        assert plan.status.state == JobState.RECOVERING
        assert entry.interruption_seconds == pytest.approx(120)
    else:
        assert entry.resumed == format_time(resumed)
        assert entry.interruption_seconds == pytest.approx((resumed - at(-120)).total_seconds())
        assert plan.status.state == JobState.RUNNING
