"""``phased plan`` on hostile files: exit 2 with a ``phased plan:`` message, never a traceback.

Generated YAML (broken specs, arbitrary documents, text mangled by inserting and deleting
characters) goes through the real ``phased`` entry point; a valid extreme spec is planned
(exit 0). Inputs that make PyYAML itself raise something other than ``YAMLError`` are pinned
below as known bugs.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phased.cli import main
from tests.hostile.strategies import hostile_spec_dicts, json_values, odd_text, valid_spec_dicts

BOUNDED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANIFEST = {"apiVersion": "phased.dev/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "x"}}
VALID_TEXT = yaml.safe_dump(
    {
        **MANIFEST,
        "spec": {
            "phases": [
                {
                    "name": "train",
                    "nodes": {"min": 2, "max": 4},
                    "gpuTypes": ["H100"],
                    "gpusPerNode": 8,
                    "maxDuration": "10d",
                }
            ],
            "template": {"image": "r.example/llm:1"},
        },
    }
)


@contextlib.contextmanager
def _a_file() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp) / "job.yaml"


def plan_bytes(data: bytes, *extra: str) -> tuple[int, str, str]:
    """Run ``phased plan`` on a file holding ``data``: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with _a_file() as path:
        path.write_bytes(data)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["plan", str(path), *extra])
            except SystemExit as exc:  # argparse's own errors
                code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def assert_refused(data: bytes) -> None:
    code, out, err = plan_bytes(data)
    assert code == 2, (code, out[:300], err[:300])
    assert err.startswith("phased plan: ") and "Traceback" not in err
    assert out == ""


def _dump(doc: Any) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True).encode()


@BOUNDED
@given(hostile_spec_dicts(text=odd_text))
def test_a_broken_spec_exits_2_or_plans(spec: Any) -> None:
    code, out, err = plan_bytes(_dump({**MANIFEST, "spec": spec}))
    assert code in (0, 2), (code, err[:300])
    assert "Traceback" not in err
    if code == 2:
        assert err.startswith("phased plan: ") and out == ""
    else:
        assert out.startswith("TrainingJob x:")


@BOUNDED
@given(st.lists(json_values(odd_text), max_size=3))
def test_any_yaml_documents_exit_2(docs: list[Any]) -> None:
    data = yaml.safe_dump_all(docs, allow_unicode=True).encode()
    code, _out, err = plan_bytes(data)
    if code == 0:  # only a real TrainingJob plans; arbitrary documents never are one
        pytest.fail(f"planned {docs!r}")
    assert code == 2 and err.startswith("phased plan: ") and "Traceback" not in err


# Mangling inserts text without digits or '!': those reach the PyYAML cases tested below.
_INSERTS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="0123456789!\x00"), max_size=6
)


@BOUNDED
@given(
    st.lists(st.tuples(st.integers(0, len(VALID_TEXT)), st.integers(0, 4), _INSERTS), max_size=4)
)
def test_mangled_yaml_text_exits_0_or_2(edits: list[tuple[int, int, str]]) -> None:
    text = VALID_TEXT
    for at, cut, insert in edits:
        at = min(at, len(text))
        text = text[:at] + insert + text[at + cut :]
    code, _out, err = plan_bytes(text.encode())
    assert code in (0, 2), (code, err[:300])
    assert "Traceback" not in err
    if code == 2:
        assert err.startswith("phased plan: ")


@BOUNDED
@given(valid_spec_dicts(), st.sampled_from(["table", "json"]))
def test_an_extreme_valid_spec_is_planned(spec: dict[str, Any], output: str) -> None:
    code, out, err = plan_bytes(_dump({**MANIFEST, "spec": spec}), "-o", output)
    assert code == 0, err[:500]
    assert out.strip() and err == ""


# --- PyYAML raises more than YAMLError --------------------------------------------------------
# Each input below raises something other than YAMLError out of yaml.safe_load_all or out of
# decoding the file; phased/cli/plan.py read_job reports every one as a clean exit 2.

PYYAML_BUGS = {
    "a date that is not in the calendar (ValueError)": b"a: 2001-13-01\n",
    "a day past the month's end (ValueError)": b"a: 2001-02-30\n",
    "an explicit !!timestamp tag on text (AttributeError)": b"a: !!timestamp x\n",
    "an explicit !!int tag on text (ValueError)": b"a: !!int x\n",
    "an explicit !!float tag on text (ValueError)": b"a: !!float x\n",
    "a hex integer with no digits (ValueError)": b"a: 0x_\n",
    "an integer of more than 4300 digits (ValueError)": b"a: " + b"9" * 4301 + b"\n",
    "lists nested 2000 deep (RecursionError)": b"[" * 2000 + b"]" * 2000,
    "bytes that are not UTF-8 (UnicodeDecodeError)": b"\xff\xfe\x00",
    "a mapping nested 2000 deep (RecursionError)": b"{a: " * 2000 + b"}" * 2000,
    "an explicit !!binary tag on text that is not base64": b"a: !!binary x\n",
    "an explicit !!bool tag on text (KeyError)": b"a: !!bool x\n",
}


@pytest.mark.parametrize("data", list(PYYAML_BUGS.values()), ids=list(PYYAML_BUGS))
def test_input_that_makes_pyyaml_raise_more_than_yamlerror_exits_2(data: bytes) -> None:
    limit = sys.getrecursionlimit()
    try:
        assert_refused(data)
    except (ValueError, AttributeError, RecursionError) as exc:
        pytest.fail(f"phased plan raised {type(exc).__name__}: {exc}")
    finally:
        sys.setrecursionlimit(limit)
