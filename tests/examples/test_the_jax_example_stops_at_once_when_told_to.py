"""The JAX example ends at once on SIGTERM, the signal a gang restart stops its survivors with.

In a container the program is PID 1, which is sent only the signals it has a handler for:
without one, every restart waited out the whole survivor grace. Here the program runs as an
ordinary process (which SIGTERM would kill anyway), so the test tells the two apart by how it
ended: by its own handler, exit code 143 and a ``stopped`` line, not killed by the signal.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "jax-data-parallel" / "train.py"

# train.py loaded with jax and numpy stood in for; each program below then replaces train()
# and runs main(): the handling main() installs is what is under test.
LOAD = f"""
import atexit, importlib.util, signal, sys, time
from unittest import mock
for name in ("jax", "jax.numpy", "jax.sharding", "numpy"):
    sys.modules[name] = mock.MagicMock()
spec = importlib.util.spec_from_file_location("train", {str(TRAIN)!r})
train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train)
"""

# train() replaced by a wait, after ``{wait}``.
PROGRAM = """
def waiting():
    {wait}
    print("ready", flush=True)
    time.sleep(30)
    return 0
train.train = waiting
raise SystemExit(train.main())
"""


def _run_and_stop(wait: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(TRAIN.parents[2] / "operator")}
    program = LOAD + PROGRAM.format(wait=wait)
    proc = subprocess.Popen(
        [sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=20)  # the wait is 30 s: ended by it, not stopped
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("SIGTERM did not end the program") from None
    return proc.returncode, out


def test_sigterm_ends_the_program_through_its_own_handler_with_143() -> None:
    code, out = _run_and_stop("pass")
    assert code == 128 + signal.SIGTERM, code  # not -15: killed by the signal itself
    assert '"event": "stopped"' in out


def test_sigterm_ends_it_while_the_main_thread_cannot_run_a_handler() -> None:
    # As inside JAX waiting on a peer that is gone: the main thread runs no Python handler
    # (here it keeps SIGTERM blocked, so the kernel hands the signal to another thread).
    code, out = _run_and_stop("signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})")
    assert code == 128 + signal.SIGTERM, code
    assert '"event": "stopped"' in out


FAILING = """
atexit.register(time.sleep, 30)  # as JAX's distributed shutdown waiting for a peer that is gone
def failing():
    raise RuntimeError("Gloo all-reduce failed: Connection reset by peer")
train.train = failing
raise SystemExit(train.main())
"""


def test_a_worker_whose_collective_failed_exits_1_at_once_not_through_the_exit_handlers() -> None:
    env = {**os.environ, "PYTHONPATH": str(TRAIN.parents[2] / "operator")}
    done = subprocess.run(
        [sys.executable, "-c", LOAD + FAILING],
        capture_output=True,
        text=True,
        env=env,
        timeout=20,  # the exit handler waits 30 s: a run through it fails here
    )
    assert done.returncode == 1, done.stderr
    assert '"event": "failed"' in done.stdout and "Connection reset by peer" in done.stdout
