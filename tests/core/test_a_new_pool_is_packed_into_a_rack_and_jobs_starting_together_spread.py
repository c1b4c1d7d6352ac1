"""A pool formed from nothing is packed into the rack with the most free nodes, and jobs
forming their pools at the same moment from the same free nodes reach for different racks
(they used to all reach for the same nodes, by name, and all but one lose the claim)."""

from __future__ import annotations

from dataclasses import replace

from phased.api.v1alpha1 import NodeRole
from phased.core.decide import decide
from phased.core.model import ClaimNode, JobRef
from tests.core.builders import JOB, SETTINGS, T0, node, of_type, phase, snapshot, spec


def _racks(per_rack: dict[str, int]) -> list:
    return [
        node(f"{rack}-n{i}", rack=rack, block=f"b-{rack}")
        for rack, count in per_rack.items()
        for i in range(count)
    ]


def _claimed(job: JobRef, free: list, lo: int = 4, spares: int = 1) -> list[str]:
    plan = decide(
        snapshot(spec(phase("train", lo, lo), spares=spares), free, job=job), SETTINGS, T0
    )
    return [c.node for c in of_type(plan, ClaimNode)]


def test_a_new_pool_goes_to_the_rack_with_the_most_free_nodes():
    free = _racks({"ra": 3, "rb": 6, "rc": 4})
    claimed = _claimed(JOB, free)
    assert len(claimed) == 5 and all(name.startswith("rb-") for name in claimed)


def test_what_does_not_fit_one_rack_spills_over_the_nearest():
    free = [*_racks({"ra": 3, "rb": 4}), node("far-n0", rack="rf", block="bf", zone="z9")]
    claimed = _claimed(JOB, free, lo=6, spares=1)
    assert "far-n0" not in claimed and len(claimed) == 7


def test_jobs_forming_pools_together_spread_over_equal_racks():
    free = _racks({f"r{i}": 5 for i in range(8)})
    jobs = [replace(JOB, name=f"job-{j}", uid=f"uid-{j}") for j in range(8)]
    first_racks = {_claimed(job, free)[0].split("-")[0] for job in jobs}
    assert len(first_racks) >= 4, first_racks  # by name they would all take r0's nodes
    for job in jobs:  # and each one's pool stays in one rack
        assert len({name.split("-")[0] for name in _claimed(job, free)}) == 1


def test_the_same_job_always_chooses_the_same_rack():
    free = _racks({f"r{i}": 5 for i in range(8)})
    job = replace(JOB, uid="uid-stable")
    assert _claimed(job, free) == _claimed(job, list(reversed(free)))


def test_nodes_without_topology_are_taken_by_name():
    bare = [
        replace(n, labels={"kubernetes.io/hostname": n.name, **_gpu(n)}) for n in _racks({"x": 5})
    ]
    assert _claimed(JOB, bare) == sorted(n.name for n in bare)


def _gpu(n) -> dict[str, str]:
    return {k: v for k, v in n.labels.items() if k.startswith("nvidia.com/")}


def test_a_held_pool_still_grows_around_what_it_holds():
    from tests.core.builders import owned

    free = _racks({"ra": 2, "rb": 6})
    held = [owned(free[0], NodeRole.ACTIVE)]
    plan = decide(snapshot(spec(phase("train", 3, 3)), [held[0], *free[1:]]), SETTINGS, T0)
    claimed = [c.node for c in of_type(plan, ClaimNode)]
    assert claimed[0] == "ra-n1"  # the held node's rack first, not the bigger rack
