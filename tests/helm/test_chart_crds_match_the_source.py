"""The chart's CRDs are generated from crds/: a hand edit or a forgotten sync fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import yaml

from tests.helm.chart import CHART, ROOT


def _sync_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "sync_chart_crds", ROOT / "hack/sync-chart-crds.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_crd_in_the_chart_is_an_up_to_date_copy_of_crds() -> None:
    problems = _sync_script().drift()
    assert not problems, (
        "helm/phased/crds/ drifted from crds/: "
        + "; ".join(problems)
        + " -- run `python hack/sync-chart-crds.py`"
    )


def test_the_source_crds_exist_and_the_chart_holds_the_same_objects() -> None:
    sources = sorted((ROOT / "crds").glob("*.yaml"))
    assert sources, "crds/ holds no CRD"
    for source in sources:
        copy = CHART / "crds" / source.name
        assert yaml.safe_load(copy.read_text()) == yaml.safe_load(source.read_text())


def test_drift_is_detected(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    script = _sync_script()
    (tmp_path / "src").mkdir()
    (tmp_path / "chart").mkdir()
    (tmp_path / "src" / "a.yaml").write_text("kind: CustomResourceDefinition\n")
    monkeypatch.setattr(script, "SOURCE", tmp_path / "src")
    monkeypatch.setattr(script, "CHART_CRDS", tmp_path / "chart")
    assert script.drift() == ["missing in the chart: a.yaml"]
    assert script.main([]) == 0
    assert script.drift() == []
    (tmp_path / "chart" / "a.yaml").write_text("edited by hand\n")
    (tmp_path / "chart" / "old.yaml").write_text("kind: CustomResourceDefinition\n")
    assert script.drift() == ["not in crds/ any more: old.yaml", "stale copy: a.yaml"]
    assert script.main(["--check"]) == 1
