"""A phase's template is laid over the job's the way Kubernetes' strategic merge patch does.

Lists of named things merge item by item on the key the API server publishes (containers,
init containers, volumes, imagePullSecrets by name; env by name; volumeMounts by mountPath;
ports by containerPort); other lists (tolerations, args, envFrom) are replaced; maps merge by
key; a volume the phase names again takes the phase's source whole (retainKeys). The short
fields (image, command, args, env, resources) are the worker container's, the phase's over
the job's whichever form each used.
"""

from __future__ import annotations

from typing import Any

import pytest

from phased.api.podtemplate import merge
from tests.core.builders import phase, spec

W = "worker"

CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    (
        "containers merge by name: the phase's image, the job's command",
        {"containers": [{"name": W, "image": "a:1", "command": ["train"]}]},
        {"containers": [{"name": W, "image": "a:2"}]},
        {"containers": [{"name": W, "image": "a:2", "command": ["train"]}]},
    ),
    (
        "a sidecar the job does not have is added after the job's containers",
        {"containers": [{"name": W, "image": "a:1"}]},
        {"containers": [{"name": "exporter", "image": "e:1"}]},
        {"containers": [{"name": W, "image": "a:1"}, {"name": "exporter", "image": "e:1"}]},
    ),
    (
        "env merges by name, keeping the job's order",
        {"containers": [{"name": W, "env": [{"name": "A", "value": "1"}, {"name": "B"}]}]},
        {"containers": [{"name": W, "env": [{"name": "A", "value": "2"}, {"name": "C"}]}]},
        {
            "containers": [
                {"name": W, "env": [{"name": "A", "value": "2"}, {"name": "B"}, {"name": "C"}]}
            ]
        },
    ),
    (
        "volumeMounts merge by mountPath",
        {"containers": [{"name": W, "volumeMounts": [{"name": "d", "mountPath": "/data"}]}]},
        {
            "containers": [
                {
                    "name": W,
                    "volumeMounts": [
                        {"name": "d2", "mountPath": "/data", "readOnly": True},
                        {"name": "dshm", "mountPath": "/dev/shm"},
                    ],
                }
            ]
        },
        {
            "containers": [
                {
                    "name": W,
                    "volumeMounts": [
                        {"name": "d2", "mountPath": "/data", "readOnly": True},
                        {"name": "dshm", "mountPath": "/dev/shm"},
                    ],
                }
            ]
        },
    ),
    (
        "a volume named again takes the phase's source whole (retainKeys)",
        {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]},
        {"volumes": [{"name": "d", "emptyDir": {}}, {"name": "x", "emptyDir": {}}]},
        {"volumes": [{"name": "d", "emptyDir": {}}, {"name": "x", "emptyDir": {}}]},
    ),
    (
        "tolerations are replaced, not appended",
        {"tolerations": [{"key": "a", "operator": "Exists"}]},
        {"tolerations": [{"key": "b", "operator": "Exists"}]},
        {"tolerations": [{"key": "b", "operator": "Exists"}]},
    ),
    (
        "args and envFrom are replaced",
        {"containers": [{"name": W, "args": ["x"], "envFrom": [{"secretRef": {"name": "a"}}]}]},
        {"containers": [{"name": W, "args": ["y"], "envFrom": [{"secretRef": {"name": "b"}}]}]},
        {"containers": [{"name": W, "args": ["y"], "envFrom": [{"secretRef": {"name": "b"}}]}]},
    ),
    (
        "ports merge by containerPort",
        {"containers": [{"name": W, "ports": [{"containerPort": 80, "name": "a"}]}]},
        {"containers": [{"name": W, "ports": [{"containerPort": 80, "name": "b"}]}]},
        {"containers": [{"name": W, "ports": [{"containerPort": 80, "name": "b"}]}]},
    ),
    (
        "imagePullSecrets merge by name; maps merge by key; scalars are replaced",
        {
            "imagePullSecrets": [{"name": "a"}],
            "securityContext": {"runAsUser": 1, "fsGroup": 2},
            "hostNetwork": False,
        },
        {
            "imagePullSecrets": [{"name": "b"}],
            "securityContext": {"runAsUser": 3},
            "hostNetwork": True,
        },
        {
            "imagePullSecrets": [{"name": "a"}, {"name": "b"}],
            "securityContext": {"runAsUser": 3, "fsGroup": 2},
            "hostNetwork": True,
        },
    ),
    (
        "resources merge by resource name",
        {"containers": [{"name": W, "resources": {"limits": {"memory": "1Gi", "cpu": "1"}}}]},
        {"containers": [{"name": W, "resources": {"limits": {"rdma/hca": "1", "cpu": "2"}}}]},
        {
            "containers": [
                {"name": W, "resources": {"limits": {"memory": "1Gi", "cpu": "2", "rdma/hca": "1"}}}
            ]
        },
    ),
    (
        "init containers merge by name like containers",
        {"initContainers": [{"name": "fetch", "image": "f:1", "args": ["a"]}]},
        {"initContainers": [{"name": "fetch", "image": "f:2"}]},
        {"initContainers": [{"name": "fetch", "image": "f:2", "args": ["a"]}]},
    ),
]


@pytest.mark.parametrize(("case", "job", "own", "merged"), CASES, ids=[c[0] for c in CASES])
def test_the_merge(case: str, job: dict[str, Any], own: dict[str, Any], merged: dict[str, Any]):
    before = repr((job, own))
    assert merge(job, own) == merged
    assert repr((job, own)) == before, "the inputs are left as they were"


def _pod(job_template: dict[str, Any], phase_template: dict[str, Any]) -> dict[str, Any]:
    the_spec = spec(phase("train", 1, 1, template=phase_template), template=job_template)
    return the_spec.worker_pod(the_spec.phases[0]).spec


def test_the_phase_short_image_beats_the_jobs_worker_container() -> None:
    pod = _pod(
        {"spec": {"containers": [{"name": W, "image": "job:1", "command": ["a"]}]}},
        {"image": "phase:1"},
    )
    assert pod["containers"] == [{"name": W, "image": "phase:1", "command": ["a"]}]


def test_the_phase_worker_container_beats_the_jobs_short_fields() -> None:
    pod = _pod(
        {"image": "job:1", "env": [{"name": "A", "value": "job"}]},
        {
            "spec": {
                "containers": [
                    {"name": W, "image": "phase:1", "env": [{"name": "A", "value": "p"}]}
                ]
            }
        },
    )
    assert pod["containers"] == [
        {"name": W, "image": "phase:1", "env": [{"name": "A", "value": "p"}]}
    ]


def test_short_fields_win_over_the_same_templates_worker_container() -> None:
    pod = _pod(
        {
            "image": "short:1",
            "env": [{"name": "A", "value": "short"}],
            "resources": {"limits": {"memory": "2Gi"}},
            "spec": {
                "containers": [
                    {
                        "name": W,
                        "image": "long:1",
                        "env": [{"name": "A", "value": "long"}, {"name": "B", "value": "b"}],
                        "resources": {"limits": {"memory": "1Gi", "rdma/hca": "1"}},
                    }
                ]
            },
        },
        {},
    )
    (worker,) = pod["containers"]
    assert worker["image"] == "short:1"
    assert worker["env"] == [{"name": "A", "value": "short"}, {"name": "B", "value": "b"}]
    assert worker["resources"] == {"limits": {"memory": "2Gi", "rdma/hca": "1"}}


def test_the_worker_container_comes_first_when_only_sidecars_are_listed() -> None:
    pod = _pod({"image": "i:1", "spec": {"containers": [{"name": "exporter", "image": "e:1"}]}}, {})
    assert [c["name"] for c in pod["containers"]] == [W, "exporter"]


def test_labels_and_annotations_merge_by_key() -> None:
    the_spec = spec(
        phase("train", 1, 1, template={"labels": {"a": "2"}, "annotations": {"x": "2"}}),
        template={"image": "i:1", "labels": {"a": "1", "b": "1"}, "annotations": {"x": "1"}},
    )
    pod = the_spec.worker_pod(the_spec.phases[0])
    assert (pod.labels, pod.annotations) == ({"a": "2", "b": "1"}, {"x": "2"})
