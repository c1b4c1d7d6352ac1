"""A TrainingJob on the real nodes (kubelet, containerd, runc): its workers are real Python
processes that find each other through the cluster DNS and meet over TCP across nodes. The
job goes through its two phases; in the second, one node's kubelet is stopped (a silent
node: NotReady only after the node monitor grace) and Phased cordons it, swaps the spare in
and starts a new generation, again as real processes. Each worker reports what it sees, and
its hostname, /etc/hosts, environment and DNS are what the generated pod spec says.

Needs the real nodes of ``make cluster`` (PHASED_REAL_NODES >= 3, as root): skipped without
them, failed without them under CI."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from e2e import lib
from e2e.harness import Operator
from e2e.operator_fixtures import apply, get_job, nodes_of, status
from e2e.real_nodes import DNS_IP, events, generation_running

pytestmark = pytest.mark.timeout(900)

# The training program every worker runs: it reports what it sees, resolves rank 0 by its
# DNS name, meets the other ranks over TCP (rank 0 listens on MASTER_PORT), then "trains".
# In the train phase, generation 0 trains until it is stopped; a later generation (after a
# restart) finishes after a few steps, so the job can succeed.
WORKER = r"""
import json, os, socket, time

def say(event, **data):
    print(json.dumps({"event": event, **data}), flush=True)

def retry(what, fn, timeout=180):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except OSError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"{what}: {exc}")
            time.sleep(1)

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
say("start", pid=os.getpid(), hostname=socket.gethostname(), env=dict(os.environ),
    hosts=open("/etc/hosts").read(), resolv=open("/etc/resolv.conf").read())
master_ip = retry("resolve " + addr, lambda: socket.gethostbyname(addr))
if rank == 0:
    server = socket.create_server(("0.0.0.0", port))
    peers = []
    while len(peers) < world - 1:
        conn, (ip, _) = server.accept()
        peers.append((conn, ip, int(conn.recv(16).decode())))
    for conn, _, _ in peers:
        conn.sendall(b"go")
        conn.close()
    say("rendezvous", master_ip=master_ip, peers={str(r): ip for _, ip, r in peers})
else:
    conn = retry("connect to rank 0", lambda: socket.create_connection((master_ip, port), 5))
    conn.sendall(str(rank).encode())
    conn.settimeout(600)
    say("rendezvous", master_ip=master_ip, reply=conn.recv(16).decode())
forever = os.environ["PHASED_PHASE"] == "train" and os.environ["PHASED_RESTART_GENERATION"] == "0"
step = 0
while forever or step < 3:
    step += 1
    say("step", step=step)
    time.sleep(2)
say("done")
"""

IMAGE = lib.real_node_settings()["PHASED_WORKER_IMAGE"]


def training_job(name: str) -> dict[str, Any]:
    phase = {"nodes": {"min": 2, "max": 2}, "gpuTypes": ["H100"], "gpusPerNode": 8}
    return {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "image": IMAGE,
                "command": ["python3", "-u", "-c", WORKER],
                "env": [{"name": "TRAINING_RECIPE", "value": "real-nodes"}],
            },
            "spares": {"count": 1},
            "failurePolicy": {"notReadyGrace": "3s"},
            "phases": [{"name": "prepare", **phase}, {"name": "train", **phase}],
        },
    }


def host_processes(node: str, pod: Any) -> list[int]:
    """Host pids of the pod's worker process on the real node (from the node's cgroups)."""
    found = []
    for pid in lib.node_container_pids(node):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"HOSTNAME={pod.spec.hostname}".encode() in environ and any(
            e.startswith(b"PHASED_RANK=") for e in environ
        ):
            found.append(pid)
    return found


def check_worker_sees_its_spec(core: Any, namespace: str, pods: list[Any]) -> None:
    """Hostname, /etc/hosts, env and DNS of each worker are what its pod spec says; rank 0's
    name resolves to its pod IP and the other rank reached it over TCP from another node."""
    rank0 = pods[0]
    assert len({p.spec.node_name for p in pods}) == 2, "the two ranks share a node"
    for pod in pods:
        seen = events(core, namespace, pod.metadata.name)
        start = next(e for e in seen if e["event"] == "start")
        met = next(e for e in seen if e["event"] == "rendezvous")
        spec = pod.spec
        assert start["hostname"] == spec.hostname
        fqdn = f"{spec.hostname}.{spec.subdomain}.{namespace}.svc.cluster.local"
        host_lines = [line.split() for line in start["hosts"].splitlines()]
        assert [pod.status.pod_ip, fqdn, spec.hostname] in host_lines, start["hosts"]
        wanted_env = {e.name: e.value for e in spec.containers[0].env}
        assert {k: start["env"].get(k) for k in wanted_env} == wanted_env
        assert start["env"]["TRAINING_RECIPE"] == "real-nodes"
        resolv = start["resolv"].split("\n")
        assert f"nameserver {DNS_IP}" in resolv, start["resolv"]
        assert f"search {namespace}.svc.cluster.local svc.cluster.local cluster.local" in resolv
        assert met["master_ip"] == rank0.status.pod_ip, (met, rank0.status.pod_ip)
        status_ = pod.status.container_statuses[0]
        assert status_.container_id.startswith("containerd://"), status_.container_id
        assert host_processes(spec.node_name, pod), (
            f"no host process of {pod.metadata.name} in the cgroups of {spec.node_name}"
        )
    met0 = next(e for e in events(core, namespace, rank0.metadata.name) if "peers" in e)
    assert met0["peers"] == {"1": pods[1].status.pod_ip}, met0


def test_a_job_on_real_nodes_survives_a_stopped_kubelet(
    real_operator: Operator,
    real: list[str],
    kubectl: lib.Kubectl,
    core: Any,
    namespace: str,
) -> None:
    name = "real"
    apply(kubectl, namespace, training_job(name))
    uid = get_job(kubectl, namespace, name)["metadata"]["uid"]

    def prepared() -> dict[str, Any] | None:
        st = status(kubectl, namespace, name)
        return st if st.get("phase") == "train" and st.get("state") == "Running" else None

    # Phase 1 (prepare): two workers meet and finish.
    st = lib.wait_until(
        prepared, 300, message=lambda: f"the train phase; {status(kubectl, namespace, name)}"
    )
    assert st["phases"][0]["state"] == "Succeeded"

    # Phase 2 (train), generation 0: two real processes on two real nodes, one spare.
    active = set(st["pool"]["active"])
    spares = set(st["pool"]["spares"])
    assert len(active) == 2 and len(spares) == 1 and active | spares <= set(real)
    pods = lib.wait_until(
        lambda: generation_running(core, namespace, uid, "train", 0, active),
        240,
        message="the train phase's two workers running and met",
    )
    check_worker_sees_its_spec(core, namespace, pods)

    # A real node failure: the kubelet of rank 1's node stops; nothing tells the API server.
    victim = pods[1].spec.node_name
    lib.stop_kubelet(victim)

    def answered() -> dict[str, Any] | None:
        s = status(kubectl, namespace, name)
        entries = [f for f in s.get("failures", []) if f["node"] == victim]
        return s if entries and entries[0].get("resumed") else None

    st = lib.wait_until(
        answered,
        300,
        message=lambda: f"the failure of {victim} answered; {status(kubectl, namespace, name)}",
    )
    entry = next(f for f in st["failures"] if f["node"] == victim)
    assert entry["replacedBy"] in spares, entry
    assert core.read_node(victim).spec.unschedulable, f"{victim} not cordoned"
    assert victim not in st["pool"]["active"]
    assert st["restartGeneration"] >= 1
    healthy = (active - {victim}) | spares
    assert set(st["pool"]["active"]) == healthy

    # The new generation runs as real processes on the healthy nodes and meets again.
    generation = int(st["restartGeneration"])
    pods = lib.wait_until(
        lambda: generation_running(core, namespace, uid, "train", generation, healthy),
        240,
        message=f"generation {generation} running and met on {sorted(healthy)}",
    )
    check_worker_sees_its_spec(core, namespace, pods)
    assert nodes_of(core, uid).get(victim) == "quarantined"

    # It finishes; the job succeeds.
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        st = status(kubectl, namespace, name)
        if st.get("state") in ("Succeeded", "Failed"):
            break
        time.sleep(2)
    assert st.get("state") == "Succeeded", f"{st}\n{real_operator.tail(60)}"
    assert [p["state"] for p in st["phases"]] == ["Succeeded", "Succeeded"]
    for pod in pods:
        assert any(e["event"] == "done" for e in events(core, namespace, pod.metadata.name))


def test_failures_injected_on_a_real_node_are_what_a_user_meets(
    real: list[str], core: Any, namespace: str
) -> None:
    """The node's containers killed: its pod fails with 137, as the kubelet saw it. The
    kubelet frozen: the node goes silent (not Ready after the node monitor grace) while its
    process lives; thawed, the node is Ready again."""
    node = real[-1]
    body = lib.sim_pod(
        "victim",
        image=IMAGE,
        command=["python3", "-c", "import time\nwhile True: time.sleep(1)"],
        node_name=node,
    )
    core.create_namespaced_pod(namespace, body)
    lib.wait_pod_phase(core, namespace, "victim", "Running", timeout=120)
    assert lib.node_container_pids(node), f"no container process in the cgroups of {node}"
    assert lib.kill_node_containers(node) >= 1
    pod = lib.wait_pod_phase(core, namespace, "victim", "Failed", timeout=120)
    assert lib.container_exit_code(pod) == 137

    try:
        lib.freeze_kubelet(node)
        lib.wait_until(
            lambda: lib.node_ready(core, node) != "True",
            180,
            message=f"{node} no longer Ready with its kubelet frozen",
        )
        assert lib.kubelet_pid(node) is not None, "a frozen kubelet is still a process"
    finally:
        lib.restore_real_node(core, node)
    assert lib.node_ready(core, node) == "True"
