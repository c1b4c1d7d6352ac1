"""Simulated nodes for the local test cluster (kwok manages them).

Run by ``up.sh``; importable by tests (``from cluster.nodes import ...`` with ``e2e/`` on
``sys.path``, which ``e2e/conftest.py`` arranges).

    python3 e2e/cluster/nodes.py [--h100 16] [--h200 4] [--ascend 4] [--cpu 4]
                                 [--kubeconfig PATH] [--dry-run]

Counts default to the ``PHASED_NODES_{H100,H200,ASCEND,CPU}`` environment variables, then
16/4/4/4. Idempotent: nodes that already exist are left alone, missing ones are created.

Every node carries the topology labels ``topology.kubernetes.io/zone``,
``topology.phased.dev/block`` and ``topology.phased.dev/rack``: nodes of one kind are
numbered in order and packed ``NODES_PER_RACK`` to a rack, ``RACKS_PER_BLOCK`` racks to a
block, blocks alternating between ``ZONES`` zones (block ``b`` is in zone ``b % len(ZONES)``).
With the defaults, 16 H100 nodes make 4 racks, 2 blocks, one block in each zone.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ZONES = ("zone-a", "zone-b")
NODES_PER_RACK = 4
RACKS_PER_BLOCK = 2

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
SIM_LABEL = "type"  # type=kwok, as kwok's own examples label fake nodes


@dataclass(frozen=True)
class NodeKind:
    """One kind of simulated node: its name prefix, labels and resources."""

    key: str  # h100, h200, ascend, cpu
    prefix: str
    labels: Mapping[str, str]
    capacity: Mapping[str, str]
    # Accelerator resource name -> count (also part of capacity and allocatable).
    accelerators: Mapping[str, int] = field(default_factory=dict)


def _nvidia_labels(product: str, memory_mib: int, family: str) -> dict[str, str]:
    # What NVIDIA GPU feature discovery puts on a node (a representative subset).
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": str(memory_mib),
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.machine": "DGX-H100" if "H100" in product else "DGX-H200",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "90",
        "nvidia.com/cuda.driver.rev": "07",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4",
        "feature.node.kubernetes.io/pci-10de.present": "true",
    }


_GPU_NODE = {"cpu": "192", "memory": "2Ti", "pods": "110", "ephemeral-storage": "20Ti"}

KINDS: dict[str, NodeKind] = {
    "h100": NodeKind(
        key="h100",
        prefix="h100",
        labels=_nvidia_labels("NVIDIA-H100-80GB-HBM3", 81559, "hopper"),
        capacity=_GPU_NODE,
        accelerators={"nvidia.com/gpu": 8},
    ),
    "h200": NodeKind(
        key="h200",
        prefix="h200",
        labels=_nvidia_labels("NVIDIA-H200", 143771, "hopper"),
        capacity=_GPU_NODE,
        accelerators={"nvidia.com/gpu": 8},
    ),
    "ascend": NodeKind(
        key="ascend",
        prefix="ascend",
        labels={
            "accelerator": "huawei-Ascend910B",
            "node.kubernetes.io/npu.chip.name": "910B",
            "servertype": "Ascend910B-20",
            "accelerator-type": "module-910b-8",
        },
        capacity={"cpu": "192", "memory": "1536Gi", "pods": "110", "ephemeral-storage": "10Ti"},
        accelerators={"huawei.com/Ascend910": 8},
    ),
    "cpu": NodeKind(
        key="cpu",
        prefix="cpu",
        labels={},
        capacity={"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "2Ti"},
    ),
}

DEFAULT_COUNTS: dict[str, int] = {"h100": 16, "h200": 4, "ascend": 4, "cpu": 4}


def topology(kind: str, index: int) -> dict[str, str]:
    """The zone, block and rack labels of the ``index``-th node of ``kind``."""
    rack = index // NODES_PER_RACK
    block = rack // RACKS_PER_BLOCK
    zone = ZONES[block % len(ZONES)]
    return {
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": "local",
        "topology.phased.dev/block": f"{kind}-block-{block}",
        "topology.phased.dev/rack": f"{kind}-rack-{rack}",
    }


def node_name(kind: str, index: int) -> str:
    return f"{KINDS[kind].prefix}-{index:03d}"


MAX_NODES_PER_KIND = 8192  # the scale bench goes to 5,000


def addresses(kind: str, index: int) -> tuple[str, str]:
    """(InternalIP, pod CIDR) of a node: unique per node, up to MAX_NODES_PER_KIND nodes of a
    kind (pod CIDRs: 32 second octets a kind from 10.100, 256 /24s in each)."""
    if not 0 <= index < MAX_NODES_PER_KIND:
        raise ValueError(f"node index {index} out of range (0..{MAX_NODES_PER_KIND - 1})")
    k = list(KINDS).index(kind)
    ip = f"172.{16 + k}.{index // 254}.{index % 254 + 1}"
    cidr = f"10.{100 + k * (MAX_NODES_PER_KIND // 256) + index // 256}.{index % 256}.0/24"
    return ip, cidr


def accelerator_labels(kind: str, index: int) -> dict[str, str]:
    """The accelerator and topology labels of a node (also used on kind's real workers)."""
    return {
        "node.kubernetes.io/instance-type": f"sim-{kind}",
        "phased.dev/sim-node-kind": kind,
        **topology(kind, index),
        **KINDS[kind].labels,
    }


def node_manifest(kind: str, index: int) -> dict[str, Any]:
    """The Node object (with status) for the ``index``-th simulated node of ``kind``."""
    spec = KINDS[kind]
    ip, pod_cidr = addresses(kind, index)
    name = node_name(kind, index)
    resources = {**spec.capacity, **{k: str(v) for k, v in spec.accelerators.items()}}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        SIM_LABEL: "kwok",
        **accelerator_labels(kind, index),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                KWOK_ANNOTATION: "fake",
                "node.alpha.kubernetes.io/ttl": "0",
            },
        },
        "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "sim://kwok",
                "kernelVersion": "6.8.0-sim",
                "kubeProxyVersion": "",
                "kubeletVersion": "kwok",
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "Simulated node (kwok)",
                "systemUUID": "",
            },
        },
    }


def manifests(counts: Mapping[str, int]) -> list[dict[str, Any]]:
    """Every Node object for ``counts`` (kind -> how many), in a stable order."""
    unknown = set(counts) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown node kinds {sorted(unknown)}; known: {sorted(KINDS)}")
    out = []
    for kind in KINDS:
        n = counts.get(kind, 0)
        if n < 0:
            raise ValueError(f"node count for {kind} must be >= 0, got {n}")
        out.extend(node_manifest(kind, i) for i in range(n))
    return out


def counts_from_env(env: Mapping[str, str] | None = None) -> dict[str, int]:
    env = os.environ if env is None else env
    counts = {}
    for kind, default in DEFAULT_COUNTS.items():
        raw = env.get(f"PHASED_NODES_{kind.upper()}", "")
        try:
            counts[kind] = int(raw) if raw.strip() else default
        except ValueError:
            raise ValueError(f"PHASED_NODES_{kind.upper()}={raw!r} is not a number") from None
    return counts


def ensure_nodes(core_v1: Any, counts: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """Create the nodes of ``counts`` that do not exist yet. Returns (created, existing)."""
    from kubernetes.client.exceptions import ApiException

    existing = {n.metadata.name for n in core_v1.list_node().items}
    created: list[str] = []
    kept: list[str] = []
    for body in manifests(counts):
        name = body["metadata"]["name"]
        if name in existing:
            kept.append(name)
            continue
        try:
            core_v1.create_node(body)
        except ApiException as exc:
            if exc.status != 409:  # created meanwhile: fine
                raise
        created.append(name)
    return created, kept


def delete_nodes(core_v1: Any, names: Iterable[str]) -> None:
    from kubernetes.client.exceptions import ApiException

    for name in names:
        try:
            core_v1.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _core_v1(kubeconfig: str) -> Any:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=kubeconfig)
    return client.CoreV1Api(api)


def main(argv: list[str] | None = None) -> int:
    env_counts = counts_from_env()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for kind in KINDS:
        p.add_argument(
            f"--{kind}",
            type=int,
            default=env_counts[kind],
            metavar="N",
            help=f"how many {kind} nodes (default {env_counts[kind]})",
        )
    p.add_argument(
        "--kubeconfig", default=os.environ.get("PHASED_KUBECONFIG") or os.environ.get("KUBECONFIG")
    )
    p.add_argument("--dry-run", action="store_true", help="print the nodes as YAML, create nothing")
    p.add_argument(
        "--print-labels",
        metavar="KIND:INDEX",
        help="print the labels (key=value) and accelerator resources (resource:count) "
        "of one node and exit (used by e2e/kind/up.sh)",
    )
    args = p.parse_args(argv)
    counts = {kind: getattr(args, kind) for kind in KINDS}

    if args.print_labels:
        kind, _, index = args.print_labels.partition(":")
        if kind not in KINDS or not index.isdigit():
            print(
                f"error: --print-labels wants KIND:INDEX with KIND in {sorted(KINDS)}",
                file=sys.stderr,
            )
            return 2
        for key, value in accelerator_labels(kind, int(index)).items():
            print(f"{key}={value}")
        for res, n in KINDS[kind].accelerators.items():
            print(f"{res}:{n}")
        return 0

    if args.dry_run:
        import yaml

        yaml.safe_dump_all(manifests(counts), sys.stdout, sort_keys=False)
        return 0
    if not args.kubeconfig:
        print("error: no kubeconfig: pass --kubeconfig or set PHASED_KUBECONFIG", file=sys.stderr)
        return 2
    try:
        created, kept = ensure_nodes(_core_v1(args.kubeconfig), counts)
    except Exception as exc:  # a clear line, not a stack trace
        print(f"error: could not create the simulated nodes: {exc}", file=sys.stderr)
        return 1
    summary = ", ".join(f"{counts[k]} {k}" for k in KINDS)
    print(f"nodes: {summary} ({len(created)} created, {len(kept)} already there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
