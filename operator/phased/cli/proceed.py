"""``phased proceed [NAMESPACE/]JOB``: a person's go-ahead after the breaker tripped.

When many nodes of a pool fail together, the breaker holds them (``MassFailure``): nothing is
cordoned or swapped until they recover or a person decides. This command shows what the
breaker holds and, if it holds anything, sets the TrainingJob annotation
``phased.dev/proceed-after-mass-failure`` to the current time (never earlier than the trip),
so the operator answers the held failures once, as usual, and arms the breaker again. It
refuses a job whose breaker is not tripped: a go-ahead given in advance would let the next
mass failure through unseen.

The write is guarded by the job's resourceVersion, so the go-ahead is given for the breaker
state the command read. The operator writes the job's status on its own (every resync), and
a write of its between the command's read and its own makes the guard refuse: the command
then reads the job again and decides again, as a controller does on a conflict, up to
``ATTEMPTS`` times.

Exit codes: 0 released, 1 nothing to release (not tripped, or the job kept changing under
every attempt: run it again), 2 the job or the cluster could not be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from phased.api.v1alpha1 import parse_status
from phased.core import labels
from phased.core.conditions import ConditionType, find
from phased.core.times import format_time, parse_time

if TYPE_CHECKING:
    from phased.kube.jobs import JobVerbs

ATTEMPTS = 5  # reads and guarded writes before the command gives up on a job that keeps moving


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "proceed",
        help="let the operator answer the failures its mass-failure breaker holds",
        description="Approve answering (cordon, quarantine, swap) the failed nodes a "
        "TrainingJob's mass-failure breaker holds.",
    )
    parser.add_argument("job", metavar="[NAMESPACE/]JOB")
    parser.add_argument("-n", "--namespace", default="default", help="used when JOB has none")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    namespace, _, name = str(args.job).rpartition("/")
    return asyncio.run(_proceed(namespace or args.namespace, name, args.kubeconfig))


def approval_time(now: datetime, tripped_at: datetime | None) -> str:
    """The value to write: now, but never before the trip (a clock behind the cluster's)."""
    return format_time(max(now, tripped_at) if tripped_at is not None else now)


async def _proceed(namespace: str, name: str, kubeconfig: str | None) -> int:
    from phased.kube.client import KubeClient
    from phased.kube.jobs import JobVerbs

    try:
        kube = await KubeClient.connect(kubeconfig)
    except Exception as exc:
        print(f"phased: cannot connect: {exc}", file=sys.stderr)
        return 2
    try:
        return await release(JobVerbs(kube), namespace, name)
    finally:
        await kube.close()


async def release(
    verbs: JobVerbs,
    namespace: str,
    name: str,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    pause: float = 0.2,
) -> int:
    """Read the job, and if its breaker holds anything, approve with a guarded write; on a
    conflict read and decide again (the breaker may have been released meanwhile)."""
    from phased.kube.client import KubeError

    for attempt in range(1, ATTEMPTS + 1):
        try:
            job = await verbs.get(namespace, name)
        except KubeError as exc:
            print(f"phased: {exc}", file=sys.stderr)
            return 2
        if job is None:
            print(f"phased: TrainingJob {namespace}/{name} not found", file=sys.stderr)
            return 2
        status = parse_status(job.get("status"))
        cond = find(status.conditions, ConditionType.MASS_FAILURE)
        if cond is None or cond.status != "True":
            print(f"{namespace}/{name}: the breaker is not tripped; nothing to release")
            return 1
        value = approval_time(clock(), parse_time(cond.last_transition_time))
        try:
            done = await verbs.annotate(job, labels.ANNOTATION_PROCEED, value)
        except KubeError as exc:
            print(f"phased: {exc}", file=sys.stderr)
            return 2
        if done:
            for held in status.breaker.held:
                print(f"  {held.node} ({held.role}): {held.reason} since {held.since}")
            print(
                f"{namespace}/{name}: {labels.ANNOTATION_PROCEED}={value}; the operator "
                f"answers the {len(status.breaker.held)} held failure(s) on its next pass"
            )
            return 0
        if attempt < ATTEMPTS:
            await asyncio.sleep(pause * attempt)
    print(
        f"{namespace}/{name} changed under each of {ATTEMPTS} attempts to approve; "
        "run the command again",
        file=sys.stderr,
    )
    return 1
