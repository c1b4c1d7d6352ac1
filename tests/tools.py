"""Tests that need an outside tool (helm, a cluster binary) call :func:`missing_tool` when
they cannot find it: a skip on a workstation, a failure in CI (the ``CI`` environment
variable set), so a CI run can never go green by skipping what it could have run."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_tool(reason: str) -> NoReturn:
    """Skip for ``reason``, or fail with it when running in CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: a missing tool fails the run)", pytrace=False)
    pytest.skip(reason)
