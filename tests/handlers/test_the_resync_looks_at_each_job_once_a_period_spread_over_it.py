"""The periodic resync looks at every job once a period, one after another at even spacing,
not all at the same moment.

Woken together, the jobs' passes came in a burst every resync interval (at 50 jobs and 8
slots, seconds of 8 passes at once, each a GET and a LIST), and a job whose node failed
during the burst met a slower API server and waited for a slot: the tail of the time to its
swap. The same looks, spread, keep the load level."""

from __future__ import annotations

import asyncio

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, Reconciler, job_ref_from_raw
from tests import virtual_time
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def _reconciler(jobs: int) -> Reconciler:
    rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings())  # type: ignore[arg-type]
    for i in range(jobs):
        raw = {"metadata": {"name": f"j{i}", "namespace": "ml", "uid": f"j{i}"}}
        rec.jobs[f"j{i}"] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
    return rec


def _looks(rec: Reconciler, periods: int, period: float) -> list[tuple[float, str, bool]]:
    looks: list[tuple[float, str, bool]] = []

    def trigger(uid: str, delay: float = 0.0, *, routine: bool = False) -> None:
        looks.append((round(asyncio.get_running_loop().time(), 6), uid, routine))

    rec.trigger = trigger  # type: ignore[method-assign]

    async def main() -> None:
        for _ in range(periods):
            await rec.resync(period)

    virtual_time.run(main())
    return looks


def test_each_job_is_looked_at_once_a_period_at_even_spacing() -> None:
    looks = _looks(_reconciler(5), periods=2, period=10.0)
    assert looks == [
        (t + 10.0 * p, f"j{i}", True)
        for p in range(2)
        for i, t in enumerate((0.0, 2.0, 4.0, 6.0, 8.0))
    ]


def test_a_job_deleted_during_the_period_is_not_looked_at_and_a_new_one_waits_for_the_next() -> (
    None
):
    rec = _reconciler(4)
    looks: list[tuple[float, str]] = []

    def trigger(uid: str, delay: float = 0.0, *, routine: bool = False) -> None:
        now = asyncio.get_running_loop().time()
        looks.append((now, uid))
        if uid == "j0":
            del rec.jobs["j2"]  # deleted before its turn
            rec.jobs["new"] = rec.jobs["j1"]  # created during the period

    rec.trigger = trigger  # type: ignore[method-assign]

    async def main() -> float:
        loop = asyncio.get_running_loop()
        await rec.resync(8.0)
        return loop.time()

    ended = virtual_time.run(main())
    assert looks == [(0.0, "j0"), (2.0, "j1"), (6.0, "j3")]
    assert ended == 8.0  # the period is kept whole: the next starts on time


def test_a_resync_with_no_job_waits_out_its_period() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        await _reconciler(0).resync(10.0)
        return loop.time()

    assert virtual_time.run(main()) == 10.0
