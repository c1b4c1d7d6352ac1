"""A node deleted while a job claims it — the claim's patch answered 404 — is gone: the
claim is lost and the node leaves the node view. Before,
the claim handed the node as its read had found it back to the view (``Claim.fresh``), so
the deleted node was put back in after its deletion had taken it out, and stayed there as a
free node every job could choose (and count in line) until the next full list."""

from __future__ import annotations

import asyncio
import time

from phased.api.v1alpha1 import NodeRole
from phased.core.model import ClaimNode
from tests.kube.test_a_claim_lost_to_a_stale_view_refreshes_the_node_and_backs_off import (
    NOW,
    _reconciler,
    raw_node,
)


def test_a_node_deleted_before_the_claims_patch_leaves_the_view_and_the_claim_is_lost() -> None:
    async def scenario() -> None:
        # The patch made from the view (the version the claim was decided on) finds the
        # node gone.
        rec, entry, api = _reconciler([(404, {"reason": "NotFound"})])
        rec._looked["h1"] = (time.monotonic(), ())  # its pods were just listed: none
        await rec._perform(entry, ClaimNode("h1", "1", NodeRole.ACTIVE), NOW)
        assert [m for m, _ in api.calls] == ["PATCH"]
        assert rec.nodes.get("h1") is None
        assert entry.claim_refused and entry.lost_claims == 1
        if entry.timer is not None:
            entry.timer.cancel()

    asyncio.run(scenario())


def test_a_node_recreated_under_its_name_before_the_claim_is_not_claimed() -> None:
    """The claim was decided on version 1; the node was deleted and created again (version
    9, unmarked): the patch made from the view (version 1) is refused, the fresh read is not
    the version decided on, so nothing more is patched, and the new object goes into the
    view."""

    async def scenario() -> None:
        rec, entry, api = _reconciler([(409, {"reason": "Conflict"}), (200, raw_node(9))])
        rec._looked["h1"] = (time.monotonic(), ())
        await rec._perform(entry, ClaimNode("h1", "1", NodeRole.ACTIVE), NOW)
        assert [m for m, _ in api.calls] == ["PATCH", "GET"]
        view = rec.nodes.get("h1")
        assert view is not None and view.resource_version == "9" and not view.owner_uid
        assert entry.lost_claims == 1
        if entry.timer is not None:
            entry.timer.cancel()

    asyncio.run(scenario())
