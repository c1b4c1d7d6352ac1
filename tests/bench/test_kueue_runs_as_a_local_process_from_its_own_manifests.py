"""The pure parts of ``bench/kueue.py``: Kueue's webhook and CRD manifests rewritten for a
local process, its Configuration, the queue objects and a Job sent through a queue."""

from __future__ import annotations

import base64
import copy
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import kueue  # noqa: E402

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _hook(name: str, group: str, resource: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": path}
        },
        "failurePolicy": "Fail",
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": [resource],
            }
        ],
        "sideEffects": "None",
    }


# Shaped like config/components/webhook/manifests.yaml of Kueue v0.17.
MANIFESTS = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            _hook("mjob.kb.io", "batch", "jobs", "/mutate-batch-v1-job"),
            _hook("mpod.kb.io", "", "pods", "/mutate--v1-pod"),
            _hook("mjobset.kb.io", "jobset.x-k8s.io", "jobsets", "/mutate-jobset"),
            _hook(
                "mworkload.kb.io",
                "kueue.x-k8s.io",
                "workloads",
                "/mutate-kueue-x-k8s-io-v1beta2-workload",
            ),
        ],
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validating-webhook-configuration"},
        "webhooks": [
            _hook("vpod.kb.io", "", "pods", "/validate--v1-pod"),
            _hook("vdeployment.kb.io", "apps", "deployments", "/validate-apps-v1-deployment"),
        ],
    },
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook-service"}},
]


def test_only_the_webhooks_of_what_runs_are_kept_each_pointing_at_the_local_url_with_the_ca() -> (
    None
):
    before = copy.deepcopy(MANIFESTS)
    out = kueue.local_webhooks(MANIFESTS, "https://127.0.0.1:42767/", CA)

    assert before == MANIFESTS  # the module's manifests are read, never changed
    # The validating configuration had only webhooks of integrations left off: not installed.
    assert [d["kind"] for d in out] == ["MutatingWebhookConfiguration"]
    (mutating,) = out
    assert mutating["metadata"] == {"name": "kueue-mutating-webhook-configuration"}
    by_name = {h["name"]: h for h in mutating["webhooks"]}
    assert sorted(by_name) == ["mjob.kb.io", "mworkload.kb.io"]
    job = by_name["mjob.kb.io"]
    assert job["clientConfig"] == {
        "url": "https://127.0.0.1:42767/mutate-batch-v1-job",
        "caBundle": base64.b64encode(CA).decode(),
    }
    assert base64.b64decode(job["clientConfig"]["caBundle"]) == CA
    assert "service" not in by_name["mworkload.kb.io"]["clientConfig"]
    assert job["failurePolicy"] == "Fail" and job["rules"][0]["resources"] == ["jobs"]


def test_a_webhook_without_a_service_path_is_refused_rather_than_pointed_at_the_root() -> None:
    bad = copy.deepcopy(MANIFESTS[:1])
    del bad[0]["webhooks"][0]["clientConfig"]["service"]["path"]
    with pytest.raises(ValueError, match=r"mjob\.kb\.io"):
        kueue.local_webhooks(bad, "https://127.0.0.1:1", CA)


def test_conversion_goes_to_the_local_url_only_for_the_crds_the_kustomization_patches() -> None:
    kustomization = {
        "resources": ["bases/kueue.x-k8s.io_workloads.yaml"],
        "patches": [
            {"path": "patches/webhook_in_workloads.yaml"},
            {"path": "patches/webhook_in_localqueues.yaml"},
            {"path": "patches/cainjection_in_workloads.yaml"},
        ],
    }
    patches = {
        "patches/webhook_in_workloads.yaml": {
            "metadata": {"name": "workloads.kueue.x-k8s.io"},
            "spec": {"conversion": {"strategy": "Webhook"}},
        },
        "patches/webhook_in_localqueues.yaml": {
            "metadata": {"name": "localqueues.kueue.x-k8s.io"},
            "spec": {"conversion": {"strategy": "Webhook"}},
        },
        # Listed, but not a conversion patch.
        "patches/cainjection_in_workloads.yaml": {
            "metadata": {"name": "workloads.kueue.x-k8s.io", "annotations": {"a": "b"}},
        },
        # A patch file the kustomization does not list (commented out there).
        "patches/webhook_in_resourceflavors.yaml": {
            "metadata": {"name": "resourceflavors.kueue.x-k8s.io"},
            "spec": {"conversion": {"strategy": "Webhook"}},
        },
    }
    converted = kueue.conversion_crds(kustomization, patches)
    assert converted == {"workloads.kueue.x-k8s.io", "localqueues.kueue.x-k8s.io"}

    crds = [
        {"metadata": {"name": name}, "spec": {"group": "kueue.x-k8s.io"}}
        for name in ("workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io")
    ]
    out = kueue.local_crds(crds, converted, "https://127.0.0.1:42767", CA)
    workloads, flavors = out
    assert workloads["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "url": "https://127.0.0.1:42767/convert",
                "caBundle": base64.b64encode(CA).decode(),
            },
            "conversionReviewVersions": ["v1"],
        },
    }
    assert "conversion" not in flavors["spec"]
    assert "conversion" not in crds[0]["spec"]


def test_the_configuration_binds_to_loopback_runs_alone_and_turns_node_replacement_on() -> None:
    cfg = kueue.configuration(
        webhook_port=42767, metrics_port=42768, health_port=42769, cert_dir="/x/certs"
    )
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert cfg["kind"] == "Configuration"
    assert cfg["webhook"] == {"host": "127.0.0.1", "port": 42767, "certDir": "/x/certs"}
    assert cfg["metrics"]["bindAddress"] == "127.0.0.1:42768"
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:42769"
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["internalCertManagement"] == {"enable": False}
    assert cfg["integrations"] == {"frameworks": ["batch/job"]}
    assert cfg["manageJobsWithoutQueueName"] is False
    gates = cfg["featureGates"]
    for gate in (
        "TopologyAwareScheduling",
        "TASFailedNodeReplacement",
        "TASFailedNodeReplacementFailFast",
        "TASReplaceNodeOnPodTermination",
    ):
        assert gates[gate] is True, gate
    # No aggregated API server of its own on some default port.
    assert gates["VisibilityOnDemand"] is False


def test_the_topology_ends_at_the_node_and_the_flavor_and_queue_point_at_each_other() -> None:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    topology, flavor, cq = kueue.queue_objects(
        node_labels=labels,
        levels=("topology.phased.dev/block", "topology.phased.dev/rack", "kubernetes.io/hostname"),
        gpu_quota=4480,
    )
    assert topology["kind"] == "Topology"
    assert [lv["nodeLabel"] for lv in topology["spec"]["levels"]] == [
        "topology.phased.dev/block",
        "topology.phased.dev/rack",
        "kubernetes.io/hostname",
    ]
    assert flavor["kind"] == "ResourceFlavor"
    assert flavor["spec"] == {"nodeLabels": labels, "topologyName": topology["metadata"]["name"]}
    assert cq["kind"] == "ClusterQueue"
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    assert group["flavors"] == [
        {
            "name": flavor["metadata"]["name"],
            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4480"}],
        }
    ]
    lq = kueue.local_queue("bench-kueue-abc")
    assert lq["metadata"]["namespace"] == "bench-kueue-abc"
    assert lq["spec"]["clusterQueue"] == cq["metadata"]["name"]


def test_node_replacement_needs_the_hostname_as_the_lowest_level() -> None:
    with pytest.raises(ValueError, match=r"kubernetes\.io/hostname"):
        kueue.queue_objects(node_labels={}, levels=("kubernetes.io/hostname", "rack"), gpu_quota=8)


def test_a_queued_job_carries_the_queue_label_and_one_topology_annotation() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "t"},
        "spec": {"template": {"metadata": {"annotations": {"a": "1"}}, "spec": {}}},
    }
    before = copy.deepcopy(job)
    out = kueue.queued(job, preferred="topology.phased.dev/rack")
    assert job == before
    assert out["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "gpu"}
    assert out["spec"]["template"]["metadata"]["annotations"] == {
        "a": "1",
        "kueue.x-k8s.io/podset-preferred-topology": "topology.phased.dev/rack",
    }
    required = kueue.queued(job, queue="q", required="topology.phased.dev/block")
    assert required["spec"]["template"]["metadata"]["annotations"] == {
        "a": "1",
        "kueue.x-k8s.io/podset-required-topology": "topology.phased.dev/block",
    }
    with pytest.raises(ValueError):
        kueue.queued(job)
    with pytest.raises(ValueError):
        kueue.queued(job, preferred="a", required="b")


def test_the_metrics_certificate_is_added_to_etc_only_in_the_process_own_mount_namespace(
    tmp_path: Path,
) -> None:
    prefix = kueue.unshare_prefix(tmp_path / "etc")
    assert prefix[0] == "unshare" and "--mount" in prefix
    script = prefix[-1]
    assert f"lowerdir=/etc,upperdir={tmp_path / 'etc' / 'upper'}" in script
    assert script.rstrip().endswith('exec "$0" "$@"')  # the program replaces the shell: same pid
    assert (tmp_path / "etc" / "work").is_dir()


def _workload(job: str, evictions: list[dict[str, Any]] | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if evictions is not None:
        status["schedulingStats"] = {"evictions": evictions}
    return {
        "metadata": {"name": f"job-{job}-abcde", "ownerReferences": [{"kind": "Job", "name": job}]},
        "status": status,
    }


def test_what_kueue_did_is_read_from_the_workload_the_job_owns() -> None:
    workloads = [
        _workload("rack-0", [{"reason": "NodeFailures", "count": 1}]),
        _workload("rack-1", [{"reason": "Evicted", "underlyingCause": "NodeFailures", "count": 2}]),
        _workload("not-ready-0", None),
        {"metadata": {"name": "orphan"}, "status": {}},
    ]
    assert kueue.workload_outcome(workloads, "rack-0") == "evicted: NodeFailures"
    assert kueue.workload_outcome(workloads, "rack-1") == "evicted: Evicted/NodeFailures x2"
    assert kueue.workload_outcome(workloads, "not-ready-0") == "no eviction"
    assert kueue.workload_outcome(workloads, "gone") == "no workload"
