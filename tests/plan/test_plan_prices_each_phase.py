"""planning.plan_run prices every phase, the spares, and the same run on a fixed pool."""

from __future__ import annotations

from typing import Any

import pytest

from phased.api.v1alpha1 import GPUType, TrainingJobSpec
from phased.core.planning import plan_run
from phased.core.settings import Settings


def spec(*phases: dict[str, Any], spares: int = 0) -> TrainingJobSpec:
    return TrainingJobSpec.model_validate(
        {"template": {"image": "x"}, "phases": list(phases), "spares": {"count": spares}}
    )


def gpu_phase(name: str, nodes: int, duration: str | None, *types: str) -> dict[str, Any]:
    phase: dict[str, Any] = {
        "name": name,
        "nodes": {"min": 1, "max": nodes},
        "gpuTypes": list(types or ["H100"]),
        "gpusPerNode": 8,
    }
    if duration:
        phase["expectedDuration"] = duration
    return phase


def test_a_phase_runs_on_its_maximum_nodes_of_its_first_type() -> None:
    plan = plan_run(spec(gpu_phase("train", 10, "10h", "H200", "H100")), Settings())
    (line,) = plan.phases
    assert (line.gpu_type, line.nodes, line.gpus, line.hours) == (GPUType.H200, 10, 80, 10.0)
    assert line.gpu_hours == 800.0
    assert line.cost == pytest.approx(800 * 3.50)


def test_max_duration_stands_in_for_a_missing_expected_duration() -> None:
    phase = gpu_phase("train", 1, None) | {"maxDuration": "2d"}
    assert plan_run(spec(phase), Settings()).phases[0].hours == 48.0


def test_a_phase_without_any_duration_is_left_out_of_the_totals() -> None:
    plan = plan_run(spec(gpu_phase("a", 2, "1h"), gpu_phase("b", 4, None)), Settings())
    assert plan.phases[1].hours is None and plan.phases[1].cost is None
    assert plan.unknown_durations == ("b",)
    assert plan.phased.active_gpu_hours == 16.0


def test_spares_are_their_own_line_held_through_every_phase() -> None:
    plan = plan_run(spec(gpu_phase("a", 2, "1h"), gpu_phase("b", 4, "3h"), spares=2), Settings())
    assert plan.spares.hours == 4.0
    assert plan.spares.gpu_hours == 2 * 8 * 4.0
    assert plan.spares.cost == pytest.approx(64 * 2.50)
    assert plan.phased.gpu_hours == 2 * 8 * 1 + 4 * 8 * 3 + 64


def test_spares_take_the_running_phases_type_and_price() -> None:
    plan = plan_run(
        spec(gpu_phase("a", 1, "1h", "H100"), gpu_phase("b", 1, "1h", "H200"), spares=1),
        Settings(),
    )
    assert plan.spares.gpu_types == (GPUType.H100, GPUType.H200)
    assert plan.spares.cost == pytest.approx(8 * 2.50 + 8 * 3.50)


def test_a_cpu_phase_has_no_gpu_hours_and_costs_node_hours() -> None:
    settings = Settings.model_validate({"cpu": {"pricePerNodeHour": 4.0}})
    cpu = {"name": "prep", "nodes": {"min": 1, "max": 3}, "expectedDuration": "2h"}
    (line,) = plan_run(spec(cpu), settings).phases
    assert (line.gpu_type, line.gpus, line.gpu_hours) == (None, 0, 0.0)
    assert line.cost == pytest.approx(3 * 2 * 4.0)


def test_fixed_sizing_holds_the_largest_phase_all_along() -> None:
    plan = plan_run(
        spec(gpu_phase("small", 2, "10h"), gpu_phase("big", 10, "10h"), spares=1), Settings()
    )
    assert plan.largest_phase == "big"
    assert plan.fixed.nodes == 10
    assert plan.fixed.gpu_hours == (10 + 1) * 8 * 20
    assert plan.fixed.cost == pytest.approx((10 + 1) * 8 * 20 * 2.50)
    assert plan.saving == pytest.approx(plan.fixed.cost - plan.phased.cost)
    # The phases' work is the same either way: 2*8*10 + 10*8*10 = 960 active GPU-hours.
    assert plan.fixed.utilization_percent == pytest.approx(100 * 960 / 1760)
    assert plan.phased.utilization_percent == pytest.approx(100 * 960 / (960 + 160))


def test_a_run_of_one_phase_saves_nothing() -> None:
    plan = plan_run(spec(gpu_phase("train", 5, "1d"), spares=2), Settings())
    assert plan.saving == pytest.approx(0.0)
    assert plan.phased.cost == pytest.approx(plan.fixed.cost)
