"""The field's 100B run (examples/training-100b.yaml), priced at the default H100 price."""

from __future__ import annotations

import yaml

from phased.api.v1alpha1 import parse_manifest
from phased.core.planning import plan_run
from phased.core.settings import Settings
from tests.api.schema_walk import REPO


def test_the_100b_run_saves_twelve_percent_against_a_pool_of_its_largest_phase() -> None:
    job = parse_manifest(yaml.safe_load((REPO / "examples" / "training-100b.yaml").read_text()))
    plan = plan_run(job.spec, Settings())  # H100 at 2.50 USD per GPU-hour

    # 40 x 8 x 288h + 100 x 8 x 168h + 120 x 8 x 1680h + 80 x 8 x 288h
    assert plan.phased.active_gpu_hours == 2_023_680
    assert plan.spares.gpu_hours == 10 * 8 * 2424  # 101 days
    assert plan.phased.cost == 5_544_000
    assert plan.fixed.cost == (120 + 10) * 8 * 2424 * 2.50 == 6_302_400
    assert plan.saving == 758_400
    assert round(plan.saving_percent, 1) == 12.0
    assert round(plan.phased.utilization_percent, 1) == 91.3
    assert round(plan.fixed.utilization_percent, 1) == 80.3
