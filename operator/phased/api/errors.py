"""Validation errors as people read them: one line per problem, with the API's field path.

The path is written the way ``kubectl`` and the API server write it (camelCase names,
``[i]`` for list items), e.g. ``spec.phases[1].nodes: nodes.min (5) must not exceed
nodes.max (3)``; ``phased plan``, the operator's ``InvalidSpec`` condition and the tests
share these texts.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

_PREFIXES = ("Value error, ", "Assertion failed, ")


def field_path(loc: Sequence[int | str], root: str = "") -> str:
    """Join a pydantic error location into an API field path under ``root``."""
    path = root
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(top)"


def error_message(msg: str) -> str:
    """Drop pydantic's ``Value error, `` prefix: the rest is the project's own sentence."""
    for prefix in _PREFIXES:
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg


def explain(exc: ValidationError, root: str = "") -> list[str]:
    """Every problem in ``exc`` as ``<field path>: <message>``, in the order pydantic found them."""
    return [f"{field_path(err['loc'], root)}: {error_message(err['msg'])}" for err in exc.errors()]
