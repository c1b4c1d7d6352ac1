"""The ``phased`` command: ``run`` starts the operator, ``plan`` sizes a run offline."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="phased", description="Phased: phase-aware node pools for long GPU training runs."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from phased.cli import plan as plan_cmd
    from phased.cli import proceed as proceed_cmd
    from phased.cli import release as release_cmd
    from phased.cli import run as run_cmd

    run_cmd.register(sub)
    plan_cmd.register(sub)
    release_cmd.register(sub)
    proceed_cmd.register(sub)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
