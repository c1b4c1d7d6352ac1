"""A before/after section of the scale bench gets the first number no other section of
bench/RESULTS.md uses, on past 4z (4aa, 4ab, ...), or the one it already has: a run at 4z
printed its report and then lost it to a StopIteration."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import scale  # noqa: E402


def _results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numbers: list[str]) -> None:
    sections = "".join(f"<!-- bench:k{n} -->\n## {n}. Scale\n\ntext\n" for n in numbers)
    path = tmp_path / "RESULTS.md"
    path.write_text("# Results\n\n" + sections)
    monkeypatch.setattr(scale, "RESULTS", path)


def test_past_4z_the_numbers_go_on_with_two_letters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    used = ["4b", "4d", *(f"4{c}" for c in "cefghijklmnopqrstuvwxyz")]
    _results(tmp_path, monkeypatch, used)
    assert scale.section_number("new") == "4aa"
    _results(tmp_path, monkeypatch, [*used, "4aa"])
    assert scale.section_number("new") == "4ab"
    assert scale.section_number("k4aa") == "4aa"  # a section keeps its number


def test_the_first_free_single_letter_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _results(tmp_path, monkeypatch, ["4c", "4f"])
    assert scale.section_number("new") == "4e"
