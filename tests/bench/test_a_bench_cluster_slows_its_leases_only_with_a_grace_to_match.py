"""A bench cluster's simulated nodes renew their Lease at a kubelet's pace unless the bench
asks for slower renewals, and then the node monitor grace follows (else every node whose
lease is renewed less often than the grace would go Unknown)."""

from __future__ import annotations

from typing import Any

import pytest
from bench.common import KUBELET_LEASE_SECONDS, BenchCluster, lease_note


def _up(monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> dict[str, str]:
    seen: dict[str, str] = {}
    cluster = BenchCluster("lease-test", port_base=40000)
    monkeypatch.setattr(cluster, "_run", lambda script, extra: seen.update(extra))
    cluster.up(h100=10, **kwargs)
    return seen


def test_by_default_the_nodes_renew_as_kubelets_and_the_grace_is_left_alone(monkeypatch):
    env = _up(monkeypatch)
    assert env["PHASED_NODE_LEASE_SECONDS"] == str(KUBELET_LEASE_SECONDS)
    assert "node-monitor-grace-period" not in env["PHASED_KCM_FLAGS"]
    assert "as kubelets do" in lease_note(KUBELET_LEASE_SECONDS)


def test_slower_renewals_bring_a_grace_as_long_as_the_lease(monkeypatch):
    env = _up(monkeypatch, lease_seconds=600, kcm_flags="--node-monitor-period=5s")
    assert env["PHASED_NODE_LEASE_SECONDS"] == "600"
    flags = env["PHASED_KCM_FLAGS"].split()
    assert "--node-monitor-grace-period=600s" in flags and "--node-monitor-period=5s" in flags
    assert "every 150 s" in lease_note(600)
