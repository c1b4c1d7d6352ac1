import pytest

from phased.api.v1alpha1 import JobState
from phased.core.decide import decide
from phased.core.settings import Settings, WorkerPolicy
from tests.core.builders import SETTINGS, T0, at, nodes, phase, snapshot, spec

CASES = [
    (
        "unknown GPU type",
        spec(phase("train", 1, 1, gpu_types=["H200"])),
        Settings(gpu_types={k: v for k, v in SETTINGS.gpu_types.items() if k.value != "H200"}),
        "H200",
    ),
    (
        "image not allowed",
        spec(phase("train", 1, 1)),
        Settings(workers=WorkerPolicy(allowed_image_prefixes=["corp.example/"])),
        "allowed prefix",
    ),
    (
        "a sidecar's image not allowed",
        spec(
            phase("train", 1, 1),
            template={
                "image": "corp.example/llm:1",
                "spec": {"containers": [{"name": "exporter", "image": "docker.io/exp:1"}]},
            },
        ),
        Settings(workers=WorkerPolicy(allowed_image_prefixes=["corp.example/"])),
        "docker.io/exp:1",
    ),
    (
        "GPUs asked for by the template",
        spec(
            phase("train", 1, 1),
            template={"image": "x/y:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}},
        ),
        SETTINGS,
        "nvidia.com/gpu",
    ),
    (
        "GPUs asked for by a sidecar",
        spec(
            phase("train", 1, 1),
            template={
                "image": "x/y:1",
                "spec": {
                    "initContainers": [
                        {
                            "name": "warm",
                            "image": "x/w:1",
                            "resources": {"requests": {"huawei.com/Ascend910": 1}},
                        }
                    ]
                },
            },
        ),
        SETTINGS,
        "huawei.com/Ascend910 in container warm",
    ),
    (
        "privileged container",
        spec(
            phase("train", 1, 1),
            template={
                "image": "x/y:1",
                "spec": {
                    "containers": [{"name": "worker", "securityContext": {"privileged": True}}]
                },
            },
        ),
        SETTINGS,
        "allowPrivileged",
    ),
    (
        "hostPath volume",
        spec(
            phase("train", 1, 1),
            template={
                "image": "x/y:1",
                "spec": {"volumes": [{"name": "dev", "hostPath": {"path": "/dev/infiniband"}}]},
            },
        ),
        SETTINGS,
        "allowHostPath",
    ),
]


@pytest.mark.parametrize(
    ("case", "the_spec", "settings", "needle"), CASES, ids=[c[0] for c in CASES]
)
def test_invalid_spec_is_reported_once_and_nothing_is_done(case, the_spec, settings, needle):
    first = decide(snapshot(the_spec, nodes("h", 2)), settings, T0)
    assert first.status.state == JobState.INVALID
    (cond,) = first.status.conditions
    assert (cond.type, cond.status) == ("InvalidSpec", "True") and needle in cond.message
    assert [a.reason for a in first.actions] == ["InvalidSpec"]
    again = decide(snapshot(the_spec, nodes("h", 2), status=first.status), settings, at(5))
    assert again.actions == ()
    assert again.status.conditions[0].last_transition_time == cond.last_transition_time


def test_a_spec_that_failed_validation_is_invalid():
    plan = decide(snapshot(None, nodes("h", 2), spec_error="phases: too short"), SETTINGS, T0)
    assert plan.status.state == JobState.INVALID and plan.status.message == "phases: too short"
    assert plan.status.observed_generation == 1


def test_privileged_and_host_path_pass_when_the_settings_allow_them():
    the_spec = spec(
        phase("train", 1, 1),
        template={
            "image": "x/y:1",
            "spec": {
                "containers": [{"name": "worker", "securityContext": {"privileged": True}}],
                "volumes": [{"name": "dev", "hostPath": {"path": "/dev/infiniband"}}],
            },
        },
    )
    allowed = SETTINGS.model_copy(
        update={"workers": WorkerPolicy(allow_privileged=True, allow_host_path=True)}
    )
    plan = decide(snapshot(the_spec, nodes("h", 2)), allowed, T0)
    assert plan.status.state != JobState.INVALID
