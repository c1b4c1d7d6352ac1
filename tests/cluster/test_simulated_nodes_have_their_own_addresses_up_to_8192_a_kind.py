"""Simulated nodes get an InternalIP and a pod CIDR of their own, for as many nodes of each
kind as the scale bench asks for (5,000)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

NODES = Path(__file__).resolve().parents[2] / "e2e" / "cluster" / "nodes.py"


def _nodes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cluster_nodes", NODES)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_node_of_every_kind_has_its_own_ip_and_pod_cidr() -> None:
    nodes = _nodes()
    pairs = [
        nodes.addresses(kind, i) for kind in nodes.KINDS for i in range(nodes.MAX_NODES_PER_KIND)
    ]
    assert len({ip for ip, _ in pairs}) == len(pairs)
    assert len({cidr for _, cidr in pairs}) == len(pairs)
    for ip, cidr in pairs:
        assert all(0 <= int(o) <= 255 for o in ip.split("."))
        assert all(0 <= int(o) <= 255 for o in cidr.removesuffix("/24").split("."))
    assert nodes.addresses("h100", 4999) == ("172.16.19.174", "10.119.135.0/24")


def test_the_first_nodes_keep_the_addresses_they_had() -> None:
    nodes = _nodes()
    assert nodes.addresses("h100", 0) == ("172.16.0.1", "10.100.0.0/24")
    assert nodes.addresses("h100", 300) == ("172.16.1.47", "10.101.44.0/24")


def test_an_index_past_the_limit_is_refused() -> None:
    nodes = _nodes()
    with pytest.raises(ValueError, match="out of range"):
        nodes.addresses("h100", nodes.MAX_NODES_PER_KIND)
    with pytest.raises(ValueError, match="out of range"):
        nodes.addresses("cpu", -1)
