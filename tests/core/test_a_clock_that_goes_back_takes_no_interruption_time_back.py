"""The core's clock never goes back: a pass whose ``now`` reads earlier than
``accounting.accountedAt`` (the operator's clock stepped back, a new replica's running
behind) decides as at ``accountedAt``. Taken as it read, it ran the open ledger entry to its
own ``now`` and the interruption charged went down (3960 s to 2160 s here), and could stamp
a failure resumed, or a stop opened, before instants already written."""

from __future__ import annotations

from phased.core.times import parse_time
from tests.core.builders import Cluster, node, phase, spec, with_ready

HOUR = 3600.0


def test_a_clock_that_goes_back_takes_no_interruption_time_back() -> None:
    cluster = Cluster(spec(phase("train", 2, 2)), {f"n{i}": node(f"n{i}") for i in range(2)})
    cluster.settle()
    cluster.nodes["n0"] = with_ready(cluster.nodes["n0"], False, cluster.now)
    for _ in range(6):  # past the grace: n0 fails, and no node can take its place
        cluster.advance(60)
        cluster.step()
    assert [e.resumed for e in cluster.status.failures] == [None]
    cluster.advance(HOUR)
    cluster.step()
    charged = cluster.status.interruption.used_seconds
    assert charged > HOUR

    cluster.advance(-HOUR / 2)  # the clock steps back half an hour
    cluster.step()
    assert cluster.status.interruption.used_seconds >= charged

    cluster.nodes["n2"] = node("n2")  # a node joins; training resumes on it
    cluster.settle()
    for entry in cluster.status.failures:
        detected, resumed = parse_time(entry.detected), parse_time(entry.resumed)
        assert detected is not None and resumed is not None and resumed >= detected
    assert cluster.status.interruption.used_seconds >= charged
