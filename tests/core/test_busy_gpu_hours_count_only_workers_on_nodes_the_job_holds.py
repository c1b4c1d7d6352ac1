"""Busy GPU-hours (and the utilization made of them) count Running workers on the nodes
the job holds as active, nothing else. A worker the API still shows Running on a node that
was deleted (the pod garbage collector not by yet; the breaker keeping its place) used no
GPU the job paid for: counted, busy exceeded the GPU-hours paid and utilization read 120%.
"""

from __future__ import annotations

from tests.core.builders import Cluster, node, phase, spec

HOUR = 3600.0


def test_busy_gpu_hours_count_only_workers_on_nodes_the_job_holds() -> None:
    the_spec = spec(
        phase("train", 4, 4),
        spares=1,
        failurePolicy={"massFailure": {"maxFailedPercent": 20}},
    )
    cluster = Cluster(the_spec, {f"n{i}": node(f"n{i}") for i in range(10)})
    cluster.settle()
    assert cluster.status.active_nodes == 4 and len(cluster.running()) == 4
    for name in list(cluster.status.pool.active):
        del cluster.nodes[name]  # the nodes go; their workers still read Running
    for _ in range(3):
        cluster.advance(HOUR)
        cluster.step()
        acc, util = cluster.status.accounting, cluster.status.utilization
        assert acc.busy_gpu_hours <= acc.gpu_hours, (acc.busy_gpu_hours, acc.gpu_hours)
        assert util.allocation <= 100.0 and util.active <= 100.0 and util.current <= 100.0, util
