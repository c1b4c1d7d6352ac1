"""The JAX example keeps its newest checkpoints, and never loses the one it will resume from to
checkpoints a job of the same name left on the volume before it."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from unittest import mock

import pytest

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "jax-data-parallel" / "train.py"


@pytest.fixture(scope="module")
def train() -> ModuleType:
    """train.py with jax and numpy stood in for (the image has them; pruning uses neither)."""
    names = ("jax", "jax.numpy", "jax.sharding", "numpy")
    stand_in = {name: mock.MagicMock() for name in names}
    with mock.patch.dict(sys.modules, stand_in):
        spec = importlib.util.spec_from_file_location("jax_example_train", TRAIN)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def _files(directory: Path, *names: tuple[int, int]) -> None:
    for step, generation in names:
        (directory / f"step-{step:08d}-gen-{generation}.npz").write_bytes(b"x")


def _left(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("step-*.npz"))


def test_a_job_of_the_same_name_before_leaves_files_that_push_nothing_out(train, tmp_path):
    _files(tmp_path, (145, 0), (150, 0), (155, 0))  # the job of the same name before this one
    _files(tmp_path, (95, 0), (100, 0), (105, 0), (110, 0))  # this run's
    train.prune(tmp_path, 3, (0, 110))
    assert _left(tmp_path) == [
        "step-00000100-gen-0.npz",
        "step-00000105-gen-0.npz",
        "step-00000110-gen-0.npz",
        "step-00000145-gen-0.npz",
        "step-00000150-gen-0.npz",
        "step-00000155-gen-0.npz",
    ]


def test_a_later_generation_outranks_an_earlier_one_that_went_further(train, tmp_path):
    _files(tmp_path, (150, 0), (100, 1), (105, 1), (110, 1), (115, 1))
    train.prune(tmp_path, 3, (1, 115))
    assert _left(tmp_path) == [
        "step-00000105-gen-1.npz",
        "step-00000110-gen-1.npz",
        "step-00000115-gen-1.npz",
    ]
