"""Edits of a running job on a real API server and operator: `kubectl apply` refuses, with
its message, an edit that rewrites phases that started or the running phase's GPU shape (the
CRD's transition rules, with the status the operator wrote); status writes still pass; and
an allowed edit of a running job — fewer nodes, more spares — takes effect cleanly."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from e2e import lib
from e2e.harness import CRD, Operator
from e2e.operator_fixtures import (
    apply,
    events,
    get_job,
    live_workers,
    nodes_of,
    status,
    wait_state,
)
from tests.api.invalid_cases import EDIT_CASES, EditCase, running_job


@pytest.fixture(scope="module")
def edits_namespace(core: Any, crd: None) -> Any:
    name = lib.create_namespace(core, "edits")
    yield name
    lib.delete_namespace(core, name)


def _yaml(manifest: dict[str, Any], namespace: str, name: str) -> str:
    moved = json.loads(json.dumps(manifest))
    moved["metadata"].update({"namespace": namespace, "name": name})
    return yaml.safe_dump(moved)


def _write_status(kubectl: lib.Kubectl, namespace: str, name: str, body: dict[str, Any]) -> None:
    kubectl(
        "patch",
        "tj",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": body}),
    )


@pytest.mark.parametrize("index", range(len(EDIT_CASES)), ids=[c.id for c in EDIT_CASES])
def test_an_edit_of_a_started_job_is_refused_or_accepted_as_the_table_says(
    index: int, kubectl: lib.Kubectl, edits_namespace: str
) -> None:
    case: EditCase = EDIT_CASES[index]
    name = f"edit-{index}"
    kubectl("apply", "-f", "-", input=_yaml(running_job(), edits_namespace, name))
    _write_status(kubectl, edits_namespace, name, case.status)

    result = kubectl.run(
        "apply", "-f", "-", input=_yaml(case.after, edits_namespace, name), check=False
    )
    if case.api_error is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0, f"accepted: {case.id}"
        assert case.api_error in result.stderr, result.stderr
        assert case.field in result.stderr, result.stderr

    # The status subresource re-validates the whole object: the operator's writes still pass.
    _write_status(kubectl, edits_namespace, name, {"message": "written after the edit"})
    assert status(kubectl, edits_namespace, name)["message"] == "written after the edit"
    kubectl("delete", "tj", name, "-n", edits_namespace, "--wait=false")


def _train_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"]},
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 2, "max": 4},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                },
                {
                    "name": "validate",
                    "nodes": {"min": 1, "max": 2},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                },
            ],
            "spares": {"count": 1},
        },
    }


def _patch(kubectl: lib.Kubectl, namespace: str, name: str, ops: list[dict[str, Any]]) -> Any:
    return kubectl.run(
        "patch", "tj", name, "-n", namespace, "--type=json", "-p", json.dumps(ops), check=False
    )


def test_a_running_job_refuses_a_new_gpu_shape_and_follows_fewer_nodes_and_more_spares(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    job = _train_job("resized")
    apply(kubectl, namespace, job)
    uid = get_job(kubectl, namespace, "resized")["metadata"]["uid"]

    def running_on(count: int) -> dict[str, Any] | None:
        st = status(kubectl, namespace, "resized")
        workers = [p for p in live_workers(core, namespace, uid) if p.status.phase == "Running"]
        ok = st.get("state") == "Running" and st.get("worldSize") == count
        return st if ok and len(workers) == count else None

    st = lib.wait_until(lambda: running_on(4), 120, 1, message=lambda: operator.tail(40))
    assert st["phases"][0]["gpusPerNode"] == 8 and st["phases"][0]["gpuTypes"] == ["H100"]
    old_workers = {p.metadata.name for p in live_workers(core, namespace, uid)}

    # What cannot be honoured is refused at apply, with the message, and nothing moves.
    refused = json.loads(json.dumps(job))
    refused["spec"]["phases"][0]["gpusPerNode"] = 4
    result = kubectl.run(
        "apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(refused), check=False
    )
    assert result.returncode != 0
    assert "the running phase's GPU shape (gpusPerNode, gpuTypes) cannot change" in result.stderr
    reordered = json.loads(json.dumps(job))
    reordered["spec"]["phases"].reverse()
    result = kubectl.run(
        "apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(reordered), check=False
    )
    assert result.returncode != 0
    assert "a phase that has started or run cannot be removed, renamed or reordered" in (
        result.stderr
    )

    # Fewer nodes: the gang restarts at once on 2 nodes; the extra nodes go back.
    done = _patch(
        kubectl,
        namespace,
        "resized",
        [{"op": "replace", "path": "/spec/phases/0/nodes", "value": {"min": 2, "max": 2}}],
    )
    assert done.returncode == 0, done.stderr
    st = lib.wait_until(lambda: running_on(2), 120, 1, message=lambda: operator.tail(40))
    assert st["restartGeneration"] == 1
    assert st.get("failures", []) == [] and st.get("restarts", 0) == 0
    held = lib.wait_until(
        lambda: (h := nodes_of(core, uid)) and len(h) == 3 and h,
        60,
        1,
        message=lambda: f"{nodes_of(core, uid)}",
    )
    assert sorted(held.values()) == ["active", "active", "spare"]
    workers = live_workers(core, namespace, uid)
    assert not {p.metadata.name for p in workers} & old_workers
    assert {p.spec.node_name for p in workers} == {n for n, r in held.items() if r == "active"}

    # More spares: claimed while the workers keep running.
    running = {p.metadata.name for p in workers}
    done = _patch(
        kubectl, namespace, "resized", [{"op": "replace", "path": "/spec/spares/count", "value": 3}]
    )
    assert done.returncode == 0, done.stderr
    lib.wait_until(
        lambda: sorted(nodes_of(core, uid).values()).count("spare") == 3,
        60,
        1,
        message=lambda: f"{nodes_of(core, uid)}",
    )
    time.sleep(2)
    assert {p.metadata.name for p in live_workers(core, namespace, uid)} == running
    st = wait_state(kubectl, namespace, "resized", {"Running"}, 30, operator)
    assert st["restartGeneration"] == 1
    assert not any(
        c["type"] == "InvalidSpec" and c["status"] == "True" for c in st.get("conditions", [])
    )
    kubectl("delete", "tj", "resized", "-n", namespace, "--wait=false")
    lib.wait_until(lambda: not nodes_of(core, uid), 60, 1, message="the pool given back")


def _crd_without_transition_rules() -> str:
    """The CRD as it was before it carried the transition rules (an older install)."""
    crd = yaml.safe_load(CRD.read_text())
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    root["x-kubernetes-validations"] = [
        r for r in root["x-kubernetes-validations"] if "oldSelf" not in r["rule"]
    ]
    return yaml.safe_dump(crd)


def test_an_edit_that_got_past_an_older_crd_holds_the_job_until_it_is_put_back(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    job = _train_job("slipped")
    apply(kubectl, namespace, job)
    uid = get_job(kubectl, namespace, "slipped")["metadata"]["uid"]
    st = wait_state(kubectl, namespace, "slipped", {"Running"}, 120, operator)
    lib.wait_until(
        lambda: len(live_workers(core, namespace, uid)) == st["worldSize"], 60, 1, message="pods"
    )
    workers = {p.metadata.name for p in live_workers(core, namespace, uid)}
    held = nodes_of(core, uid)

    reordered = json.loads(json.dumps(job))
    reordered["spec"]["phases"].reverse()  # once turned the running job Succeeded
    kubectl("apply", "-f", "-", input=_crd_without_transition_rules())
    try:
        lib.wait_until(
            lambda: (
                kubectl.run(
                    "apply",
                    "-n",
                    namespace,
                    "-f",
                    "-",
                    input=yaml.safe_dump(reordered),
                    check=False,
                ).returncode
                == 0
            ),
            30,
            1,
            message="the older CRD to accept the reorder",
        )
    finally:
        kubectl("apply", "-f", str(CRD))

    st = wait_state(kubectl, namespace, "slipped", {"Invalid"}, 60, operator)
    condition = next(c for c in st["conditions"] if c["type"] == "InvalidSpec")
    assert condition["status"] == "True" and "'train' has already started" in condition["message"]
    assert (st["phase"], st["phaseIndex"]) == ("train", 0)
    time.sleep(3)  # a few passes: still nothing touched
    assert {p.metadata.name for p in live_workers(core, namespace, uid)} == workers
    assert nodes_of(core, uid) == held
    assert status(kubectl, namespace, "slipped")["state"] == "Invalid"
    said = events(kubectl, namespace, "involvedObject.name=slipped,reason=InvalidSpec")
    assert said and said[0]["type"] == "Warning"

    # Put back: the rules judge the edit against the status, which still has train first.
    apply(kubectl, namespace, job)
    st = wait_state(kubectl, namespace, "slipped", {"Running"}, 60, operator)
    assert st["restartGeneration"] == 0
    assert {p.metadata.name for p in live_workers(core, namespace, uid)} == workers
    kubectl("delete", "tj", "slipped", "-n", namespace, "--wait=false")
    lib.wait_until(lambda: not nodes_of(core, uid), 60, 1, message="the pool given back")
