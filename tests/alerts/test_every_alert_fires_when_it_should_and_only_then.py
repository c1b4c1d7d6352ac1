"""The chart's alert rules, evaluated by Prometheus' own rule engine (``promtool``).

``promtool check rules`` parses every expression and template; ``promtool test rules`` runs
each file under ``cases/`` (one per alert, named after it) against the rules the chart renders
with its default thresholds: synthetic series as the operator exports them, and at chosen
instants the alerts expected to fire, with their labels and rendered annotations, or none.
Every alert has at least one case where it fires and one where it must stay silent.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.alerts.promtool import CASES, RULE_FILE, alert_names, promtool, write_rule_file

CASE_FILES = sorted(CASES.glob("*.yaml"))


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def _expectations(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for test in case["tests"] for t in test.get("alert_rule_test", [])]


def test_promtool_accepts_every_rule(tmp_path: Path) -> None:
    rules = write_rule_file(tmp_path)
    result = promtool("check", "rules", "--lint=all", "--lint-fatal", str(rules))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in result.stdout, result.stdout


def test_every_alert_has_cases_that_fire_and_cases_that_stay_silent() -> None:
    alerts = alert_names()
    assert len(alerts) >= 7 and len(set(alerts)) == len(alerts), alerts
    assert sorted(p.stem for p in CASE_FILES) == sorted(alerts)
    for path in CASE_FILES:
        checks = _expectations(_load(path))
        assert {c["alertname"] for c in checks} == {path.stem}, f"{path.name} tests other alerts"
        firing = [c for c in checks if c.get("exp_alerts")]
        silent = [c for c in checks if not c.get("exp_alerts")]
        assert firing, f"{path.name}: no case where {path.stem} fires"
        assert silent, f"{path.name}: no case where {path.stem} stays silent"


@pytest.mark.parametrize("case", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_the_alert_fires_exactly_when_its_cases_say(case: Path, tmp_path: Path) -> None:
    write_rule_file(tmp_path)
    assert _load(case)["rule_files"] == [RULE_FILE]
    shutil.copy(case, tmp_path / case.name)
    result = promtool("test", "rules", case.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """The harness can fail: a case expecting a firing alert where none fires is reported."""
    write_rule_file(tmp_path)
    case = _load(CASES / "PhasedCapacityShort.yaml")
    test = case["tests"][0]
    for check in test["alert_rule_test"]:
        check["eval_time"] = "1m"  # long before any `for:` could have run out
        check["exp_alerts"] = [{"exp_labels": {"severity": "warning"}}]
    case["tests"] = [test]
    (tmp_path / "wrong.yaml").write_text(yaml.safe_dump(case))
    result = promtool("test", "rules", "wrong.yaml", cwd=tmp_path)
    assert result.returncode != 0, result.stdout
    assert "FAILED" in result.stdout + result.stderr
