"""A node of a job on the real nodes (kubelet, containerd, runc) loses the worker image, as
a disk or a registry mirror that lost it would: after a restart, the worker placed there
waits in ``ErrImagePull`` (nothing to pull it from) while its peer runs on another node.
Past ``pendingGrace`` the node trades places with the spare, the retry runs there, and the
node, held as a spare, carries ``phased.dev/stalled`` saying what it did (promoted last
from then on) until its release.

Needs the real nodes of ``make cluster`` (PHASED_REAL_NODES >= 3, as root): skipped without
them, failed without them under CI."""

from __future__ import annotations

from typing import Any

import pytest
from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import apply, get_job, status
from e2e.real_nodes import generation_running
from e2e.test_real_nodes_run_a_training_job_through_a_kubelet_failure import (
    IMAGE,
    WORKER,
    training_job,
)

pytestmark = pytest.mark.timeout(900)


def test_a_node_a_worker_cannot_start_on_trades_places_with_the_spare_and_is_marked(
    real_operator: Operator,
    real: list[str],
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
) -> None:
    alias = "phased.local/stall-check:1"
    for node in real:
        lib.node_images(node, "tag", "--force", IMAGE, alias)
    try:
        name = "stall"
        job = training_job(name)
        job["spec"]["template"]["image"] = alias
        # Generation 0 trains until it is stopped; a later one for 10 steps (20 s).
        program = WORKER.replace("step < 3", "step < 10")
        job["spec"]["template"]["command"] = ["python3", "-u", "-c", program]
        job["spec"]["phases"] = job["spec"]["phases"][1:]  # train only
        job["spec"]["failurePolicy"] = {"notReadyGrace": "3s", "pendingGrace": "5s"}
        apply(kubectl, namespace, job)
        uid = get_job(kubectl, namespace, name)["metadata"]["uid"]

        def running() -> dict[str, Any] | None:
            st = status(kubectl, namespace, name)
            pool = st.get("pool") or {}
            return st if len(pool.get("active", [])) == 2 and pool.get("spares") else None

        st = lib.wait_until(running, 240, message=lambda: f"{status(kubectl, namespace, name)}")
        active, (spare,) = set(st["pool"]["active"]), st["pool"]["spares"]
        pods = lib.wait_until(
            lambda: generation_running(core, namespace, uid, "train", 0, active),
            240,
            message="generation 0's two workers running and met",
        )
        first, stalling = pods[0].spec.node_name, pods[1].spec.node_name
        lib.node_images(stalling, "rm", alias)  # its running worker keeps running
        assert lib.kill_node_containers(first) >= 1  # rank 0 fails: the gang restarts

        def retried() -> list[Any] | None:
            gen = int(status(kubectl, namespace, name).get("restartGeneration") or 0)
            if gen < 2:
                return None
            return generation_running(core, namespace, uid, "train", gen, {first, spare})

        lib.wait_until(
            retried,
            240,
            message=lambda: (
                f"the retry on {first} and {spare}; "
                f"{status(kubectl, namespace, name)}\n{real_operator.tail(40)}"
            ),
        )
        mark = core.read_node(stalling).metadata.annotations.get("phased.dev/stalled", "")
        assert "did not start worker" in mark, mark
        assert any(r in mark for r in ("ErrImagePull", "ImagePullBackOff")), mark
        st = status(kubectl, namespace, name)
        assert stalling in st["pool"]["spares"] and spare in st["pool"]["active"], st
        said = kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            f"involvedObject.name={name},reason=TroubledNodeSwapped",
            "-o",
            "jsonpath={range .items[*]}{.message}{'\\n'}{end}",
        )
        assert f"active node {stalling} did not start worker" in said, said
        assert f"spare {spare} takes its place" in said, said

        lib.wait_until(
            lambda: status(kubectl, namespace, name).get("state") == "Succeeded",
            240,
            message=lambda: f"the job succeeded; {status(kubectl, namespace, name)}",
        )
        # Released with the job's end, the node keeps no mark of it.
        lib.wait_until(
            lambda: (
                "phased.dev/stalled" not in (core.read_node(stalling).metadata.annotations or {})
            ),
            60,
            message=f"{stalling}'s stalled mark gone with its release",
        )
    finally:
        for node in real:
            lib.node_images(node, "rm", alias, check=False)
