"""The RBAC tables in docs/security.md and docs/install.md say what the chart grants: one row
per rule and resource, with exactly its verbs (leader election on, so the Lease Role counts)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helm.chart import ROOT, find, needs_helm, render

pytestmark = needs_helm

Row = tuple[str, str, tuple[str, ...]]  # (apiGroup or "?", resource, sorted verbs)


def _chart_rows(with_group: bool) -> list[Row]:
    docs = render("leaderElection.enabled=true")
    rows = []
    for role in find(docs, "ClusterRole") + find(docs, "Role"):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    rows.append(
                        (group if with_group else "?", resource, tuple(sorted(rule["verbs"])))
                    )
    return sorted(rows)


def _table(path: Path, header: str) -> list[list[str]]:
    """The cells of the Markdown table whose header row starts with ``header``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    cells = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells.append([c.strip() for c in line.strip().strip("|").split("|")])
    return cells


def _verbs(cell: str) -> tuple[str, ...]:
    return tuple(sorted(v.strip(" *") for v in cell.split(",")))


def _resource(cell: str) -> str:
    match = re.match(r"`?([a-z/]+)`?", cell)
    assert match, cell
    return match.group(1)


def test_the_security_page_lists_exactly_the_charts_grants() -> None:
    table = _table(ROOT / "docs" / "security.md", "| resource | verbs | why |")
    documented = sorted(("?", _resource(r[0]), _verbs(r[1])) for r in table)
    assert documented == _chart_rows(with_group=False)


def test_the_install_page_lists_exactly_the_charts_grants() -> None:
    table = _table(ROOT / "docs" / "install.md", "| API group | resource | verbs | why |")
    documented = sorted((r[0].strip('"'), _resource(r[1]), _verbs(r[2])) for r in table)
    assert documented == _chart_rows(with_group=True)
