"""The package installs `kubectl-phased`, which kubectl runs as `kubectl phased`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from phased.cli import kubectl

ROOT = Path(__file__).resolve().parents[2]


def test_the_console_script_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["kubectl-phased"] == "phased.cli.kubectl:main"
    module, _, function = project["scripts"]["kubectl-phased"].partition(":")
    assert callable(getattr(__import__(module, fromlist=[function]), function))


def test_the_commands_and_their_options() -> None:
    parse = kubectl.parser().parse_args
    args = parse(["status", "llm", "-n", "ml", "-o", "json"])
    assert (args.command, args.name, args.namespace, args.output) == ("status", "llm", "ml", "json")
    args = parse(["timeline", "llm"])
    assert (args.namespace, args.output) == (None, "text")
    assert parse(["nodes"]).command == "nodes"
    with pytest.raises(SystemExit):
        parse(["status"])  # a name is required
    with pytest.raises(SystemExit):
        parse(["nodes", "-o", "yaml"])


def test_it_runs_as_a_module_and_explains_itself() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "phased.cli.kubectl", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "operator"), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: kubectl phased" in done.stdout
    for command in ("status", "timeline", "nodes"):
        assert command in done.stdout


def test_without_a_kubeconfig_it_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "phased.cli.kubectl", "nodes"],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PYTHONPATH": str(ROOT / "operator"),
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "KUBECONFIG": "",
        },
        check=False,
    )
    assert done.returncode == kubectl.EXIT_UNREADABLE, done.stdout + done.stderr
    assert "kubectl phased: cannot connect" in done.stderr
