"""``/healthz`` fails once relists keep finding changes a node watch never delivered, judged
watch by watch: with a nodeSelector the operator runs two node watches (the selector's, and
the one keeping the nodes this installation marked in sight), and the first one's steady
traffic must not hide that the second has gone silent — a dead second watch loses sight of a
held node a person relabels out of the selector until the next relist, every time."""

from __future__ import annotations

import time

from phased.core.settings import Settings
from phased.health import HealthServer
from phased.kube.client import KubeClient
from phased.kube.nodeview import NodeView
from phased.reconcile import Reconciler

RELIST_S = 300.0  # the default nodeRelistInterval, 5m


def probe() -> tuple[Reconciler, HealthServer]:
    kube = KubeClient(object(), retries=0)  # type: ignore[arg-type]
    rec = Reconciler(kube, Settings(node_selector="pool=gpu", node_relist_interval="5m"))
    for view in rec.nodes.views:
        view.last_event_at = time.monotonic()
    return rec, HealthServer(rec, port=0)


def relist_finds_changes(view: NodeView, quiet: bool) -> None:
    view.relist_corrections += 1
    if quiet:
        view.last_event_at = time.monotonic() - 3 * RELIST_S


def test_a_silent_second_watch_fails_the_probe_while_the_first_is_busy() -> None:
    rec, health = probe()
    busy, marked = rec.nodes.views
    assert len(rec.nodes.views) == 2
    for _ in range(2):
        busy.last_event_at = time.monotonic()  # the selector's watch delivers heartbeats
        relist_finds_changes(marked, quiet=True)
        ok, why = health.alive()
    assert not ok
    assert "phased.dev/installation" in why and "delivers nothing" in why
    # It stays failed: a dead watch does not come back by itself.
    busy.last_event_at = time.monotonic()
    assert health.alive()[0] is False


def test_a_silent_first_watch_fails_the_probe_too() -> None:
    rec, health = probe()
    busy, marked = rec.nodes.views
    for _ in range(2):
        marked.last_event_at = time.monotonic()
        relist_finds_changes(busy, quiet=True)
        ok, why = health.alive()
    assert not ok and "pool=gpu" in why


def test_one_stale_relist_or_a_watch_that_still_delivers_is_alive() -> None:
    rec, health = probe()
    _, marked = rec.nodes.views
    relist_finds_changes(marked, quiet=True)
    assert health.alive() == (True, "ok")
    # A change the watch had not delivered yet, while it delivers others: a race, not a
    # dead stream; the count of quiet relists starts again.
    relist_finds_changes(marked, quiet=False)
    marked.last_event_at = time.monotonic()
    assert health.alive() == (True, "ok")
    relist_finds_changes(marked, quiet=True)
    assert health.alive() == (True, "ok")
