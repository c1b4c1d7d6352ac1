"""``decide`` on hostile snapshots: always a Plan, never an exception, never a stranger's node.

Snapshots are built the way the reconciler builds them — raw Nodes and Pods through
``kube/convert.py``, the status through ``parse_status`` — from odd but API-plausible
objects: labels a namespace user could put on their own pods (rank "-1", generation "abc"),
nodes of other jobs, cordoned and quarantined nodes, garbage quarantine notes, the marks a
claim writes edited by someone else (``tampered_claims``), conditions
with and without transition times. For an invalid spec (``spec=None`` and ``spec_error``
from a real ``ValidationError``) the plan is the InvalidSpec condition and nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus, parse_spec, parse_status
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import (
    ClaimNode,
    CreatePod,
    DeletePod,
    EmitEvent,
    EnsureClaim,
    EnsureSecret,
    EnsureService,
    EvictPod,
    FinishClearing,
    JobRef,
    NodeInfo,
    NodeSet,
    Plan,
    QuarantineNode,
    ReleaseNode,
    SetNodeRole,
    Snapshot,
    StartClearing,
    UnquarantineNode,
)
from phased.core.ownership import holds, marks
from phased.core.settings import Settings
from phased.core.tolerations import CONDITION_TAINTS, untolerated
from phased.kube.convert import node_from_raw, pod_from_raw
from phased.reconcile import format_spec_error
from tests.core.builders import T0, node, owned, phase, pod, snapshot, spec
from tests.hostile.strategies import (
    hostile_spec_dicts,
    is_dns_label,
    odd_text,
    tampered_claims,
    valid_spec_dicts,
)

BOUNDED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SETTINGS = Settings()
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
JOB = JobRef(namespace="ml", name="llm", uid="uid-me", generation=3, created=NOW - timedelta(1))
OTHER = "uid-other"
GPU_LABELS = [
    {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    {"nvidia.com/gpu.product": "NVIDIA-H200"},
    {"accelerator": "huawei-Ascend910B"},
    {},
]
LABEL_NUMBERS = st.one_of(
    st.integers(-5, 6).map(str),
    st.sampled_from(["", "abc", "99999999999", "-0", "0x1", "1.5", "007"]),
)
TIMES = st.one_of(
    st.none(),
    st.sampled_from(["", "garbage", "2026-13-01T00:00:00Z", "0001-01-01T00:00:00Z"]),
    st.integers(-3 * 86400, 86400).map(
        lambda s: (NOW + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ),
)


@st.composite
def raw_nodes(draw: st.DrawFn, i: int, phase_names: list[str]) -> dict[str, Any]:
    node_labels = dict(draw(st.sampled_from(GPU_LABELS)))
    owner = draw(st.sampled_from([None, JOB.uid, OTHER]))
    if owner:
        node_labels[labels.LABEL_JOB_UID] = owner
        node_labels[labels.LABEL_JOB] = draw(st.sampled_from(["llm", "other", ""]))
    role = draw(st.sampled_from([None, "active", "spare", "quarantined", "Active", "junk"]))
    if role is not None:
        node_labels[labels.LABEL_ROLE] = role
    installation = draw(st.sampled_from([None, SETTINGS.installation, "team-b"]))
    if installation is not None:
        node_labels[labels.LABEL_INSTALLATION] = installation
    annotations = {}
    if draw(st.booleans()):
        annotations[labels.ANNOTATION_QUARANTINE] = draw(
            st.one_of(
                odd_text,
                st.sampled_from(
                    [
                        "{}",
                        "[]",
                        "null",
                        '{"job": "uid-me", "detected": "garbage"}',
                        '{"job": ["uid-me"], "detected": "2026-03-01T11:00:00Z"}',
                        '{"job": "uid-me", "reason": 5, "detected": "2026-03-01T11:00:00Z",'
                        ' "cordoned": "2026-03-01T11:00:30Z"}',
                        '{"job": "uid-other", "detected": "2026-03-01T11:00:00Z"}',
                    ]
                ),
            )
        )
    conditions = [
        {
            "type": draw(st.sampled_from(["Ready", "GPUXidError", "GPUUnhealthy", "Other"])),
            "status": draw(st.sampled_from(["True", "False", "Unknown", "", "yes"])),
            "lastTransitionTime": draw(TIMES),
        }
        for _ in range(draw(st.integers(0, 3)))
    ]
    taints = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.sampled_from(
                        [labels.TAINT_POOL, labels.TAINT_SPARE, labels.TAINT_QUARANTINE, "x"]
                    ),
                    "value": st.sampled_from(["", JOB.uid, OTHER]),
                    "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
                }
            ),
            max_size=2,
        )
    )
    unschedulable = draw(st.booleans())
    if draw(st.booleans()):
        # The marks a claim writes, then edited by a person or another controller.
        claimed, annotations, taints, unschedulable = draw(
            tampered_claims([JOB.uid, OTHER], SETTINGS.installation)
        )
        node_labels.update(claimed)
    gpus = draw(st.sampled_from(["8", "0", "16", "4", "abc", "8k", "-1", "1e3", "7.5"]))
    return {
        "metadata": {
            "name": f"n{i}",
            "resourceVersion": str(draw(st.integers(1, 10**12))),
            "labels": node_labels,
            "annotations": annotations,
            "creationTimestamp": draw(TIMES),
        },
        "spec": {"unschedulable": unschedulable, "taints": taints},
        "status": {
            "conditions": conditions,
            "allocatable": {"nvidia.com/gpu": gpus, "huawei.com/Ascend910": gpus, "cpu": "96"},
            "capacity": {"nvidia.com/gpu": gpus},
        },
    }


@st.composite
def raw_pods(draw: st.DrawFn, i: int, phase_names: list[str], node_names: list[str]) -> Any:
    pod_labels = {
        labels.LABEL_JOB_UID: JOB.uid,
        labels.LABEL_PHASE: draw(st.sampled_from([*phase_names, "gone", ""])),
        labels.LABEL_RANK: draw(LABEL_NUMBERS),
        labels.LABEL_GENERATION: draw(LABEL_NUMBERS),
        labels.LABEL_WORLD_SIZE: draw(LABEL_NUMBERS),
        labels.LABEL_ATTEMPT: draw(LABEL_NUMBERS),
    }
    for key in draw(st.lists(st.sampled_from(list(pod_labels)[1:]), max_size=2, unique=True)):
        del pod_labels[key]  # a person removed it
    status: dict[str, Any] = {
        "phase": draw(
            st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", "X"])
        ),
        "startTime": draw(TIMES),
    }
    if draw(st.booleans()):
        status["containerStatuses"] = [
            {
                "state": {
                    "terminated": {
                        "exitCode": draw(st.integers(-(2**31), 2**31 - 1)),
                        "reason": draw(st.sampled_from(["Error", "OOMKilled", ""])),
                    }
                }
            }
        ]
    return {
        "metadata": {
            "name": f"p{i}",
            "labels": pod_labels,
            "creationTimestamp": draw(TIMES),
            "deletionTimestamp": draw(st.sampled_from([None, "2026-03-01T11:59:00Z"])),
            # Mostly the job's workers; some only carry its labels (a copy, another tool's).
            "ownerReferences": draw(
                st.sampled_from(
                    [
                        [{"kind": "TrainingJob", "uid": JOB.uid, "controller": True}],
                        [{"kind": "TrainingJob", "uid": JOB.uid, "controller": True}],
                        [{"kind": "TrainingJob", "uid": JOB.uid, "controller": True}],
                        [{"kind": "ReplicaSet", "uid": "uid-rs", "controller": True}],
                        [],
                    ]
                )
            ),
        },
        "spec": {"nodeName": draw(st.sampled_from([None, "ghost", *node_names]))},
        "status": status,
    }


@st.composite
def raw_statuses(draw: st.DrawFn, phase_names: list[str]) -> dict[str, Any]:
    """What the operator wrote before (or a person with status access wrote instead)."""
    out: dict[str, Any] = {
        "state": draw(st.sampled_from([s.value for s in JobState])),
        "phaseIndex": draw(st.integers(-2, len(phase_names) + 2)),
        "restartGeneration": draw(st.integers(-3, 10**6)),
        "worldSize": draw(st.integers(-3, 6000)),
        "restarts": draw(st.integers(-1, 10**6)),
        "workerRestarts": draw(st.integers(-1, 10**6)),
        "startTime": draw(TIMES),
        "conditions": [
            {"type": t, "status": draw(st.sampled_from(["True", "False", "?"]))}
            for t in draw(
                st.lists(
                    st.sampled_from(["InvalidSpec", "CapacityShort", "X"]), max_size=3, unique=True
                )
            )
        ],
        "phases": [
            {
                "name": n,
                "state": draw(st.sampled_from(["Pending", "Running", "Succeeded"])),
                "startTime": draw(TIMES),
            }
            for n in draw(st.lists(st.sampled_from([*phase_names, "old"]), max_size=3))
        ],
        "failures": [
            {
                "id": draw(st.integers(-1, 10**6)),
                "node": f"n{draw(st.integers(0, 6))}",
                "reason": draw(st.sampled_from(["NodeNotReady", "GPUFault", "junk"])),
                "detected": draw(TIMES) or "garbage",
                "cordoned": draw(TIMES),
                "resumed": draw(TIMES),
            }
            for _ in range(draw(st.integers(0, 3)))
        ],
        "accounting": {"accountedAt": draw(TIMES), "gpuHours": draw(st.floats(-1e9, 1e9))},
        "interruption": {"openSince": draw(TIMES)},
        "waitingFor": draw(
            st.dictionaries(
                st.sampled_from(["H100", "", "junk"]), st.integers(-5, 5000), max_size=2
            )
        ),
        "suspects": [
            {
                "node": f"n{draw(st.integers(0, 6))}",
                "reason": draw(st.sampled_from(["NodeNotReady", "GPUCapacityDropped", "x"])),
                "since": draw(TIMES) or "garbage",
            }
            for _ in range(draw(st.integers(0, 2)))
        ],
    }
    return out


@st.composite
def snapshots(draw: st.DrawFn, spec_raw: st.SearchStrategy[Any]) -> Snapshot:
    raw = draw(spec_raw)
    try:
        spec, error = parse_spec(raw), None
    except ValidationError as exc:
        spec, error = None, format_spec_error(exc)
    names = [p.name for p in spec.phases] if spec else ["train"]
    nodes = tuple(node_from_raw(draw(raw_nodes(i, names))) for i in range(draw(st.integers(0, 7))))
    pods = tuple(
        pod_from_raw(draw(raw_pods(i, names, [n.name for n in nodes])))
        for i in range(draw(st.integers(0, 6)))
    )
    job = JobRef(
        namespace=JOB.namespace,
        name=JOB.name,
        uid=JOB.uid,
        generation=JOB.generation,
        created=JOB.created,
        deleting=draw(st.booleans()) and draw(st.booleans()),
    )
    return Snapshot(
        job=job,
        spec=spec,
        spec_error=error,
        status=parse_status(draw(raw_statuses(names))),
        nodes=NodeSet.of(nodes),
        pods=pods,
        service_exists=draw(st.booleans()),
        known_node_names=draw(st.sampled_from([None, frozenset(n.name for n in nodes)])),
    )


def _lands(manifest: dict[str, Any], node: NodeInfo) -> bool:
    """The worker's required node affinity (terms ORed, expressions ANDed) selects ``node``
    and its tolerations cover the node's NoSchedule and NoExecute taints."""
    spec = manifest["spec"]
    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]

    def matches(term: dict[str, Any]) -> bool:
        for expr in term["matchExpressions"]:
            value = node.labels.get(expr["key"])
            if expr["operator"] == "In" and value not in expr["values"]:
                return False
            if expr["operator"] == "DoesNotExist" and value is not None:
                return False
        for field in term.get("matchFields", []):
            assert (field["key"], field["operator"]) == ("metadata.name", "In"), field
            if node.name not in field["values"]:
                return False
        return True

    if not any(matches(t) for t in required["nodeSelectorTerms"]):
        return False
    return not [
        t for t in untolerated(node, spec["tolerations"]) if not t.key.startswith(CONDITION_TAINTS)
    ]


def _check_plan(snapshot: Snapshot, plan: Plan) -> None:
    """Every node action targets a free node (claims) or one the job holds; pod actions
    name the job's own pods or new pods with valid names."""
    assert isinstance(plan, Plan) and isinstance(plan.status, TrainingJobStatus)
    by_name = {n.name: n for n in snapshot.nodes.values()}
    pods = {p.name: p for p in snapshot.pods}
    for action in plan.actions:
        if isinstance(action, ClaimNode):
            node = by_name[action.node]
            assert not marks(node), f"claimed {node.name} carrying {sorted(marks(node))}"
            assert node.labels.get(labels.LABEL_ROLE) != NodeRole.QUARANTINED.value
            assert not node.unschedulable
            assert action.resource_version == node.resource_version
        elif isinstance(
            action,
            SetNodeRole
            | ReleaseNode
            | QuarantineNode
            | UnquarantineNode
            | FinishClearing
            | StartClearing
            | EvictPod,
        ):
            node = by_name[action.node]
            assert holds(node, snapshot.job.uid, SETTINGS.installation), action
            # Not only by holds' word: every mark on it names the job (a pool taint of
            # another job beside the job's UID label is a node two jobs' marks claim).
            assert node.labels.get(labels.LABEL_JOB_UID) == snapshot.job.uid, action
            assert all(
                t.value == snapshot.job.uid for t in node.taints if t.key in labels.OWNERSHIP_TAINTS
            ), action
            # and the quarantine taint, that the workers do not tolerate, only on a node whose
            # role is quarantined.
            quarantined = node.labels.get(labels.LABEL_ROLE) == NodeRole.QUARANTINED.value
            assert quarantined or labels.TAINT_QUARANTINE not in {t.key for t in node.taints}
        elif isinstance(action, DeletePod):
            assert action.name in pods
            assert pods[action.name].controller == snapshot.job.uid, "deleted a pod not its own"
        elif isinstance(action, CreatePod):
            metadata = action.manifest["metadata"]
            assert is_dns_label(metadata["name"]) and metadata["name"] not in pods
            assert metadata["labels"][labels.LABEL_JOB_UID] == snapshot.job.uid
            for node in snapshot.nodes.values():
                # The scheduler could bind it only to a node the job holds (a hand-made
                # copy of the marks without installation nor claimed-at included).
                if _lands(action.manifest, node):
                    assert holds(node, snapshot.job.uid, SETTINGS.installation), node.name
        elif isinstance(action, EnsureClaim | EnsureSecret):
            metadata = action.manifest["metadata"]
            assert metadata["namespace"] == snapshot.job.namespace
            assert metadata["ownerReferences"][0]["uid"] == snapshot.job.uid
        else:
            assert isinstance(action, EmitEvent | EnsureService)
    if plan.requeue_after is not None:
        assert plan.requeue_after >= 0


@BOUNDED
@given(snapshots(valid_spec_dicts()))
def test_decide_returns_a_plan_for_a_valid_spec_in_a_hostile_cluster(snapshot: Snapshot) -> None:
    _check_plan(snapshot, decide(snapshot, SETTINGS, NOW))


@BOUNDED
@given(snapshots(hostile_spec_dicts()))
def test_an_invalid_spec_gets_the_invalid_spec_condition_and_nothing_else(
    snapshot: Snapshot,
) -> None:
    plan = decide(snapshot, SETTINGS, NOW)
    _check_plan(snapshot, plan)
    if snapshot.spec is None and not snapshot.job.deleting:
        assert snapshot.spec_error
        ended = snapshot.status.state in (JobState.SUCCEEDED, JobState.FAILED)
        # A job that has ended stays as it ended; any other is held Invalid.
        assert plan.status.state == (snapshot.status.state if ended else JobState.INVALID)
        conds = [c for c in plan.status.conditions if c.type == "InvalidSpec"]
        assert [(c.status, c.reason) for c in conds] == [("True", "InvalidSpec")]
        assert all(isinstance(a, EmitEvent) for a in plan.actions)
        assert len(plan.actions) <= 1


@BOUNDED
@given(snapshots(valid_spec_dicts()), st.integers(1, 60))
def test_decide_twice_in_a_row_still_never_raises(snapshot: Snapshot, later: int) -> None:
    first = decide(snapshot, SETTINGS, NOW)
    again = Snapshot(**{**snapshot.__dict__, "status": first.status})
    _check_plan(again, decide(again, SETTINGS, NOW + timedelta(seconds=later)))


# --- known bug ----------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [3, -2])
@pytest.mark.parametrize("state", [*JobState])
def test_a_job_whose_phase_index_names_no_phase_does_not_raise(state: JobState, index: int) -> None:
    """The spec was edited to fewer phases (even after the job finished), or a person with
    status access wrote a negative index."""
    spec = parse_spec(
        {"phases": [{"name": "train", "nodes": {"min": 1, "max": 1}}], "template": {"image": "x"}}
    )
    status = TrainingJobStatus(state=state, phase="validate", phase_index=index)
    snapshot = Snapshot(
        job=JOB, spec=spec, spec_error=None, status=status, nodes=NodeSet.of(()), pods=()
    )
    assert isinstance(decide(snapshot, SETTINGS, NOW), Plan)


def test_a_mass_failure_window_of_999999_days_does_not_raise() -> None:
    spec = parse_spec(
        {
            "phases": [{"name": "train", "nodes": {"min": 1, "max": 1}}],
            "template": {"image": "x"},
            "failurePolicy": {"massFailure": {"window": "999999d"}},
        }
    )
    snapshot = Snapshot(
        job=JOB,
        spec=spec,
        spec_error=None,
        status=TrainingJobStatus(),
        nodes=NodeSet.of(()),
        pods=(),
    )
    assert isinstance(decide(snapshot, SETTINGS, NOW), Plan)


LONGEST = "999999d9999999h999999999m999999s"  # 32 characters, about 5800 years


def test_the_longest_durations_the_crd_accepts_do_not_raise() -> None:
    """A failed node trips the breaker with the longest window; the running phase's
    maxDuration deadline lies past year 9999."""
    the_spec = spec(
        phase("train", 2, 2, maxDuration=LONGEST),
        failurePolicy={"massFailure": {"window": LONGEST, "maxFailedPercent": 1}},
    )
    status = TrainingJobStatus(
        state=JobState.RUNNING,
        phase="train",
        world_size=2,
        phases=[{"name": "train", "state": "Running", "startTime": "2026-03-01T11:00:00Z"}],
        failures=[
            {"id": 1, "node": "old", "reason": "NodeNotReady", "detected": "0001-01-01T00:00:00Z"}
        ],
    )
    nodes = [
        owned(node("n0"), NodeRole.ACTIVE),
        owned(node("n1", ready=False, ready_since=T0 - timedelta(hours=1)), NodeRole.ACTIVE),
    ]
    workers = [pod(f"llm-train-g0-{r}", "train", r, world=2, node_name=f"n{r}") for r in (0, 1)]
    plan = decide(snapshot(the_spec, nodes, workers, status=status), SETTINGS, T0)
    assert isinstance(plan, Plan) and plan.status.state != JobState.FAILED


_WORLD_SIZE_BOMB = textwrap.dedent(
    """
    import resource, sys
    from dataclasses import replace
    resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
    from phased.api.v1alpha1 import JobState, NodeRole, TrainingJobStatus
    from phased.core import labels
    from phased.core.decide import decide
    from tests.core.builders import SETTINGS, T0, node, owned, phase, pod, snapshot, spec
    worker = pod("llm-train-g0-0", "train", 0, node_name="n0")
    worker = replace(worker, labels={**worker.labels, labels.LABEL_WORLD_SIZE: "99999999999"})
    status = TrainingJobStatus(state=JobState.RUNNING, phase="train", world_size=1)
    the_snapshot = snapshot(
        spec(phase("train", 1, 1)), [owned(node("n0"), NodeRole.ACTIVE)], [worker], status=status
    )
    plan = decide(the_snapshot, SETTINGS, T0)
    sys.exit(0 if len(plan.actions) < 100 else 3)
    """
)


def test_a_forged_world_size_label_does_not_exhaust_memory() -> None:
    root = Path(__file__).resolve().parents[2]
    # The checkout's own code, as in the test process (not whatever phased is installed).
    path = os.pathsep.join(filter(None, [str(root / "operator"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", _WORLD_SIZE_BOMB],
        cwd=str(root),
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-500:]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (labels.LABEL_RANK, "99999999999"),
        (labels.LABEL_RANK, "1"),  # nodes.max is 1: rank 1 cannot exist
        (labels.LABEL_RANK, "-1"),
        (labels.LABEL_GENERATION, "99999999999"),
        (labels.LABEL_GENERATION, "-2"),
        (labels.LABEL_ATTEMPT, "99999999999"),
    ],
)
def test_a_pod_with_a_forged_rank_generation_or_attempt_is_not_counted(
    key: str, value: str
) -> None:
    worker = pod("llm-train-g0-0", "train", 0, node_name="n0")
    forged = replace(pod("stray", "train", 0, node_name="n0"), labels={**worker.labels, key: value})
    status = TrainingJobStatus(state=JobState.RUNNING, phase="train", world_size=1)
    the_snapshot = snapshot(
        spec(phase("train", 1, 1)),
        [owned(node("n0"), NodeRole.ACTIVE)],
        [worker, forged],
        status=status,
    )
    plan = decide(the_snapshot, SETTINGS, T0)
    assert plan.status.restart_generation == 0
    assert plan.status.state == JobState.RUNNING
    assert not [a for a in plan.actions if isinstance(a, CreatePod | DeletePod)]
