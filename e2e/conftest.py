"""pytest setup for the end-to-end suite: a guard so it never touches a real cluster, and
fixtures for the test cluster.

The suite runs only when PHASED_E2E=1 *and* the kubeconfig (PHASED_KUBECONFIG, else
KUBECONFIG, else the path in e2e/cluster/versions.sh) points at a cluster holding the
ConfigMap kube-system/phased-test-cluster, which e2e/cluster/up.sh and e2e/kind/up.sh create.
Otherwise pytest stops before running anything, saying why.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_E2E = Path(__file__).resolve().parent
for p in (str(_E2E.parent), str(_E2E)):  # `from e2e.lib import ...`, `from cluster import nodes`
    if p not in sys.path:
        sys.path.insert(0, p)

from e2e import lib  # noqa: E402
from e2e.operator_fixtures import crd, operator  # noqa: E402, F401 - fixtures for every module
from e2e.real_nodes import real, real_operator  # noqa: E402, F401 - for the real-node modules

_checked: dict[str, Any] = {}


def _refuse(why: str) -> None:
    pytest.exit(
        "refusing to run the end-to-end tests: "
        + why
        + "\n  Start the local test cluster with `make cluster`, then run"
        + "\n  PHASED_E2E=1 pytest e2e/   (it uses "
        + lib.kubeconfig_path()
        + ")",
        returncode=4,
    )


def _guard() -> str:
    """Check once per session; return the kubeconfig path."""
    if "kubeconfig" in _checked:
        return str(_checked["kubeconfig"])
    import os

    if os.environ.get("PHASED_E2E") != "1":
        _refuse("PHASED_E2E=1 is not set (the e2e suite is opt-in).")
    kubeconfig = lib.kubeconfig_path()
    if not Path(kubeconfig).is_file():
        _refuse(f"no kubeconfig at {kubeconfig}.")
    try:
        marker = lib.check_test_cluster(lib.core_v1(kubeconfig))
    except lib.NotATestCluster as exc:
        _refuse(f"{kubeconfig} is not a test cluster: {exc}.")
    _checked["kubeconfig"] = kubeconfig
    _checked["marker"] = marker
    return kubeconfig


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [i for i in items if _E2E in Path(str(i.path)).resolve().parents]
    if not ours:
        return
    _guard()
    for item in ours:
        item.add_marker(pytest.mark.e2e)


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    """Path of the test cluster's kubeconfig (already checked to hold the marker)."""
    return _guard()


@pytest.fixture(scope="session")
def test_cluster(kubeconfig: str) -> dict[str, str]:
    """The data of the marker ConfigMap (``cluster``, ``createdBy``, ...)."""
    return dict(_checked.get("marker", {}))


@pytest.fixture(scope="session")
def simulated(test_cluster: dict[str, str]) -> bool:
    """Skip the test unless the cluster simulates nodes and pods with kwok (the local
    cluster); on kind the sim.phased.dev annotations do nothing."""
    if test_cluster.get("runtime", "kwok") != "kwok":
        pytest.skip("needs the kwok-simulated local cluster (sim.phased.dev annotations)")
    return True


@pytest.fixture(scope="session")
def api_client(kubeconfig: str) -> Any:
    """A kubernetes ``ApiClient`` for the test cluster."""
    return lib.api_client(kubeconfig)


@pytest.fixture(scope="session")
def core(api_client: Any) -> Any:
    """``kubernetes.client.CoreV1Api`` on the test cluster."""
    from kubernetes import client

    return client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def kubectl(kubeconfig: str) -> lib.Kubectl:
    """``kubectl(*args, input=None) -> stdout`` with the cached kubectl and the test kubeconfig;
    ``kubectl.run(*args, check=False)`` gives the CompletedProcess."""
    return lib.Kubectl(kubeconfig)


@pytest.fixture
def namespace(core: Any) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (pods in it are removed by kwok)."""
    name = lib.create_namespace(core)
    lib.wait_until(
        lambda: _has_default_sa(core, name), 30, message=f"default service account in {name}"
    )
    yield name
    lib.delete_namespace(core, name)


def _has_default_sa(core: Any, ns: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespaced_service_account("default", ns)
        return True
    except ApiException:
        return False


@pytest.fixture
def sim_node(core: Any) -> Iterator[Callable[[str], str]]:
    """``sim_node(name) -> name``: register a node this test will disturb (NotReady, GPU fault,
    lower allocatable); every registered node is reset when the test ends."""
    touched: list[str] = []

    def use(name: str) -> str:
        touched.append(name)
        return name

    yield use
    for name in touched:
        lib.reset_node(core, name)


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """``wait_until(predicate, timeout=60, interval=0.5, message=...)`` from e2e/lib.py."""
    return lib.wait_until
