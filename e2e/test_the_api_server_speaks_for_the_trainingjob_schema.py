"""The TrainingJob API on a real kube-apiserver: every invalid case of the table is refused by
`kubectl apply` with its message, every example and valid edge case is accepted, `kubectl get
tj` shows the columns, and `kubectl explain` documents the fields. What only the operator can
judge becomes an InvalidSpec condition and a Warning event, while other jobs carry on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import lib
from e2e.harness import REPO, Operator
from e2e.operator_fixtures import apply, said_soon, status, wait_state
from tests.api.invalid_cases import INVALID_CASES, VALID_CASES

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def api_namespace(core: Any, crd: None) -> Any:
    name = lib.create_namespace(core, "api")
    yield name
    lib.delete_namespace(core, name)


@pytest.mark.parametrize("case", INVALID_CASES, ids=[c.id for c in INVALID_CASES])
def test_an_invalid_trainingjob_is_refused_with_its_message(
    case: Any, kubectl: lib.Kubectl, api_namespace: str
) -> None:
    result = kubectl.run(
        "apply",
        "-n",
        api_namespace,
        "-f",
        "-",
        input=_placed(case.manifest, api_namespace),
        check=False,
    )
    assert result.returncode != 0, f"accepted: {case.id}"
    assert case.api_error in result.stderr, result.stderr


@pytest.mark.parametrize(
    "manifest",
    [c.manifest for c in VALID_CASES] + [yaml.safe_load(p.read_text()) for p in EXAMPLES],
    ids=[c.id for c in VALID_CASES] + [p.stem for p in EXAMPLES],
)
def test_a_valid_trainingjob_and_every_example_is_accepted(
    manifest: dict[str, Any], kubectl: lib.Kubectl, api_namespace: str
) -> None:
    result = kubectl.run(
        "apply",
        "--dry-run=server",
        "-n",
        api_namespace,
        "-f",
        "-",
        input=_placed(manifest, api_namespace),
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_get_shows_the_columns_and_explain_documents_every_field(
    kubectl: lib.Kubectl, api_namespace: str
) -> None:
    example = yaml.safe_load(Path(REPO / "examples" / "training-100b.yaml").read_text())
    kubectl("apply", "-n", api_namespace, "-f", "-", input=_placed(example, api_namespace))
    header = kubectl("get", "tj", "-n", api_namespace).splitlines()[0].split()
    for column in ("NAME", "PHASE", "STATE", "ACTIVE", "SPARES", "UTIL%", "INTERRUPTION", "AGE"):
        assert column in header, header
    kubectl("delete", "tj", "--all", "-n", api_namespace, "--wait=false")

    explained = kubectl("explain", "trainingjob.spec.phases", "--recursive=false")
    for field in (
        "name",
        "nodes",
        "gpuTypes",
        "gpusPerNode",
        "template",
        "maxDuration",
        "expectedDuration",
        "completion",
    ):
        assert f"  {field}\t" in explained or f"  {field} " in explained, field
    # The pod spec is the API server's own, documented as in `kubectl explain pod.spec`.
    explained = kubectl("explain", "trainingjob.spec.template.spec", "--recursive=false")
    for field in ("volumes", "initContainers", "securityContext", "tolerations", "hostNetwork"):
        assert f"  {field}\t" in explained or f"  {field} " in explained, field
    explained = kubectl("explain", "trainingjob.spec.phases.template.spec.containers.env")
    assert "valueFrom" in explained
    crd = json.loads(kubectl("get", "crd", "trainingjobs.phased.dev", "-o", "json"))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    undocumented = [
        p for p in _undocumented(schema["properties"]["spec"], "spec") if not _generated(p)
    ]
    assert not undocumented, undocumented


def _generated(path: str) -> bool:
    """A list item or a field deeper than three levels into the generated pod spec (which
    describes its fields down to containers[].env[].valueFrom; see hack/gen-pod-schema.py)."""
    for root in ("spec.template.spec.", "spec.phases[].template.spec."):
        if path.startswith(root):
            return path.endswith("[]") or path[len(root) :].replace("[]", "").count(".") >= 3
    return ".valueFrom." in path


def _placed(manifest: dict[str, Any], namespace: str) -> str:
    """The manifest as YAML, moved into ``namespace``."""
    moved = json.loads(json.dumps(manifest))
    moved.setdefault("metadata", {})["namespace"] = namespace
    return yaml.safe_dump(moved)


def _undocumented(schema: dict[str, Any], path: str) -> Any:
    if not schema.get("description"):
        yield path
    for key, sub in (schema.get("properties") or {}).items():
        yield from _undocumented(sub, f"{path}.{key}")
    if "items" in schema:
        yield from _undocumented(schema["items"], f"{path}[]")


def test_a_spec_only_the_operator_can_judge_becomes_invalid_spec_and_others_carry_on(
    operator: Operator, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    bad = {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "sneaky"},
        "spec": {
            "template": {
                "image": "busybox:1.36",
                "env": [{"name": "MY_FLAG", "value": "1"}],
                # GPUs are Phased's to give (the phase's gpusPerNode); which resource names
                # are GPUs only the operator's settings say, so the API server lets it pass.
                "resources": {"limits": {"nvidia.com/gpu": "8"}},
            },
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 1, "max": 1},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                }
            ],
        },
    }
    good = json.loads(json.dumps(bad))
    good["metadata"]["name"] = "honest"
    del good["spec"]["template"]["resources"]
    good["spec"]["phases"][0]["template"] = {"annotations": {"sim.phased.dev/succeed-after": "3s"}}
    apply(kubectl, namespace, bad)
    apply(kubectl, namespace, good)

    st = wait_state(kubectl, namespace, "sneaky", {"Invalid"}, 60, operator)
    condition = next(c for c in st["conditions"] if c["type"] == "InvalidSpec")
    assert condition["status"] == "True"
    assert "nvidia.com/gpu" in condition["message"]
    assert condition["observedGeneration"] >= 1
    said_soon(kubectl, namespace, "involvedObject.name=sneaky,type=Warning", "InvalidSpec")
    assert not core.list_node(label_selector="phased.dev/job=sneaky").items

    wait_state(kubectl, namespace, "honest", {"Succeeded"}, 120, operator)
    assert operator.alive

    # Fixing the spec lets the job run: the operator re-judges every new generation.
    kubectl(
        "patch",
        "tj",
        "sneaky",
        "-n",
        namespace,
        "--type=json",
        "-p",
        json.dumps(
            [
                {"op": "remove", "path": "/spec/template/resources"},
                {
                    "op": "add",
                    "path": "/spec/phases/0/template",
                    "value": {"annotations": {"sim.phased.dev/succeed-after": "3s"}},
                },
            ]
        ),
    )
    wait_state(kubectl, namespace, "sneaky", {"Succeeded"}, 120, operator)
    assert not any(
        c["type"] == "InvalidSpec" and c["status"] == "True"
        for c in status(kubectl, namespace, "sneaky")["conditions"]
    )
