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
        "PHASED_ env override",
        spec(
            phase("train", 1, 1),
            template={"image": "x/y:1", "env": [{"name": "PHASED_RANK", "value": "3"}]},
        ),
        SETTINGS,
        "PHASED_RANK",
    ),
    (
        "torch env override",
        spec(
            phase("train", 1, 1),
            template={"image": "x/y:1", "env": [{"name": "WORLD_SIZE", "value": "3"}]},
        ),
        SETTINGS,
        "WORLD_SIZE",
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
