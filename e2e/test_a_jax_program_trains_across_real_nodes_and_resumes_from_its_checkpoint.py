"""A real distributed training program on the real nodes: examples/jax-data-parallel's JAX
program (CPU, gloo collectives) trains across two real nodes, with the job's checkpoint
volume (a claim Phased creates, bound here to a host directory every node mounts) and the
program mounted from a ConfigMap through the pod template. Rank 0 reports each checkpoint to
the operator's endpoint with the job's token.

Then the kubelet of rank 1's node stops (a silent node). Phased cordons it, swaps the spare
in and starts a new generation told to resume from the last reported checkpoint: the new
generation's first step is the one after it, and its losses are the old generation's, step
for step (the data of a step is fixed, so a resumed run must reproduce them exactly). The
ledger's ``resumed`` is the new generation's first report, with the work lost since the last
checkpoint, and the job succeeds with its final checkpoint.

Needs the real nodes of ``make cluster`` (PHASED_REAL_NODES >= 3, as root) and their JAX
image: skipped without them, failed without them under CI."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import apply, get_job, live_workers, nodes_of, status
from e2e.real_nodes import (
    ExitCodes,
    create_jax_program,
    events,
    generation_running,
    host_checkpoint_volume,
    jax_training_job,
)

pytestmark = pytest.mark.timeout(900)

NAME = "jax"
STEPS = 360
EVERY = 10
PACE = 0.4  # s per step: generation 0 still trains when its silent node is found (~60 s)


@pytest.fixture
def checkpoints(core: Any, namespace: str) -> Iterator[tuple[str, Path]]:
    with host_checkpoint_volume(core, namespace) as volume:
        yield volume


def losses(volume: Path, generation: int) -> dict[int, float]:
    """Step → loss of one generation, from the loss log rank 0 keeps beside the checkpoints
    (it outlives the pods; a line cut short by a killed process is skipped)."""
    out = {}
    for line in (volume / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError, KeyError):
            entry = json.loads(line)
            if entry["generation"] == generation:
                out[int(entry["step"])] = float(entry["loss"])
    return out


def test_a_jax_run_resumes_from_its_last_checkpoint_after_a_kubelet_failure(
    real_operator: Operator,
    real: list[str],
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
    checkpoints: tuple[str, Path],
) -> None:
    storage_class, directory = checkpoints
    create_jax_program(core, namespace)
    apply(
        kubectl,
        namespace,
        jax_training_job(NAME, storage_class, steps=STEPS, every=EVERY, pace=PACE),
    )
    uid = get_job(kubectl, namespace, NAME)["metadata"]["uid"]

    def running() -> dict[str, Any] | None:
        st = status(kubectl, namespace, NAME)
        pool = st.get("pool") or {}
        full = len(pool.get("active", [])) == 2 and len(pool.get("spares", [])) == 1
        return st if full and st.get("state") == "Running" else None

    st = lib.wait_until(
        running, 300, message=lambda: f"the job running; {status(kubectl, namespace, NAME)}"
    )
    active, spares = set(st["pool"]["active"]), set(st["pool"]["spares"])
    assert active | spares <= set(real)

    # Generation 0 trains on two real nodes and reports checkpoints through the endpoint.
    pods = lib.wait_until(
        lambda: generation_running(core, namespace, uid, "train", 0, active, printed="step"),
        300,
        message="generation 0 training on two real nodes",
    )
    assert len({p.spec.node_name for p in pods}) == 2

    def checkpointed() -> dict[str, Any] | None:
        st = status(kubectl, namespace, NAME)
        last = (st.get("phases") or [{}])[0].get("lastCheckpoint") or {}
        return st if last.get("step", 0) >= 2 * EVERY else None

    st = lib.wait_until(checkpointed, 180, message="two checkpoints reported")
    last = st["phases"][0]["lastCheckpoint"]
    env = {e.name: e.value for e in pods[0].spec.containers[0].env}
    assert env["PHASED_CHECKPOINT_DIR"] == f"/checkpoints/{NAME}/train", env
    assert last["generation"] == 0 and last["path"].startswith(env["PHASED_CHECKPOINT_DIR"])
    on_volume = directory / Path(last["path"]).relative_to("/checkpoints")
    assert on_volume.is_file(), f"{last['path']} is not on the checkpoint volume"
    run_dir = on_volume.parent

    # The kubelet of rank 1's node stops; rank 0 (its kubelet healthy) keeps training until
    # the gang restart stops it.
    victim, survivor = pods[1].spec.node_name, pods[0].metadata.name
    with ExitCodes(core, namespace) as ended:
        lib.stop_kubelet(victim)

        def answered() -> dict[str, Any] | None:
            s = status(kubectl, namespace, NAME)
            entries = [f for f in s.get("failures", []) if f["node"] == victim]
            return s if entries and entries[0].get("resumed") else None

        st = lib.wait_until(
            answered,
            300,
            message=lambda: f"the failure of {victim} answered; {status(kubectl, namespace, NAME)}",
        )
    # The survivor ended through the program's own SIGTERM handler (128 + 15), not by the
    # SIGKILL at the end of its grace (137): as PID 1 it would have ignored SIGTERM.
    assert ended.codes.get(survivor) == 143, ended.codes
    entry = next(f for f in st["failures"] if f["node"] == victim)
    assert entry["replacedBy"] in spares and core.read_node(victim).spec.unschedulable
    assert nodes_of(core, uid).get(victim) == "quarantined"
    resume_step = entry["resumeStep"]
    assert resume_step >= 2 * EVERY and resume_step % EVERY == 0, entry
    # Rank 0 kept training (and checkpointing) while the silent node waited out the node
    # monitor grace: the last checkpoint may come before detection or after (then 0 lost).
    assert entry["lostWorkSeconds"] <= 2 * EVERY * PACE + 5, entry

    # The new generation resumes from that checkpoint: the step after it comes next, and
    # every step both generations took has the same loss.
    generation = int(st["restartGeneration"])
    healthy = (active - {victim}) | spares
    pods = lib.wait_until(
        lambda: generation_running(
            core, namespace, uid, "train", generation, healthy, printed="step"
        ),
        240,
        message=f"generation {generation} training on {sorted(healthy)}",
    )
    env = {e.name: e.value for e in pods[0].spec.containers[0].env}
    assert env["PHASED_RESUME_STEP"] == str(resume_step), env
    # "resumed" is training resumed (the new generation's first report), not pods Running.
    started = pods[0].status.container_statuses[0].state.running.started_at
    assert datetime.fromisoformat(entry["resumed"].replace("Z", "+00:00")) > started, entry
    resumed = next(
        e for e in events(core, namespace, pods[0].metadata.name) if e["event"] == "resume"
    )
    assert resumed["step"] == resume_step and resumed["path"] == env["PHASED_RESUME_FROM"]
    before, after = losses(run_dir, 0), losses(run_dir, generation)
    assert min(after) == resume_step + 1, sorted(after)[:3]
    assert resumed["loss"] == pytest.approx(before[resume_step], rel=1e-6)
    both = sorted(set(before) & set(after))
    for step in both:
        assert after[step] == pytest.approx(before[step], rel=1e-5), (step, before, after)
    assert after[min(after)] < 0.7 * before[1], "the loss went back to where training began"

    # It trains to the end and the job succeeds with the final checkpoint.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        st = status(kubectl, namespace, NAME)
        if st.get("state") in ("Succeeded", "Failed"):
            break
        time.sleep(2)
    assert st.get("state") == "Succeeded", f"{st}\n{real_operator.tail(60)}"
    final = st["phases"][0]["lastCheckpoint"]
    assert final["final"] and final["step"] == STEPS and final["generation"] == generation
    done = [e for e in events(core, namespace, pods[0].metadata.name) if e["event"] == "done"]
    assert done and done[0]["step"] == STEPS
    # Phased reads a worker as ended from its worker container; the kubelet writes the pod's
    # phase Succeeded only once it has torn the pod down (its volumes unmounted), a moment
    # later, so the job may be Succeeded before both pods say so.

    def succeeded_on() -> set[str] | None:
        pods = live_workers(core, namespace, uid)
        on = {p.spec.node_name for p in pods if p.status.phase == "Succeeded"}
        return on if on == healthy else None

    lib.wait_until(
        succeeded_on,
        60,
        message=lambda: (
            "both workers Succeeded; pods: "
            + str([(p.spec.node_name, p.status.phase) for p in live_workers(core, namespace, uid)])
        ),
    )
