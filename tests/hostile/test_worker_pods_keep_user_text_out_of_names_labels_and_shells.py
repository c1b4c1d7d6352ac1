"""Worker pods built from any valid spec: valid names, label values we choose, exec-form args.

Whatever text a valid spec carries (odd Unicode, shell metacharacters, 4 KiB arguments), the
pod the core builds has DNS-1123 names within 63 characters, labels whose keys are Phased's
own and whose values are valid label values, the command, args and env exactly as written —
list items, never joined into a shell string — and Phased's own environment variables, which
a template cannot override. Workers get no ServiceAccount token unless the cluster admin
configured one, and no privileged, host or volume field.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from phased.api.podtemplate import RESERVED_ENV_MESSAGE
from phased.api.v1alpha1 import EnvVar, TrainingJobSpec, parse_spec
from phased.core import labels
from phased.core.model import JobRef
from phased.core.settings import Settings, WorkerPolicy
from phased.core.workers import LAUNCHER_ENV, Worker, service_manifest
from tests.hostile.strategies import (
    is_dns1035_label,
    is_dns_label,
    is_label_value,
    is_qualified_name,
    job_names,
    namespaces,
    reserved_env_names,
    user_text,
    valid_spec_dicts,
)

BOUNDED = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SETTINGS = Settings()
OUR_LABEL_KEYS = {
    labels.LABEL_JOB_UID,
    labels.LABEL_JOB,
    labels.LABEL_PHASE,
    labels.LABEL_RANK,
    labels.LABEL_GENERATION,
    labels.LABEL_WORLD_SIZE,
    labels.LABEL_ATTEMPT,
    labels.LABEL_RESTARTS,
    labels.LABEL_WORKER_RESTARTS,
    labels.LABEL_REPORTING,
    labels.LABEL_WORKER_SPEC,
    labels.LABEL_CHECKPOINT_INTERVAL,
    labels.LABEL_GPUS_PER_NODE,
    labels.LABEL_GPU_TYPES,
    labels.LABEL_MANAGED_BY,
}
SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "-c"}
POD_SPEC_KEYS = {
    "restartPolicy",
    "automountServiceAccountToken",
    "hostname",
    "subdomain",
    "tolerations",
    "affinity",
    "containers",
    "serviceAccountName",
}
CONTAINER_KEYS = {"name", "image", "env", "ports", "command", "args", "resources"}


@st.composite
def workers(draw: st.DrawFn) -> Worker:
    spec = parse_spec(draw(valid_spec_dicts()))
    phase = draw(st.sampled_from(spec.phases))
    job = JobRef(
        namespace=draw(namespaces),
        name=draw(job_names),
        uid=str(draw(st.uuids())),
        generation=draw(st.integers(1, 2**31)),
    )
    world = draw(st.integers(1, 5000))
    resource = None
    if phase.gpu_types:
        resource = SETTINGS.gpu_types[draw(st.sampled_from(phase.gpu_types))].resource
    return Worker(
        job=job,
        spec=spec,
        phase=phase,
        generation=draw(st.integers(0, 10000)),
        rank=draw(st.integers(0, world - 1)),
        world_size=world,
        attempt=draw(st.integers(0, 10000)),
        resource=resource,
        installation=draw(st.sampled_from(["", SETTINGS.installation, "team-b"])),
    )


@BOUNDED
@given(workers())
def test_names_are_dns_labels_within_63_characters(worker: Worker) -> None:
    pod = worker.manifest()
    assert is_dns_label(pod["metadata"]["name"]), pod["metadata"]["name"]
    assert is_dns_label(pod["spec"]["hostname"])
    assert is_dns1035_label(pod["spec"]["subdomain"])
    service = service_manifest(worker.job)
    assert service["metadata"]["name"] == pod["spec"]["subdomain"]
    assert pod["spec"]["containers"][0]["name"] == "worker"
    # rank 0's stable address: hostname.subdomain.namespace.svc, each part a DNS label
    host, service_name, namespace, svc = worker.master_addr.split(".")
    assert is_dns_label(host) and host.endswith(f"-g{worker.generation}-0")
    assert (service_name, namespace, svc) == (pod["spec"]["subdomain"], worker.job.namespace, "svc")


@BOUNDED
@given(workers())
def test_label_keys_are_ours_and_values_are_valid_label_values(worker: Worker) -> None:
    for manifest in (worker.manifest(), service_manifest(worker.job)):
        found = manifest["metadata"]["labels"]
        assert set(found) <= OUR_LABEL_KEYS
        for value in found.values():
            assert is_label_value(value), value
    selector = worker.affinity()["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    for term in selector["nodeSelectorTerms"]:
        for expr in term["matchExpressions"]:
            assert expr["key"] in OUR_LABEL_KEYS | {labels.LABEL_ROLE, labels.LABEL_INSTALLATION}
            assert all(is_label_value(v) for v in expr.get("values", ()))


@BOUNDED
@given(workers())
def test_command_args_and_env_are_passed_as_written_in_exec_form(worker: Worker) -> None:
    template = worker.spec.worker_pod(worker.phase).worker
    container = worker.manifest()["spec"]["containers"][0]
    assert container["name"] == "worker"
    assert container.get("command") == template.get("command")
    assert container.get("args") == template.get("args")
    if "command" not in template:  # the image's entrypoint runs; Phased adds no shell
        assert "command" not in container
    elif not template["command"] or template["command"][0] not in SHELLS:
        assert not SHELLS & set(container["command"]) - set(template["command"])
    env = {e["name"]: e["value"] for e in container["env"]}
    assert len(env) == len(container["env"]), "one value per name"
    for var in template.get("env") or []:
        assert env[var["name"]] == var["value"]  # byte for byte: no quoting, no expansion
    for name in LAUNCHER_ENV[worker.launcher.type](worker):  # the job may draw any launcher
        assert name in env


@BOUNDED
@given(workers(), st.lists(reserved_env_names, min_size=1, max_size=4, unique=True), user_text)
def test_a_template_cannot_override_phased_env(
    worker: Worker, names: list[str], value: str
) -> None:
    """Even past validation (the models refuse such a spec), the worker gets Phased's value."""
    forged_env = [EnvVar(name=n, value=value) for n in names]
    template = worker.spec.template.model_copy(update={"env": forged_env})
    phase = worker.phase.model_copy(
        update={"template": worker.phase.template.model_copy(update={"env": forged_env})}
    )
    forged = replace(
        worker, spec=worker.spec.model_copy(update={"template": template}), phase=phase
    )
    ours = forged.env()
    container = forged.manifest()["spec"]["containers"][0]
    got = [(e["name"], e["value"]) for e in container["env"]]
    for name, phased_value in ours.items():
        assert [v for n, v in got if n == name] == [phased_value]


@BOUNDED
@given(st.lists(reserved_env_names, min_size=1, max_size=3, unique=True), st.booleans())
def test_a_template_asking_for_phased_env_is_refused(names: list[str], in_phase: bool) -> None:
    env = [{"name": n, "value": "forged"} for n in names]
    template: dict[str, Any] = {"image": "r.example/llm:1"}
    phase: dict[str, Any] = {"name": "train", "nodes": {"min": 1, "max": 2}}
    if in_phase:
        phase["template"] = {"spec": {"containers": [{"name": "worker", "env": env}]}}
    else:
        template["env"] = env
    with pytest.raises(ValidationError, match=RESERVED_ENV_MESSAGE.replace("*", "[*]")):
        parse_spec({"phases": [phase], "template": template})


@BOUNDED
@given(workers(), st.sampled_from(["", "trainer"]))
def test_workers_get_no_operator_account_and_no_host_access(worker: Worker, account: str) -> None:
    worker = Worker(**{**worker.__dict__, "service_account": account})
    pod = worker.manifest()
    spec = pod["spec"]
    assert set(spec) <= POD_SPEC_KEYS
    assert set(spec["containers"][0]) <= CONTAINER_KEYS
    if account:
        assert spec["serviceAccountName"] == account and spec["automountServiceAccountToken"]
    else:
        assert "serviceAccountName" not in spec and spec["automountServiceAccountToken"] is False
    assert "securityContext" not in spec and "volumes" not in spec
    assert not any(k.startswith("host") and k != "hostname" for k in spec)


def test_the_default_settings_give_workers_no_token() -> None:
    assert WorkerPolicy().service_account == ""


# --- map keys in the template: the models refuse what the API server would refuse ------------


def _worker_for(template: dict[str, Any]) -> Worker | None:
    """The worker pod for ``template``, or None when the models refuse the template (the job
    becomes InvalidSpec and no pod is made)."""
    try:
        spec: TrainingJobSpec = parse_spec(
            {"phases": [{"name": "train", "nodes": {"min": 1, "max": 1}}], "template": template}
        )
    except ValidationError:
        return None
    job = JobRef(namespace="ml", name="llm", uid="0b5c2d1e-0000-4000-8000-000000000000")
    return Worker(job=job, spec=spec, phase=spec.phases[0], generation=0, rank=0, world_size=1)


GOOD_KEYS = ["a" * 253 + "/" + "x" * 63, "example.com/Run_1.2", "Z", "x" * 63]
BAD_KEYS = ["not a key", "UPPER/x", "a/b/c", "", "x" * 64, "é", "a" * 254 + "/x", "x\n", "-x"]


@pytest.mark.parametrize("key", BAD_KEYS + GOOD_KEYS)
def test_annotation_keys_in_the_pod_are_valid_kubernetes_keys(key: str) -> None:
    worker = _worker_for({"image": "r.example/llm:1", "annotations": {key: "v"}})
    assert (worker is None) == (key in BAD_KEYS)
    if worker is not None:
        pod = worker.manifest()
        assert all(is_qualified_name(k) for k in pod["metadata"].get("annotations", {}))


@pytest.mark.parametrize("key", ["not a resource", *BAD_KEYS, "cpu", "hugepages-2Mi", *GOOD_KEYS])
def test_resource_names_in_the_pod_are_valid_kubernetes_names(key: str) -> None:
    worker = _worker_for({"image": "r.example/llm:1", "resources": {"limits": {key: "1"}}})
    assert (worker is None) == (key in BAD_KEYS or key == "not a resource")
    if worker is not None:
        limits = worker.manifest()["spec"]["containers"][0].get("resources", {}).get("limits", {})
        assert all(is_qualified_name(k) for k in limits)
