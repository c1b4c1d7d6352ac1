#!/usr/bin/env python3
"""Copy the CRDs from crds/ (the single source of truth) into the Helm chart's crds/.

    python hack/sync-chart-crds.py          # write the copies
    python hack/sync-chart-crds.py --check  # exit 1, listing the drift, if a copy is stale

Helm installs what is in a chart's crds/ before anything else and never deletes it on
uninstall, so TrainingJobs (and their ledgers) outlive a `helm uninstall`. Helm also never
upgrades those CRDs: after a CRD change, `kubectl apply -f crds/` before `helm upgrade`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "crds"
CHART_CRDS = ROOT / "helm" / "phased" / "crds"
HEADER = (
    "# GENERATED from crds/{name} by hack/sync-chart-crds.py: do not edit this copy;\n"
    "# edit crds/{name} and run `python hack/sync-chart-crds.py`.\n"
)


def expected() -> dict[str, str]:
    """Each chart copy's file name and the text it should hold."""
    return {
        src.name: HEADER.format(name=src.name) + src.read_text()
        for src in sorted(SOURCE.glob("*.yaml"))
    }


def drift() -> list[str]:
    """What differs between the chart's copies and the source, one line each."""
    want = expected()
    have = {p.name: p.read_text() for p in sorted(CHART_CRDS.glob("*.yaml"))}
    problems = [f"missing in the chart: {n}" for n in sorted(want.keys() - have.keys())]
    problems += [f"not in crds/ any more: {n}" for n in sorted(have.keys() - want.keys())]
    problems += [
        f"stale copy: {n}" for n in sorted(want.keys() & have.keys()) if want[n] != have[n]
    ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report drift")
    args = parser.parse_args(argv)
    if args.check:
        problems = drift()
        for line in problems:
            print(f"helm/phased/crds: {line}", file=sys.stderr)
        if problems:
            print("run: python hack/sync-chart-crds.py", file=sys.stderr)
        return 1 if problems else 0
    CHART_CRDS.mkdir(parents=True, exist_ok=True)
    want = expected()
    for stale in CHART_CRDS.glob("*.yaml"):
        if stale.name not in want:
            stale.unlink()
    for name, text in want.items():
        (CHART_CRDS / name).write_text(text)
    print(f"helm/phased/crds: {len(want)} CRD(s) copied from crds/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
