"""Leader election with fencing: three replicas with skewed clocks (wall clocks hours apart,
monotonic clocks running up to 1% fast or slow) share one simulated Lease API that answers
late, fails, loses responses, hangs for partitioned replicas and refuses stale
resourceVersions. Leaders crash, hand over cleanly or are cut off. On virtual time, for half
an hour per seed: two replicas never act in the same moment, and someone always acts again
soon after a leader is gone."""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from phased.kube.client import Conflict, KubeError, NotFound
from phased.kube.lease import LeaderLost, LeaseElector
from tests import virtual_time

LEASE_SECONDS = 15.0
RUN_SECONDS = 1800.0
WRITE_FLIGHT = 0.5  # longest a write of the operator takes to land once sent
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _now() -> float:
    return asyncio.get_running_loop().time()


@dataclass
class World:
    """The API server's one Lease, the faults, and every write the replicas made."""

    rng: random.Random
    lease: dict[str, Any] | None = None
    version: int = 0
    partitions: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    writes: list[tuple[str, float, float]] = field(default_factory=list)  # who, sent, landed

    def cut_off(self, replica: str) -> bool:
        return any(a <= _now() < b for a, b in self.partitions.get(replica, []))

    def apply(self, method: str, body: Any) -> dict[str, Any]:
        if method == "GET":
            if self.lease is None:
                raise NotFound(404, "NotFound", "no lease", "get", "leases")
            return copy.deepcopy(self.lease)
        if method == "POST":
            if self.lease is not None:
                raise Conflict(409, "AlreadyExists", "exists", "create", "leases")
        elif self.lease is None or body["metadata"].get("resourceVersion") != str(self.version):
            raise Conflict(409, "Conflict", "stale resourceVersion", "update", "leases")
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)


class ReplicaAPI:
    """One replica's view of the API: latency, 500s, lost responses, partitions."""

    def __init__(self, world: World, replica: str) -> None:
        self.world, self.replica = world, replica

    async def request(
        self, verb: str, method: str, path: str, *, resource: str, body: Any = None, **_: Any
    ) -> dict[str, Any]:
        rng = self.world.rng
        if self.world.cut_off(self.replica):
            await asyncio.sleep(120)  # hangs until the caller gives up
            raise KubeError(0, "Unreachable", "partitioned", verb, resource)
        await asyncio.sleep(rng.uniform(0.001, 0.4))
        if rng.random() < 0.05:
            raise KubeError(500, "InternalError", "try again", verb, resource)
        answer = self.world.apply(method, body)
        if rng.random() < 0.03:
            await asyncio.sleep(120)  # applied, but the answer never comes
        await asyncio.sleep(rng.uniform(0.001, 0.4))
        return answer


class NaiveElector(LeaseElector):
    """The old rule, for contrast: expiry judged by the holder's renewTime against the local
    wall clock, and acting for as long as the last attempt said 'leader'."""

    leading = False

    def may_act(self) -> bool:
        return self.leading

    async def try_acquire_or_renew(self) -> bool:
        try:
            lease = await self._kube.request("get", "GET", self._path, resource="leases")
        except NotFound:
            lease = None
        spec = {"holderIdentity": self.identity, "renewTime": self._wall().isoformat()}
        if lease is None:
            body = {"metadata": {"name": self._name}, "spec": spec}
            path, method = self._create_path, "POST"
        else:
            holder = lease["spec"].get("holderIdentity")
            renewed = datetime.fromisoformat(lease["spec"].get("renewTime") or EPOCH.isoformat())
            if holder not in (None, self.identity) and self._wall() < renewed + timedelta(
                seconds=LEASE_SECONDS
            ):
                self.leading = False
                return False
            lease["spec"] = spec
            body, path, method = lease, self._path, "PUT"
        try:
            await self._kube.request("w", method, path, resource="leases", body=body)
        except Conflict:
            return False
        self.leading = True
        return True

    async def keep(self) -> None:
        while True:
            await self._sleep(self.renew_every)
            try:
                if await self.try_acquire_or_renew():
                    continue
            except KubeError:
                continue
            self.leading = False
            raise LeaderLost(self.identity)


async def _replica(world: World, name: str, naive: bool, seed: int) -> None:
    rng = random.Random(f"{seed}-{name}")
    rate = rng.uniform(0.99, 1.01)  # this machine's clock runs fast or slow
    offset = rng.uniform(-1e6, 1e6)  # and counts from its own boot
    wall_skew = rng.uniform(-3 * 3600, 3 * 3600)  # its calendar clock is hours off

    def clock() -> float:
        return _now() * rate + offset

    def wall() -> datetime:
        return EPOCH + timedelta(seconds=_now() + wall_skew)

    api = ReplicaAPI(world, name)
    running: list[asyncio.Task[None]] = []
    try:
        await _incarnations(world, name, naive, rng, clock, wall, api, running)
    finally:
        for task in running:
            task.cancel()


async def _incarnations(
    world: World,
    name: str,
    naive: bool,
    rng: random.Random,
    clock: Any,
    wall: Any,
    api: ReplicaAPI,
    running: list[asyncio.Task[None]],
) -> None:
    incarnation = 0
    while _now() < RUN_SECONDS:
        incarnation += 1
        identity = f"{name}#{incarnation}"
        kind = NaiveElector if naive else LeaseElector
        elector = kind(api, "ns", "phased", identity, lease_seconds=LEASE_SECONDS,
                       clock=clock, wall=wall)  # fmt: skip
        await elector.acquire()
        actor = asyncio.create_task(_act(world, elector, identity, rng))
        keeper = asyncio.create_task(elector.keep())
        running[:] = [actor, keeper]
        done, _ = await asyncio.wait({keeper}, timeout=rng.uniform(30, 400))
        if not done:
            keeper.cancel()
            if rng.random() < 0.5:  # a clean shutdown hands the lease over
                actor.cancel()
                await elector.release()
            # else: killed (SIGKILL, a lost node): nothing more from this incarnation
        else:
            with pytest.raises(LeaderLost):
                keeper.result()
        actor.cancel()
        await asyncio.sleep(rng.uniform(1, 10))  # restarted by the kubelet


async def _act(world: World, elector: LeaseElector, identity: str, rng: random.Random) -> None:
    """The operator's writes: each one checked against the fence before it is sent."""
    while True:
        await asyncio.sleep(0.25)
        if elector.may_act():
            sent = _now()
            await asyncio.sleep(rng.uniform(0, WRITE_FLIGHT))
            world.writes.append((identity, sent, _now()))


def _simulate(seed: int, naive: bool = False) -> World:
    rng = random.Random(seed)
    world = World(rng=rng)
    names = ["a", "b", "c"]
    for _ in range(12):  # one replica at a time is cut off from the API server
        start = rng.uniform(0, RUN_SECONDS)
        world.partitions.setdefault(rng.choice(names), []).append(
            (start, start + rng.uniform(5, 90))
        )

    async def main() -> None:
        tasks = [asyncio.create_task(_replica(world, n, naive, seed)) for n in names]
        await asyncio.sleep(RUN_SECONDS)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    virtual_time.run(main())
    return world


def _terms(world: World) -> list[tuple[float, float, str]]:
    """Each incarnation's acting span: first write sent to last write landed."""
    spans: dict[str, tuple[float, float]] = {}
    for who, sent, landed in world.writes:
        first, last = spans.get(who, (sent, landed))
        spans[who] = (min(first, sent), max(last, landed))
    return sorted((a, b, who) for who, (a, b) in spans.items())


def _overlaps(world: World) -> list[tuple[str, str]]:
    terms = _terms(world)
    return [(x[2], y[2]) for x, y in itertools.pairwise(terms) if y[0] < x[1]]


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    # Thousands of expected warnings (500s, partitions) would only slow the run down.
    lease_logger = logging.getLogger("phased.kube.lease")
    level = lease_logger.level
    lease_logger.setLevel(logging.ERROR)
    yield
    lease_logger.setLevel(level)


@pytest.mark.parametrize("seed", range(3))
def test_no_two_replicas_act_in_the_same_moment(seed: int) -> None:
    world = _simulate(seed)
    terms = _terms(world)
    assert len(terms) >= 5, "the scenario must hand the lease over several times"
    assert not _overlaps(world)
    # Liveness: after a leader is gone, another acts within two leases and some retries.
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(terms)]
    assert max(gaps) < 3 * LEASE_SECONDS + 30, gaps


def test_the_check_catches_an_elector_that_trusts_the_holders_clock() -> None:
    """The same worlds with the old rule (holder's renewTime against the local wall clock,
    no acting deadline): replicas hours apart take each other's live lease, and acts overlap."""
    assert any(_overlaps(_simulate(seed, naive=True)) for seed in range(3))


class _PlainAPI:
    """The Lease API without faults, answering at once."""

    def __init__(self, world: World) -> None:
        self.world = world

    async def request(
        self, verb: str, method: str, path: str, *, resource: str, body: Any = None, **_: Any
    ) -> dict[str, Any]:
        return self.world.apply(method, body)


def _held_by_another(world: World, renew_time: str) -> None:
    world.lease = {
        "metadata": {"name": "phased", "resourceVersion": "0"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": 15, "renewTime": renew_time},
    }


@pytest.mark.parametrize("renew_time", ["2000-01-01T00:00:00.000000Z", "2100-01-01T00:00:00Z"])
def test_a_standby_counts_the_lease_on_its_own_clock_not_the_holders_renew_time(
    renew_time: str,
) -> None:
    """Ancient or future renewTime alike: the standby takes over exactly when the record has
    stayed unchanged for leaseDurationSeconds since *it* saw it."""
    world = World(rng=random.Random(0))
    _held_by_another(world, renew_time)

    async def main() -> list[tuple[float, bool]]:
        elector = LeaseElector(_PlainAPI(world), "ns", "phased", "me", clock=_now)
        seen = []
        for at in (0.0, 10.0, 14.9, 15.1):
            await asyncio.sleep(at - _now())
            seen.append((at, await elector.try_acquire_or_renew()))
        return seen

    assert virtual_time.run(main()) == [(0.0, False), (10.0, False), (14.9, False), (15.1, True)]
    assert world.lease is not None and world.lease["spec"]["holderIdentity"] == "me"
    assert world.lease["spec"]["leaseTransitions"] == 1


def test_a_record_that_keeps_changing_is_never_taken_over_and_fencing_follows_renewals() -> None:
    world = World(rng=random.Random(0))
    _held_by_another(world, "2000-01-01T00:00:00Z")

    async def main() -> tuple[bool, bool, bool, bool]:
        standby = LeaseElector(_PlainAPI(world), "ns", "phased", "me", clock=_now)
        for _ in range(30):  # the holder renews every 2 s for a minute
            assert not await standby.try_acquire_or_renew()
            assert world.lease is not None
            renewed = copy.deepcopy(world.lease)
            renewed["metadata"]["resourceVersion"] = str(world.version)
            world.apply("PUT", renewed)
            await asyncio.sleep(2)
        assert not standby.may_act()
        assert not await standby.try_acquire_or_renew()  # sees the last renewal: 15 s from now
        await asyncio.sleep(14.9)
        assert not await standby.try_acquire_or_renew()
        await asyncio.sleep(0.2)  # the holder is gone
        took = await standby.try_acquire_or_renew()
        acting = standby.may_act()
        await asyncio.sleep(LEASE_SECONDS - standby.margin - 0.1)
        still = standby.may_act()
        await asyncio.sleep(0.2)  # no renewal since: past sent + lease - margin
        return took, acting, still, standby.may_act()

    assert virtual_time.run(main()) == (True, True, True, False)
