"""The one rule for tests that need an outside tool: skip on a workstation, fail in CI."""

from __future__ import annotations

import pytest

from tests.tools import missing_tool


@pytest.mark.parametrize("value", ["", "0", "false"])
def test_without_ci_a_missing_tool_skips(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match="no frobnicator"):
        missing_tool("no frobnicator")


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_in_ci_a_missing_tool_fails(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=r"no frobnicator.*CI is set"):
        missing_tool("no frobnicator")


def test_the_chart_tests_use_the_rule() -> None:
    from tests.helm import chart

    assert chart.needs_helm.args == ("helm_present",)
