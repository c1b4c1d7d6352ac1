"""``bench/recovery.py`` writes its section from what each system measured, and a run of
some systems (``--systems kueue``) keeps the rows of the others from the section as written
before, with the run that measured them."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import recovery  # noqa: E402


def _trial(system: str, kind: str, seconds: float | None, error: str | None = None) -> Any:
    t = recovery.Trial(system, kind, f"{kind}-x")
    if error is None:
        t.t_fail = 1000.0
        t.t_running = None if seconds is None else 1000.0 + seconds
    t.error = error
    return t


def _measured(system: str, values: dict[str, list[float | None]], run: str) -> Any:
    trials = [_trial(system, k, v) for k, vs in values.items() for v in vs]
    return recovery.Measured.of(system, trials, 120.0 if system == "phased" else 480.0, run)


def test_what_a_system_measured_reads_back_from_its_data_line() -> None:
    trials = [
        _trial("kueue", "not-ready", 21.234),
        _trial("kueue", "not-ready", None),
        _trial("kueue", "not-ready", None, error="the Job's pods did not all run"),
        _trial("kueue", "gpu-fault", None),
    ]
    m = recovery.Measured.of("kueue", trials, 480.0, "560 nodes, 9.0 min")
    assert m.seconds == {"not-ready": [21.23, None], "gpu-fault": [None]}
    assert m.not_run == {"not-ready": 1, "gpu-fault": 0}
    section = f"## 3. Recovery\n\n| table |\n\n{m.data_line()}\n"
    assert recovery.measured_in(section) == {"kueue": m}


def test_a_line_that_does_not_parse_or_names_no_known_system_is_skipped() -> None:
    good = _measured("tuned", {"rack": [30.0]}, "r")
    section = (
        f"<!-- {recovery.DATA_MARK} {{not json}} -->\n"
        f'<!-- {recovery.DATA_MARK} {{"system": "slurm"}} -->\n'
        f"{good.data_line()}\n"
    )
    assert recovery.measured_in(section) == {"tuned": good}


def test_the_systems_this_run_runs_replace_their_earlier_rows_and_the_others_are_kept() -> None:
    earlier = {
        "phased": _measured("phased", {"rack": [5.0]}, "old phased"),
        "tuned": _measured("tuned", {"rack": [40.0]}, "old tuned"),
        "kueue": _measured("kueue", {"rack": [99.0]}, "old kueue"),
        "shipped": _measured("shipped", {"rack": [300.0]}, "old shipped"),
    }
    now = {"kueue": _measured("kueue", {"rack": [33.0]}, "new kueue")}
    # shipped runs in this run too but has not finished: its old rows must not pass for new.
    out = recovery.merged(now, earlier, ["shipped", "kueue"])
    assert sorted(out) == ["kueue", "phased", "tuned"]
    assert out["kueue"].run == "new kueue"
    assert out["phased"] is earlier["phased"]


def test_rows_say_never_when_no_trial_recovered_and_ratios_read_the_phased_median() -> None:
    m = _measured("kueue", {"gpu-fault": [None, None], "not-ready": [20.0, 24.0, None]}, "r")
    never = recovery.row_for(m, "gpu-fault")
    assert never[3] == "never within 480 s"
    row = recovery.row_for(m, "not-ready")
    assert row[:4] == ["not-ready", recovery.SYSTEMS["kueue"], "3", "24.0"]
    assert row[6] == "> 480" and row[7] == "1 not within 480 s"
    assert recovery.median_of(m, "not-ready") == 24.0
    assert recovery.ratio_to(12.0, 24.0) == "2.0x"
    assert recovery.ratio_to(12.0, float("inf")) == "never vs Phased"
    assert recovery.ratio_to(float("nan"), 24.0) == ""


def _args(grace: int) -> SimpleNamespace:
    """The command line of a run of 3 trials a cell at ``grace``."""
    return SimpleNamespace(
        no_write=False,
        trials=3,
        never_after=480.0,
        phased_never_after=120.0,
        vanilla_jobs=56,
        grace=grace,
    )


def test_a_kueue_only_run_writes_a_section_with_the_earlier_phased_and_tuned_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    phased = _measured("phased", {"not-ready": [10.0, 12.0, 11.0]}, "520 nodes, 30 min")
    phased.date, phased.command = "2026-12-01 10:00 UTC", "python bench/recovery.py"
    tuned = _measured("tuned", {"not-ready": [33.0, 35.0, 34.0]}, "560 nodes, 20 min")
    earlier = f"\n## 3. Recovery\n\nold table\n\n{phased.data_line()}\n{tuned.data_line()}\n"
    written: dict[str, str] = {}
    monkeypatch.setattr(recovery, "read_section", lambda key: earlier)
    monkeypatch.setattr(
        recovery, "write_section", lambda key, title, body, details=None: written.update(b=body)
    )
    args = _args(recovery.GRACE_S)
    results = {"kueue": [_trial("kueue", "not-ready", v) for v in (22.0, 24.0, 23.0)]}
    recovery.write_report(
        args, ["kueue"], ["not-ready"], results, {"kueue": "560 nodes, 8 min"}, 0.0, "load"
    )
    body = written["b"]
    labels = set(recovery.SYSTEMS.values())
    lines = [
        ln
        for ln in body.splitlines()
        if ln.startswith("| not-ready") and ln.split("|")[2].strip() in labels
    ]
    assert [ln.split("|")[2].strip() for ln in lines] == [
        recovery.SYSTEMS["phased"],
        recovery.SYSTEMS["tuned"],
        recovery.SYSTEMS["kueue"],
    ]
    kueue_row = [c.strip() for c in lines[2].split("|")]
    assert kueue_row[4] == "23.0"  # p50 of 22, 23, 24
    assert kueue_row[9] == "2.1x"  # 23 / Phased's 11
    assert "kept from an earlier run (2026-12-01 10:00 UTC, `python bench/recovery.py`)" in body
    # The data lines of all three are written again, so the next run keeps them too.
    assert set(recovery.measured_in(body)) == {"phased", "tuned", "kueue"}
    assert "Not run: " + recovery.SYSTEMS["shipped"] in body


def test_a_run_at_another_grace_keeps_to_its_own_section_and_says_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    phased = _measured("phased", {"not-ready": [10.0, 12.0, 11.0]}, "520 nodes, 30 min")
    sections = {"recovery": f"\nold table\n\n{phased.data_line()}\n"}
    written: dict[str, tuple[str, str]] = {}
    monkeypatch.setattr(recovery, "read_section", lambda key: sections.get(key))
    monkeypatch.setattr(
        recovery,
        "write_section",
        lambda key, title, body, details=None: written.update({key: (title, body)}),
    )
    args = _args(2)
    results = {"kueue": [_trial("kueue", "not-ready", v) for v in (12.0, 14.0, 13.0)]}
    recovery.write_report(
        args, ["kueue"], ["not-ready"], results, {"kueue": "560 nodes, 8 min"}, 0.0, "load"
    )
    assert list(written) == ["recovery-grace-2s"]  # the 10 s section is left as it was
    title, body = written["recovery-grace-2s"]
    assert "2 s grace" in title
    # The Phased rows of the 10 s run are not kept beside figures measured at 2 s.
    assert set(recovery.measured_in(body)) == {"kueue"}
    assert "tolerationSeconds 2 s" in body


def test_what_a_system_did_is_counted_per_kind_and_kept_with_its_figures() -> None:
    trials = [_trial("kueue", "rack", 40.0), _trial("kueue", "rack", 50.0)]
    trials.append(_trial("kueue", "not-ready", 20.0))
    trials[0].outcome = trials[1].outcome = "evicted: NodeFailures"
    trials[2].outcome = "no eviction"
    m = recovery.Measured.of("kueue", trials, 480.0, "r")
    assert m.outcomes == {"rack": {"evicted: NodeFailures": 2}, "not-ready": {"no eviction": 1}}
    assert recovery.measured_in(m.data_line())["kueue"].outcomes == m.outcomes
    shown = recovery.outcome_table(m)
    assert "| not-ready | no eviction" in shown
    assert "| rack      | evicted: NodeFailures | 2" in shown
