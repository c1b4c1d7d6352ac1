"""Comparing resourceVersions. They are opaque to clients; the API server's are etcd
revisions, which grow, and every watch and list here is served by one API server's storage.
Anything that is not a number compares as neither later nor the same."""

from __future__ import annotations


def newer(current: str, incoming: str) -> bool:
    """True when ``current`` is a later resourceVersion than ``incoming``."""
    try:
        return int(current) > int(incoming)
    except ValueError:
        return False


def at_least(current: str, incoming: str) -> bool:
    """True when ``current`` is the same or a later resourceVersion than ``incoming``."""
    try:
        return int(current) >= int(incoming)
    except ValueError:
        return False
