"""The relist memory bench's API server answers a Node list as an API server does: ``limit``
Nodes a page, a continue token while more are left, the whole list without a limit, one
resourceVersion on every page; and its Nodes are ones the operator's view takes in."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp.test_utils import make_mocked_request
from bench.relist_memory import SELECTOR, NodeServer

from phased.kube.nodeview import NodeView


def answer(server: NodeServer, query: str) -> dict[str, Any]:
    request = make_mocked_request("GET", f"/api/v1/nodes?{query}")
    response = asyncio.run(server.nodes(request))
    assert response.status == 200 and response.body is not None
    data: dict[str, Any] = json.loads(bytes(response.body))
    return data


def test_pages_follow_the_continue_token_to_every_node_once() -> None:
    server = NodeServer(7)
    names, versions, token = [], set(), ""
    while True:
        page = answer(server, f"labelSelector={SELECTOR}&limit=3&continue={token}")
        names += [item["metadata"]["name"] for item in page["items"]]
        versions.add(page["metadata"]["resourceVersion"])
        token = page["metadata"]["continue"]
        if not token:
            break
    assert names == [f"h100-{i:03d}" for i in range(7)]
    assert len(versions) == 1


def test_no_limit_is_the_whole_list_in_one_answer() -> None:
    server = NodeServer(4)
    page = answer(server, f"labelSelector={SELECTOR}")
    assert len(page["items"]) == 4 and page["metadata"]["continue"] == ""


def test_its_nodes_fill_the_operators_view() -> None:
    server = NodeServer(3)
    page = answer(server, f"labelSelector={SELECTOR}")
    view = NodeView()
    view.replace_all(page["items"], page["metadata"]["resourceVersion"])
    node = view.get("h100-002")
    assert node is not None and node.ready and node.allocatable == {"nvidia.com/gpu": 8}
    assert 3000 < server.bytes_per_node < 8000  # the size of a simulated node as listed
