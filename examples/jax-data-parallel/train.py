"""Data-parallel training with JAX on CPU across the workers of a Phased phase.

One process per node. The processes meet through JAX's distributed service (rank 0 serves
it at ``MASTER_ADDR:MASTER_PORT``, which Phased gives every worker), and every step averages
the gradients of all of them over the gloo collectives: one ``jit`` over a mesh of every
process's device, the batch split across them, the parameters replicated. Rank 0 writes a
checkpoint to the job's checkpoint volume every ``TRAIN_CHECKPOINT_EVERY`` steps and reports
it to the operator (``phased_worker``); a new generation started after a node failure resumes
from the checkpoint Phased names (``PHASED_RESUME_FROM``), so training continues at the step
it had reached and the loss goes on from where it was.

The model is a small two-layer network fitting a fixed teacher function on synthetic data:
the batch of step ``s`` on rank ``r`` is drawn from ``(TRAIN_SEED, s, r)``, so a resumed run
sees exactly the data the lost one would have, and its losses can be compared step by step.

Knobs (environment): ``TRAIN_STEPS`` (200), ``TRAIN_CHECKPOINT_EVERY`` (10), ``TRAIN_SEED``
(0), ``TRAIN_STEP_SECONDS`` (0: steps as fast as they go; more paces them, standing in for
real work), ``TRAIN_BATCH_PER_WORKER`` (64), ``TRAIN_LEARNING_RATE`` (0.3),
``TRAIN_KEEP_CHECKPOINTS`` (3). Every event is one JSON line on stdout: ``start``,
``resume``, ``step``, ``checkpoint``, ``superseded``, ``failed``, ``stopped``, ``done``.
Rank 0 also appends each step's loss, with its restart generation, to ``metrics.jsonl``
beside the checkpoints: the loss curve of the whole run, across restarts, outlives the pods.

Checkpoints and a worker left behind: after a node goes silent its container runs on until
the kubelet is back, while Phased has started a new generation elsewhere that resumes from the
checkpoint it named. So a checkpoint's name carries its generation (two generations never
write the same file), pruning keeps the newest by (generation, step) and happens only after
the operator acknowledged a report, and a report answered ``Superseded`` (this generation
was replaced) ends the process at once, before it writes or deletes anything more. A job
created again under the same name finds the last one's checkpoints in its directory: pruning
leaves alone what ranks above the checkpoint just written, so they never push out the ones
this run resumes from.

Told to stop (SIGTERM: a gang restart stops the survivors with ``survivorGracePeriod``), the
process ends at once: what it holds since the last reported checkpoint is not worth keeping
the next generation waiting, which resumes from that checkpoint anyway (a checkpoint is
written under a temporary name and renamed when whole, so nothing half-written is ever
named). Two things swallowed SIGTERM, and every restart waited out the whole grace until
SIGKILL: in a container the program is PID 1, to which the kernel delivers only SIGKILL and
the signals it has a handler for; and ``jax.distributed.initialize`` starts JAX's preemption
service, which takes SIGTERM over (below Python's handler) to note a preemption for a sync
point this program never asks for. So the program turns that service off and installs its
own handler. The handler acts from a thread of its own, woken by the signal's byte on a
pipe (``signal.set_wakeup_fd``): Python runs a handler only between bytecodes of the main
thread, and the main thread may be inside JAX waiting on a peer that is gone.

Failing, the program leaves without JAX's exit handlers: a collective whose peer died fails
(``Gloo all-reduce failed``), and the distributed shutdown that would run at exit then
waits for that peer, so the worker hung, neither Failed nor stopping, until it was killed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import phased_worker

IN, HIDDEN = 16, 32

Params = dict[str, jax.Array]


def knob(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    return float(value) if value else default


def say(event: str, **data: Any) -> None:
    print(json.dumps({"event": event, "time": time.time(), **data}), flush=True)


def teacher(x: np.ndarray) -> np.ndarray:
    """The function to learn: fixed, the same on every rank."""
    w = np.random.default_rng(12345).normal(size=(IN, 1)) / np.sqrt(IN)
    return np.sin(3.0 * (x @ w)) + 0.5 * (x @ w)


def initial_params(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, 1])
    return {
        "w1": (rng.normal(size=(IN, HIDDEN)) / np.sqrt(IN)).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": (rng.normal(size=(HIDDEN, 1)) / np.sqrt(HIDDEN)).astype(np.float32),
        "b2": np.zeros(1, np.float32),
    }


def local_batch(seed: int, step: int, rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, step, rank])
    x = rng.normal(size=(size, IN)).astype(np.float32)
    return x, teacher(x).astype(np.float32)


def loss_fn(params: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((hidden @ params["w2"] + params["b2"] - y) ** 2)


@jax.jit
def train_step(params: Params, x: jax.Array, y: jax.Array, lr: float) -> tuple[Params, jax.Array]:
    # x and y are split across the processes: the mean and its gradient are global, and
    # XLA averages the gradients over the gloo collectives.
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads), loss


def local_value(array: jax.Array) -> np.ndarray:
    """A replicated array's value, from this process's copy."""
    return np.asarray(array.addressable_data(0))


CHECKPOINT_NAME = re.compile(r"step-(\d+)-gen-(\d+)\.npz")


def save(directory: Path, step: int, generation: int, params: Params, loss: float) -> Path:
    """Write the checkpoint completely and durably, then give it its name."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"step-{step:08d}-gen-{generation}.npz"
    tmp = directory / f".{path.name}.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, step=step, loss=loss, **{k: local_value(v) for k, v in params.items()})
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def prune(directory: Path, keep: int, current: tuple[int, int]) -> None:
    """Keep the ``keep`` newest checkpoints up to ``current`` (generation, step), the one
    just written and acknowledged: a later generation's outrank an earlier one's (an earlier
    generation went on past the step the later one resumed from). Files ranked above
    ``current`` are not this run's (a job of the same name wrote them to the same volume
    before it): they are left alone, and never push out the checkpoints this run will
    resume from."""
    found = []
    for path in directory.glob("step-*.npz"):
        match = CHECKPOINT_NAME.fullmatch(path.name)
        key = (int(match[2]), int(match[1])) if match else None
        if key is not None and key <= current:
            found.append((key, path))
    for _, old in sorted(found)[:-keep]:
        old.unlink(missing_ok=True)


def stop_at_once(signum: int, frame: object = None) -> None:
    """End the process now, from wherever it is (a collective, a sleep, a write)."""
    os.write(1, b'{"event": "stopped", "signal": "SIGTERM"}\n')
    os._exit(128 + signum)


def stop_on_sigterm() -> None:
    """SIGTERM ends the process even while the main thread waits inside JAX (module
    docstring): the signal's number, written to a pipe by Python's own C handler from
    whichever thread the kernel picked, wakes a thread that ends the process."""
    wake, wakeup = os.pipe()
    os.set_blocking(wakeup, False)
    signal.set_wakeup_fd(wakeup)
    signal.signal(signal.SIGTERM, stop_at_once)

    def watch() -> None:
        while True:
            if signal.SIGTERM in os.read(wake, 64):
                stop_at_once(signal.SIGTERM)

    threading.Thread(target=watch, name="sigterm", daemon=True).start()


def main() -> int:
    stop_on_sigterm()
    try:
        return train()
    except phased_worker.Superseded as exc:
        say("superseded", reason=str(exc))
    except Exception as exc:  # a peer gone, a checkpoint unreadable: the worker has failed
        traceback.print_exc()
        say("failed", error=f"{type(exc).__name__}: {exc}")
    # Not through JAX's exit handlers: their shutdown waits for peers that may be gone.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def train() -> int:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    steps = int(knob("TRAIN_STEPS", 200))
    every = int(knob("TRAIN_CHECKPOINT_EVERY", 10))
    seed = int(knob("TRAIN_SEED", 0))
    pace = knob("TRAIN_STEP_SECONDS", 0.0)
    batch = int(knob("TRAIN_BATCH_PER_WORKER", 64))
    keep = int(knob("TRAIN_KEEP_CHECKPOINTS", 3))
    lr = knob("TRAIN_LEARNING_RATE", 0.3)
    directory = Path(os.environ.get("PHASED_CHECKPOINT_DIR", "checkpoints"))
    coordinator = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    say("start", rank=rank, world=world, coordinator=coordinator, jax=jax.__version__)

    # Left on, the preemption service would replace the SIGTERM handler main() installed.
    jax.config.update("jax_enable_preemption_service", False)
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=world,
        process_id=rank,
        initialization_timeout=300,
    )
    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated = NamedSharding(mesh, P())
    split = NamedSharding(mesh, P("data"))

    start, values = 0, initial_params(seed)
    resume = phased_worker.resume_path()
    if resume:
        with np.load(resume) as ckpt:
            start = int(ckpt["step"])
            values = {k: ckpt[k] for k in values}
            say("resume", path=resume, step=start, loss=float(ckpt["loss"]))
    params = {k: jax.make_array_from_process_local_data(replicated, v) for k, v in values.items()}

    generation = int(os.environ.get("PHASED_RESTART_GENERATION", "0"))
    metrics = None
    if rank == 0:
        directory.mkdir(parents=True, exist_ok=True)
        metrics = open(directory / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
    loss = float("nan")
    for step in range(start + 1, steps + 1):
        began = time.monotonic()
        x, y = local_batch(seed, step, rank, batch)
        params, out = train_step(
            params,
            jax.make_array_from_process_local_data(split, x),
            jax.make_array_from_process_local_data(split, y),
            lr,
        )
        loss = float(local_value(out))
        say("step", step=step, loss=loss)
        if metrics is not None:
            metrics.write(json.dumps({"step": step, "loss": loss, "generation": generation}))
            metrics.write("\n")
            metrics.flush()
        if rank == 0 and step % every == 0 and step < steps:
            path = save(directory, step, generation, params, loss)
            reported = phased_worker.report_checkpoint(step, str(path))
            say("checkpoint", step=step, path=str(path), reported=reported)
            if reported or not phased_worker.enabled():
                prune(directory, keep, (generation, step))
        time.sleep(max(0.0, pace - (time.monotonic() - began)))

    if metrics is not None:
        metrics.close()
    if rank == 0:
        path = save(directory, steps, generation, params, loss)
        reported = phased_worker.report_checkpoint(steps, str(path), final=True)
        say("checkpoint", step=steps, path=str(path), reported=reported, final=True)
    jax.distributed.shutdown()
    say("done", step=steps, loss=loss)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
