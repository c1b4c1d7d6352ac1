from phased.api.v1alpha1 import NodeRole
from phased.core import labels
from phased.core.model import JobRef
from phased.core.workers import Worker, pod_name, service_manifest
from tests.core.builders import JOB, phase, spec


def _worker(**kw):
    the_spec = kw.pop(
        "the_spec",
        spec(
            phase("train", 2, 2),
            template={
                "image": "registry.example/llm:1",
                "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                "annotations": {"sim.phased.dev/run-seconds": "60"},
                "resources": {"requests": {"cpu": "32"}},
            },
        ),
    )
    args = dict(
        job=JOB,
        spec=the_spec,
        phase=the_spec.phases[0],
        generation=0,
        rank=1,
        world_size=2,
        resource="nvidia.com/gpu",
    )
    args.update(kw)
    return Worker(**args)


def test_the_pod_has_everything_a_rank_needs():
    m = _worker().manifest()
    meta, pod_spec = m["metadata"], m["spec"]
    assert meta["name"] == "llm-train-g0-1"
    assert (
        meta["labels"][labels.LABEL_RANK] == "1"
        and meta["labels"]["app.kubernetes.io/managed-by"] == "phased"
    )
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "phased.dev/v1alpha1",
            "kind": "TrainingJob",
            "name": "llm",
            "uid": "uid-llm",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["annotations"] == {"sim.phased.dev/run-seconds": "60"}
    assert (
        pod_spec["restartPolicy"] == "Never" and pod_spec["automountServiceAccountToken"] is False
    )
    assert "serviceAccountName" not in pod_spec
    assert (pod_spec["hostname"], pod_spec["subdomain"]) == ("llm-train-g0-1", "llm")
    env = {e["name"]: e["value"] for e in pod_spec["containers"][0]["env"]}
    assert env["PHASED_MASTER_ADDR"] == "llm-train-g0-0.llm.ml.svc" == env["MASTER_ADDR"]
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_PORT"]) == ("1", "2", "29500")
    assert env["PHASED_RESUME"] == "false" and env["NCCL_DEBUG"] == "INFO"
    assert env["PHASED_CHECKPOINT_DIR"] == "/checkpoints/llm/train"
    assert env["PHASED_CHECKPOINT_INTERVAL_SECONDS"] == "3600"
    res = pod_spec["containers"][0]["resources"]
    assert res["requests"] == {"cpu": "32", "nvidia.com/gpu": "8"} and res["limits"] == {
        "nvidia.com/gpu": "8"
    }
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms[0]["matchExpressions"][1] == {
        "key": labels.LABEL_ROLE,
        "operator": "In",
        "values": [NodeRole.ACTIVE.value],
    }
    assert "podAntiAffinity" not in pod_spec["affinity"]
    assert {t["key"] for t in pod_spec["tolerations"]} == {labels.TAINT_POOL, labels.TAINT_SPARE}


def test_cpu_workers_keep_apart_by_hostname():
    the_spec = spec(phase("prep", 2, 2, gpu_types=[]))
    m = _worker(the_spec=the_spec, phase=the_spec.phases[0], resource=None).manifest()
    assert (
        m["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            0
        ]["topologyKey"]
        == "kubernetes.io/hostname"
    )
    assert "resources" not in m["spec"]["containers"][0]


def test_a_configured_service_account_is_used():
    m = _worker(service_account="trainer").manifest()
    assert m["spec"]["serviceAccountName"] == "trainer"


def test_long_names_stay_within_63_characters_and_distinct():
    job = JobRef(namespace="ml", name="a" * 60, uid="u")
    names = {pod_name(job, "validate-long-phase", 12, r, 3) for r in range(100)}
    assert len(names) == 100 and all(len(n) <= 63 for n in names)


def test_the_service_is_headless_and_publishes_not_ready_addresses():
    svc = service_manifest(JOB)["spec"]
    assert svc["clusterIP"] == "None" and svc["publishNotReadyAddresses"] is True
    assert svc["selector"] == {labels.LABEL_JOB_UID: "uid-llm"}
