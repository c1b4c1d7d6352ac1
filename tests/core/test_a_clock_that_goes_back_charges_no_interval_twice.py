"""A pass whose clock reads earlier than ``accounting.accountedAt`` (the operator's clock
stepped back, or a new replica's runs behind) charges nothing and leaves ``accountedAt``
where it was: moved back, the next pass charged the interval up to it a second time."""

from __future__ import annotations

from phased.core.times import parse_time
from tests.core.builders import Cluster, node, phase, spec

HOUR = 3600.0


def test_a_clock_that_goes_back_charges_no_interval_twice() -> None:
    cluster = Cluster(spec(phase("train", 2, 2)), {f"n{i}": node(f"n{i}") for i in range(2)})
    cluster.settle()
    start = cluster.status.accounting.gpu_hours
    stamped = parse_time(cluster.status.accounting.accounted_at)
    assert stamped is not None and cluster.status.active_nodes == 2

    cluster.advance(HOUR)
    cluster.step()  # one hour held: 2 nodes x 8 GPUs
    assert cluster.status.accounting.gpu_hours - start == 16.0
    ahead = cluster.now

    cluster.advance(-HOUR / 2)  # the clock steps back half an hour
    cluster.step()
    assert parse_time(cluster.status.accounting.accounted_at) == ahead

    cluster.now = ahead  # set right again ...
    cluster.advance(HOUR)
    cluster.step()  # ... an hour after the pass at 13:00: that hour, charged once
    assert cluster.status.accounting.gpu_hours - start == 32.0
