"""Tolerations judged as the scheduler judges them: key, operator, value, effect; a bounded
NoExecute toleration does not count (the worker would be evicted when it runs out)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from phased.core.model import Taint
from phased.core.tolerations import tolerates, untolerated
from tests.core.builders import node

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"operator": "Exists"}, GPU_TAINT, True),  # tolerates everything
        ({"key": "other", "operator": "Exists"}, GPU_TAINT, False),
        ({"key": "maint", "operator": "Exists"}, Taint("maint", "", "NoExecute"), True),
        (
            {"key": "maint", "operator": "Exists", "tolerationSeconds": 300},
            Taint("maint", "", "NoExecute"),
            False,
        ),
        (
            {"key": "maint", "operator": "Exists", "tolerationSeconds": 300},
            Taint("maint", "", "NoSchedule"),
            True,
        ),
    ],
)
def test_a_toleration_matches_as_the_scheduler_matches(
    toleration: dict[str, object], taint: Taint, expected: bool
) -> None:
    assert tolerates(toleration, taint) is expected


def test_only_blocking_taints_nobody_tolerates_are_left() -> None:
    n = replace(
        node("h1"),
        taints=(GPU_TAINT, Taint("maint", "", "NoExecute"), Taint("soft", "", "PreferNoSchedule")),
    )
    tolerated = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert untolerated(n, tolerated) == [Taint("maint", "", "NoExecute")]
    assert untolerated(n, []) == [GPU_TAINT, Taint("maint", "", "NoExecute")]
