"""requirements/*.txt, written by `make lock`, pin every dependency pyproject.toml declares
(runtime in runtime.txt and dev.txt, development tools in dev.txt) at a version its range
allows, each with at least one sha256 hash; the runtime lock agrees with the dev lock."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s\\;]+)")


def _lock(name: str) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) for each pin of requirements/<name>."""
    pins: dict[str, tuple[str, int]] = {}
    current = ""
    for line in (ROOT / "requirements" / name).read_text(encoding="utf-8").splitlines():
        match = PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            pins[current] = (match.group(2), 0)
        if "--hash=sha256:" in line and current:
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


RUNTIME = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
DEV = [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["dev"]]


@pytest.mark.parametrize(
    ("lock", "declared"), [("runtime.txt", RUNTIME), ("dev.txt", RUNTIME + DEV)]
)
def test_every_declared_dependency_is_pinned_within_its_range(
    lock: str, declared: list[Requirement]
) -> None:
    pins = _lock(lock)
    for requirement in declared:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is declared but not in {lock}: make lock"
        version, _ = pins[name]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"{lock} pins {name}=={version}, outside {requirement}: make lock"
        )


@pytest.mark.parametrize("lock", ["runtime.txt", "dev.txt", "build.txt", "trainer.txt"])
def test_every_pin_carries_a_hash(lock: str) -> None:
    pins = _lock(lock)
    assert pins
    assert [n for n, (_, hashes) in pins.items() if hashes == 0] == []


def test_the_runtime_lock_is_the_dev_locks_runtime_part() -> None:
    dev = _lock("dev.txt")
    runtime = _lock("runtime.txt")
    assert {n: v for n, (v, _) in runtime.items()} == {n: dev[n][0] for n in runtime}


def test_aiohttp_which_the_operator_imports_is_declared() -> None:
    assert "aiohttp" in {canonicalize_name(r.name) for r in RUNTIME}


def test_the_trainer_lock_pins_exactly_what_trainer_in_asks_for() -> None:
    """trainer.txt is locked without resolution: every pin of trainer.in, nothing else."""
    asked = {}
    for line in (ROOT / "requirements" / "trainer.in").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            asked[canonicalize_name(requirement.name)] = str(requirement.specifier).lstrip("=")
    assert {n: v for n, (v, _) in _lock("trainer.txt").items()} == asked
