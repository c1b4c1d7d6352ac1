"""The scale bench can run the operator at the chart's settings as shipped and at another
niceness, and compare one checkout run two ways: the rows then differ in that alone, and say so."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import scale  # noqa: E402
from phased.core.settings import load_settings  # noqa: E402


def test_the_chart_settings_are_the_values_files_and_the_operator_reads_them() -> None:
    shipped = yaml.safe_load((ROOT / "helm" / "phased" / "values.yaml").read_text())["settings"]
    path = scale.settings_file("chart")
    assert yaml.safe_load(path.read_text()) == shipped
    settings = load_settings(path.read_text())
    assert settings.resync_interval == shipped["resyncInterval"]
    assert scale.settings_file("e2e") == ROOT / "e2e" / "settings.yaml"


def test_the_note_counts_the_idle_looks_from_the_resync_interval() -> None:
    e2e = yaml.safe_load((ROOT / "e2e" / "settings.yaml").read_text())["resyncInterval"]
    chart = yaml.safe_load((ROOT / "helm" / "phased" / "values.yaml").read_text())["settings"]
    assert f"`resyncInterval` {e2e}" in scale.settings_note("e2e")
    assert f"`resyncInterval` {chart['resyncInterval']}" in scale.settings_note("chart")
    per_minute = 60 / scale.parse_duration(chart["resyncInterval"])
    assert f"i.e. {per_minute:g} of each per job per idle minute" in scale.settings_note("chart")


def test_a_relist_interval_asked_for_replaces_the_settings_own_and_is_said() -> None:
    for which in ("e2e", "chart"):
        plain = yaml.safe_load(scale.settings_file(which).read_text())
        path = scale.settings_file(which, "30s")
        assert path != ROOT / "e2e" / "settings.yaml"
        asked = yaml.safe_load(path.read_text())
        assert asked == {**plain, "nodeRelistInterval": "30s"}
        assert load_settings(path.read_text()).node_relist_interval == "30s"
        note = scale.settings_note(which, "30s")
        assert "`nodeRelistInterval` 30s" in note and "`--node-relist-interval`" in note
        assert "--node-relist-interval" not in scale.settings_note(which)


def test_one_checkout_at_two_settings_is_told_apart_by_its_settings() -> None:
    baseline = scale.Baseline(None, "e2e", "chart")
    try:
        assert baseline.path is None  # no worktree: this checkout's own operator
        assert baseline.variant == scale.Variant("before (e2e settings)", {}, "e2e")
        after = baseline.after()
        assert after.settings == "chart" and after.env == {}
        assert after.label.startswith("after (") and after.label.endswith(", chart defaults)")
        assert "this checkout's operator at the e2e settings (before)" in baseline.what()
    finally:
        baseline.remove()


def test_one_checkout_at_two_nicenesses_is_told_apart_by_its_niceness() -> None:
    baseline = scale.Baseline(None, "chart", "chart", nice=0, my_nice=-10)
    try:
        assert baseline.variant == scale.Variant("before (nice 0)", {}, "chart", nice=0)
        after = baseline.after()
        assert after.nice == -10 and after.settings == "chart"
        assert after.label.endswith(", nice -10)")
        assert baseline.what() == (
            "this checkout's operator at nice 0 (before) and the same at nice -10 (after)"
        )
    finally:
        baseline.remove()


def test_the_operator_runs_under_nice_only_when_asked(tmp_path: Path) -> None:
    plain = scale.BenchOperator("kubeconfig", tmp_path / "log")
    assert plain.interpreter() == [sys.executable]
    niced = scale.BenchOperator("kubeconfig", tmp_path / "log", nice=-10)
    assert niced.interpreter() == ["nice", "-n", "-10", sys.executable]
    profiled = scale.BenchOperator(
        "kubeconfig", tmp_path / "log", nice=5, profile_path=tmp_path / "p"
    )
    assert profiled.interpreter() == [
        "nice",
        "-n",
        "5",
        sys.executable,
        "-m",
        "cProfile",
        "-o",
        str(tmp_path / "p"),
    ]
