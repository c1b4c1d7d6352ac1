"""High availability: two operator replicas with leader election on a Lease. Exactly one
acts; killing it (SIGKILL) hands over to the other, and the job finishes with exactly one
worker per rank all along."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import (
    LOGS,
    apply,
    get_job,
    live_workers,
    nodes_of,
    status,
)


def test_killing_the_leader_hands_over_to_the_standby(
    kubeconfig: str, crd: None, kubectl: lib.Kubectl, core: Any, namespace: str
) -> None:
    lease = ["--leader-elect", "--lease-namespace", namespace, "--lease-name", "phased-ha"]
    first = Operator(kubeconfig, LOGS / "ha-first.log", extra_args=lease).start()
    second = Operator(kubeconfig, LOGS / "ha-second.log", extra_args=lease).start(wait_ready=False)
    try:
        time.sleep(3)
        # Ready (a rolling update waits for each new pod, which starts as a standby) ...
        assert second.http_status("/readyz") == 200, "the standby must count as ready"
        assert second.http_status("/healthz") == 200, "the standby must look alive"
        assert "waits" in Path(second.log_path).read_text()

        apply(
            kubectl,
            namespace,
            {
                "apiVersion": "phased.dev/v1alpha1",
                "kind": "TrainingJob",
                "metadata": {"name": "ha"},
                "spec": {
                    "template": {"image": "busybox:1.36"},
                    "spares": {"count": 1},
                    "phases": [
                        {
                            "name": "one",
                            "nodes": {"min": 3, "max": 3},
                            "gpuTypes": ["H100"],
                            "gpusPerNode": 8,
                            "template": {"annotations": {"sim.phased.dev/succeed-after": "25s"}},
                        },
                        {
                            "name": "two",
                            "nodes": {"min": 2, "max": 2},
                            "gpuTypes": ["H100"],
                            "gpusPerNode": 8,
                            "template": {"annotations": {"sim.phased.dev/succeed-after": "10s"}},
                        },
                    ],
                },
            },
        )
        uid = get_job(kubectl, namespace, "ha")["metadata"]["uid"]
        lib.wait_until(
            lambda: status(kubectl, namespace, "ha").get("state") == "Running",
            90,
            message="the job running under the first leader",
        )
        first.kill()
        killed_at = time.monotonic()
        second.wait_ready(timeout=60)
        takeover = time.monotonic() - killed_at

        deadline = time.monotonic() + 180
        st: dict[str, Any] = {}
        while time.monotonic() < deadline:
            st = status(kubectl, namespace, "ha")
            ranks = collections.Counter(
                (
                    p.metadata.labels.get("phased.dev/phase"),
                    p.metadata.labels.get("phased.dev/rank"),
                )
                for p in live_workers(core, namespace, uid)
                if p.status.phase in ("Pending", "Running")
            )
            assert all(c == 1 for c in ranks.values()), f"duplicate workers: {ranks}"
            if st.get("state") in ("Succeeded", "Failed"):
                break
            time.sleep(1)
        assert st.get("state") == "Succeeded", f"{st}\n{second.tail()}"
        assert takeover < 45, f"the standby took {takeover:.0f}s to take over"
        lease = kubectl(
            "get",
            "lease",
            "phased-ha",
            "-n",
            namespace,
            "-o",
            "jsonpath={.spec.holderIdentity} {.spec.leaseTransitions}",
        )
        holder, transitions = lease.split()
        assert holder.endswith(f"-{second.proc.pid}") if second.proc else False
        assert int(transitions) >= 1
        lib.wait_until(lambda: not nodes_of(core, uid), 60, message="nodes released")
    finally:
        first.stop()
        second.stop()
