"""Fast tests never reach a cluster: the HTTP transport fails loudly if anything tries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    async def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("Must not be called! A unit test tried to reach a cluster.")

    monkeypatch.setattr(aiohttp.ClientSession, "_request", refuse)
    yield
