"""``phased plan FILE``: a table or JSON for a valid file, exit 2 and clear messages otherwise."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
import yaml

from phased.cli import plan as plan_cmd
from tests.api.invalid_cases import valid_job
from tests.api.schema_walk import REPO

EXAMPLE = str(REPO / "examples" / "training-100b.yaml")


def run_plan(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="phased")
    plan_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["plan", *argv])
    result: int = args.func(args)
    return result


def write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_the_table_shows_every_phase_the_spares_and_the_saving(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_plan([EXAMPLE]) == 0
    out = capsys.readouterr().out
    for name in ("preprocess", "initialize", "train", "validate", "spares (10)", "total"):
        assert name in out
    assert "5,544,000" in out and "6,302,400" in out
    assert "saves 758,400 USD (12.0%)" in out


def test_json_output_carries_the_same_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_plan([EXAMPLE, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "llm-100b"
    assert [p["name"] for p in data["phases"]] == ["preprocess", "initialize", "train", "validate"]
    assert data["phases"][2]["gpu_type"] == "H100"
    assert data["saving"] == 758_400


def test_a_price_flag_overrides_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_plan([EXAMPLE, "-o", "json", "--price", "H100=2.00"]) == 0
    assert json.loads(capsys.readouterr().out)["phased"]["cost"] == 2_217_600 * 2.00


def test_a_settings_file_sets_prices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "gpuTypes": {
                    "H100": {
                        "nodeLabels": {"gpu": "h100"},
                        "resource": "nvidia.com/gpu",
                        "pricePerGpuHour": 1.0,
                    }
                }
            }
        )
    )
    assert run_plan([EXAMPLE, "-o", "json", "--settings", str(settings)]) == 0
    assert json.loads(capsys.readouterr().out)["phased"]["cost"] == 2_217_600


def test_stdin_is_read_for_a_dash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(Path(EXAMPLE).read_text()))
    assert run_plan(["-"]) == 0
    assert "llm-100b" in capsys.readouterr().out


def test_an_invalid_job_exits_2_with_the_api_field_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = valid_job()
    doc["spec"]["phases"][1]["nodes"] = {"min": 5, "max": 3}
    assert run_plan([write(tmp_path, doc)]) == 2
    err = capsys.readouterr().err
    assert "is not a valid TrainingJob" in err
    assert "spec.phases[1].nodes: nodes.min (5) must not exceed nodes.max (3)" in err


def test_every_problem_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = valid_job()
    doc["spec"]["phases"][0]["nodes"]["min"] = 0
    doc["spec"]["phases"][1]["gpuTypes"] = ["H300"]
    assert run_plan([write(tmp_path, doc)]) == 2
    err = capsys.readouterr().err
    assert "spec.phases[0].nodes.min: Input should be greater than or equal to 1" in err
    assert "spec.phases[1].gpuTypes[0]: Input should be 'H100', 'H200' or 'Ascend910B'" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a: [", "is not valid YAML"),
        ("", "must hold exactly one TrainingJob, found 0"),
        ("- 1\n- 2\n", "must hold one TrainingJob mapping, not a list"),
        ("a: 1\n---\nb: 2\n", "found 2"),
    ],
    ids=["broken-yaml", "empty", "a-list", "two-documents"],
)
def test_a_file_that_is_not_one_job_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(content)
    assert run_plan([str(path)]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_plan([str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("price", ["H300=1", "H100", "H100=cheap", "H100=-1"])
def test_a_bad_price_is_a_usage_error(price: str) -> None:
    with pytest.raises(SystemExit) as exited:
        run_plan([EXAMPLE, "--price", price])
    assert exited.value.code == 2
