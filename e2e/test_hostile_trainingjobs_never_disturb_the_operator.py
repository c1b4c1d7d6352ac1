"""A sample of the hostile TrainingJobs the property tests generate, applied to the real API
server with the operator running: each is refused by `kubectl apply` with a message, or
accepted and then judged by the operator (Invalid, or run); the operator never falls over
and a well-formed job next to them still runs to the end."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import apply, status, wait_state
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from tests.hostile.strategies import hostile_spec_dicts, odd_text, valid_spec_dicts

SAMPLES = 40
seen: dict[str, Any] = {"refused": 0, "accepted": []}


@pytest.fixture(scope="module")
def hostile_namespace(core: Any, crd: None) -> Any:
    name = lib.create_namespace(core, "hostile")
    yield name
    lib.delete_namespace(core, name)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@settings(
    max_examples=SAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@seed(20261129)
@given(
    spec=st.one_of(hostile_spec_dicts(odd_text), valid_spec_dicts()).filter(_finite),
    index=st.integers(0, 10**6),
)
def test_a_hostile_trainingjob_is_refused_or_judged(
    spec: Any, index: int, operator: Operator, kubectl: lib.Kubectl, hostile_namespace: str
) -> None:
    name = f"hostile-{index}"
    manifest = {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": hostile_namespace},
        "spec": spec,
    }
    result = kubectl.run("apply", "-f", "-", input=json.dumps(manifest), check=False)
    if result.returncode != 0:
        seen["refused"] += 1
        assert result.stderr.strip(), "a refusal must say why"
        assert "Traceback" not in result.stderr
    else:
        seen["accepted"].append(name)
    assert operator.alive, operator.tail()


def test_the_operator_judged_every_accepted_one_and_kept_serving(
    operator: Operator, kubectl: lib.Kubectl, core: Any, hostile_namespace: str
) -> None:
    for name in seen["accepted"]:
        st_ = lib.wait_until(
            lambda name=name: status(kubectl, hostile_namespace, name).get("state"),
            60,
            message=f"a state for {name}",
        )
        assert st_ in {"Invalid", "Pending", "Waiting", "Running", "Succeeded", "Failed"}
    honest = {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "honest"},
        "spec": {
            "template": {"image": "busybox:1.36"},
            "phases": [
                {
                    "name": "only",
                    "nodes": {"min": 1, "max": 1},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "template": {"annotations": {"sim.phased.dev/succeed-after": "3s"}},
                }
            ],
        },
    }
    kubectl("delete", "trainingjob", "--all", "-n", hostile_namespace, "--wait=false")
    apply(kubectl, hostile_namespace, honest)
    wait_state(kubectl, hostile_namespace, "honest", {"Succeeded"}, 120, operator)
    assert operator.alive
    print(
        f"\nhostile sample: {seen['refused']} refused by the API server,"
        f" {len(seen['accepted'])} accepted and judged by the operator"
    )
    assert seen["refused"] + len(seen["accepted"]) == SAMPLES
