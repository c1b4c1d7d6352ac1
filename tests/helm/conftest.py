from __future__ import annotations

import pytest

from tests.helm.chart import helm_binary
from tests.tools import missing_tool


@pytest.fixture
def helm_present() -> str:
    """The helm binary's path; skips the test without one (fails it in CI)."""
    found = helm_binary()
    if found is None:
        missing_tool(
            "no helm binary: not in PATH, nor in $PHASED_CACHE/bin/helm-*/ or "
            "~/.cache/phased/bin/helm-*/ (build one with `bash e2e/cluster/build.sh helm`)"
        )
    return found
