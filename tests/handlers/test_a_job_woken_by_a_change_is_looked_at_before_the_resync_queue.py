"""Pass slots: a job woken by a change (a node failed) goes before the jobs the periodic
resync woke all at once. With a FIFO semaphore it waited behind every one of them: at 50
idle jobs, 8 slots and ~300 ms passes, seconds before its swap was even decided."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from phased.core.settings import Settings
from phased.kube.client import KubeClient
from phased.reconcile import JobEntry, PassSlots, Reconciler, job_ref_from_raw
from tests.kube.test_the_client_retries_transient_failures_and_nothing_else import FakeApi


def test_an_urgent_waiter_goes_before_routine_ones_that_came_first() -> None:
    async def scenario() -> list[str]:
        slots = PassSlots(1)
        order: list[str] = []
        await slots.acquire("holder", urgent=False)

        async def take(uid: str, urgent: bool) -> None:
            await slots.acquire(uid, urgent)
            order.append(uid)
            await asyncio.sleep(0)
            slots.release()

        tasks = [asyncio.create_task(take(f"r{i}", False)) for i in range(3)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(take("u0", True)))
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(take("u1", True)))
        await asyncio.sleep(0)
        slots.promote("r2")  # a change woke a job already waiting as routine
        await asyncio.sleep(0)
        assert slots.waiting() == 5
        slots.release()
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["u0", "u1", "r2", "r0", "r1"]


def test_a_freed_slot_goes_to_a_waiter_not_a_newcomer_and_none_is_lost() -> None:
    async def scenario() -> None:
        slots = PassSlots(2)
        await slots.acquire("a", urgent=True)
        await slots.acquire("b", urgent=True)
        waiter = asyncio.create_task(slots.acquire("c", urgent=False))
        await asyncio.sleep(0)
        slots.release()  # handed to c
        newcomer = asyncio.create_task(slots.acquire("d", urgent=True))
        await asyncio.sleep(0)
        assert waiter.done() and not newcomer.done()
        # A waiter cancelled after it was handed a slot passes the slot on.
        cancelled = asyncio.create_task(slots.acquire("e", urgent=True))
        await asyncio.sleep(0)
        slots.release()  # to d
        slots.release()  # to e ...
        cancelled.cancel()  # ... which is cancelled before it runs
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        await newcomer
        # Two slots were held (b's successor d, and the one e gave back): both come free.
        slots.release()
        slots.release()
        await asyncio.wait_for(slots.acquire("f", urgent=False), 1)
        await asyncio.wait_for(slots.acquire("g", urgent=False), 1)
        assert slots.waiting() == 0

    asyncio.run(scenario())


def test_the_reconciler_looks_at_a_changed_job_before_the_resync_backlog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> list[str]:
        rec = Reconciler(KubeClient(FakeApi([]), retries=0), Settings(), concurrency=2)  # type: ignore[arg-type]
        order: list[str] = []
        gate = asyncio.Event()

        async def guarded(uid: str) -> bool:
            order.append(uid)
            await gate.wait()
            return True

        monkeypatch.setattr(rec, "_guarded", guarded)
        for i in range(6):
            raw = {"metadata": {"name": f"j{i}", "namespace": "ml", "uid": f"j{i}"}}
            rec.jobs[f"j{i}"] = JobEntry(ref=job_ref_from_raw(raw), raw=raw)
        rec.trigger_all(routine=True)  # the resync: j0, j1 run, j2..j5 wait
        await asyncio.sleep(0.01)
        rec.trigger("failed")  # a node of this job failed
        rec.trigger("j5")  # a pod of j5 changed while it waited as routine
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.gather(*rec._tasks)
        return order

    order: list[Any] = asyncio.run(scenario())
    assert order[:2] == ["j0", "j1"]
    assert sorted(order[2:4]) == ["failed", "j5"]  # both before the routine backlog
    assert sorted(order[4:]) == ["j2", "j3", "j4"]
