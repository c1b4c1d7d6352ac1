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

# train.py's main() with jax and numpy stood in for, and train() replaced by a long wait: the
# handler main() installs is what is under test.
PROGRAM = f"""
import importlib.util, sys, time
from unittest import mock
for name in ("jax", "jax.numpy", "jax.sharding", "numpy"):
    sys.modules[name] = mock.MagicMock()
spec = importlib.util.spec_from_file_location("train", {str(TRAIN)!r})
train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train)
def waiting():
    print("ready", flush=True)
    time.sleep(600)
    return 0
train.train = waiting
raise SystemExit(train.main())
"""


def test_sigterm_ends_the_program_through_its_own_handler_with_143() -> None:
    env = {**os.environ, "PYTHONPATH": str(TRAIN.parents[2] / "operator")}
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, proc.returncode  # not -15: killed by it
    assert '"event": "stopped"' in out
