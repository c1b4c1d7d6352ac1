"""Fixtures and helpers shared by the end-to-end tests that run the operator.

Test modules import the fixtures they use (``from e2e.operator_fixtures import operator``);
the operator runs as a real process (see :mod:`e2e.harness`) against the test cluster, with
the CRD applied from ``crds/``.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import lib
from e2e.harness import CRD, REPO, Operator

JOB_UID = "phased.dev/job-uid"
ROLE = "phased.dev/role"
INSTALLATION = "phased.dev/installation"
LOGS = Path("/tmp/phased-e2e-logs")


@pytest.fixture(scope="session")
def crd(kubectl: lib.Kubectl) -> None:
    kubectl("apply", "-f", str(CRD))
    # `kubectl wait` fails outright while the new CRD has no status yet (a large schema takes
    # the API server a moment), so ask again until it answers.
    lib.wait_until(
        lambda: kubectl.run(
            "wait", "--for=condition=Established", "crd/trainingjobs.phased.dev", "--timeout=20s",
            check=False,
        ).returncode == 0,
        60,
        message="the TrainingJob CRD established",
    )  # fmt: skip


@pytest.fixture(scope="module")
def operator(kubeconfig: str, crd: None, request: pytest.FixtureRequest) -> Iterator[Operator]:
    """The operator, running for the whole test module; its log is shown when a test fails."""
    log = LOGS / f"{request.module.__name__.rsplit('.', 1)[-1]}.log"
    if log.exists():
        log.unlink()
    op = Operator(kubeconfig, log).start()
    yield op
    op.stop()


def load_example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "examples" / name).read_text())
    return copy.deepcopy(data)


def apply(kubectl: lib.Kubectl, namespace: str, manifest: dict[str, Any]) -> None:
    kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))


def get_job(kubectl: lib.Kubectl, namespace: str, name: str) -> dict[str, Any]:
    import json

    out: dict[str, Any] = json.loads(
        kubectl("get", "trainingjob", name, "-n", namespace, "-o", "json")
    )
    return out


def status(kubectl: lib.Kubectl, namespace: str, name: str) -> dict[str, Any]:
    return dict(get_job(kubectl, namespace, name).get("status") or {})


def events(kubectl: lib.Kubectl, namespace: str, selector: str) -> list[dict[str, Any]]:
    """The Events of ``namespace`` that the field ``selector`` picks (e.g.
    ``involvedObject.name=llm,reason=InvalidSpec``), as the API server returns them."""
    out = kubectl("get", "events", "-n", namespace, "--field-selector", selector, "-o", "json")
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def said_soon(kubectl: lib.Kubectl, namespace: str, selector: str, *reasons: str) -> list[str]:
    """The reasons of the Events ``selector`` picks, once each of ``reasons`` is among them
    (up to 10 s): the operator posts a pass's events in the background, so one may land just
    after the status it goes with."""

    def all_said() -> list[str] | None:
        said = [e.get("reason", "") for e in events(kubectl, namespace, selector)]
        return said if all(r in said for r in reasons) else None

    return lib.wait_until(all_said, 10, message=f"events {', '.join(reasons)} ({selector})")


def nodes_of(core: Any, uid: str) -> dict[str, str]:
    """Node name → role, for every node labelled for the job with ``uid``."""
    return {
        n.metadata.name: (n.metadata.labels or {}).get(ROLE, "")
        for n in core.list_node(label_selector=f"{JOB_UID}={uid}").items
    }


def live_workers(core: Any, namespace: str, uid: str) -> list[Any]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"{JOB_UID}={uid}").items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def release_quarantined(kubeconfig: str) -> None:
    """Give back every node Phased quarantined in earlier tests (as a person would)."""
    core = lib.core_v1(kubeconfig)
    quarantined = core.list_node(label_selector=f"{ROLE}=quarantined").items
    # Each installation's nodes are given back in its own name, as its operator's admin would.
    by_installation: dict[str, list[str]] = {}
    for node in quarantined:
        lib.reset_node(core, node.metadata.name)
        installation = (node.metadata.labels or {}).get(INSTALLATION) or "default"
        by_installation.setdefault(installation, []).append(node.metadata.name)
    for installation, names in sorted(by_installation.items()):
        command = [sys.executable, "-m", "phased", "release-node", "--kubeconfig", kubeconfig]
        done = subprocess.run(
            [*command, "--installation", installation, *names], capture_output=True, text=True
        )
        assert done.returncode == 0, f"phased release-node {names}: {done.stdout}{done.stderr}"


def wait_state(
    kubectl: lib.Kubectl, namespace: str, name: str, states: set[str], timeout: float, op: Operator
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = status(kubectl, namespace, name)
        if last.get("state") in states:
            return last
        time.sleep(1)
    raise AssertionError(
        f"{namespace}/{name} did not reach {states} in {timeout:.0f}s; status: {last}\n"
        f"operator log:\n{op.tail(80)}"
    )
