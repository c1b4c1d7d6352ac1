"""``phased run``: start the operator.

Settings come from one YAML file (``--settings`` or ``$PHASED_SETTINGS_FILE``; the Helm chart
mounts it from a ConfigMap) with ``PHASED_*`` environment overrides; they are validated before
anything connects, and a bad value stops the start with a message naming the key.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phased.core.settings import Settings, SettingsError, load_settings

logger = logging.getLogger("phased")


def register(sub: Any) -> None:
    parser = sub.add_parser("run", help="run the operator (watches every namespace)")
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then in-cluster)"
    )
    parser.add_argument(
        "--settings", help="operator settings YAML (default: $PHASED_SETTINGS_FILE; none: built-in)"
    )
    parser.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable; default: all namespaces)",
    )
    parser.add_argument(
        "--leader-elect",
        action="store_true",
        default=os.environ.get("PHASED_LEADER_ELECT", "").lower() in ("1", "true", "yes"),
        help="run as one of several replicas: act only while holding a Lease "
        "(default: $PHASED_LEADER_ELECT)",
    )
    parser.add_argument(
        "--lease-namespace",
        default=os.environ.get("PHASED_LEASE_NAMESPACE", "default"),
        help="namespace of the leader-election Lease (default: $PHASED_LEASE_NAMESPACE or default)",
    )
    parser.add_argument(
        "--lease-name",
        default=os.environ.get("PHASED_LEASE_NAME", "phased-operator"),
        help="name of the leader-election Lease",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="log every API request (its path, answer and time, and the job it was sent "
        "for), each pass's stages, the node changes that wake jobs and the garbage "
        "collector's longer stops, with millisecond times",
    )
    parser.set_defaults(func=run)


def read_settings(path: str | None) -> Settings:
    path = path or os.environ.get("PHASED_SETTINGS_FILE")
    text = ""
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SettingsError(f"cannot read settings file {path}: {exc.strerror}") from exc
    return load_settings(text, os.environ)


MIN_REPORT_KEY = 32

# The loggers ``--trace`` turns to DEBUG: the requests, the passes and the node changes, and
# the garbage collector's longer stops (:func:`trace_collections`).
TRACED = ("phased.kube.client", "phased.reconcile", "phased.gc")
# A collection of a younger generation is said in the trace when it took at least this long.
SAID_FROM = 0.005


def trace_collections() -> Callable[[str, dict[str, Any]], None]:
    """Say in the trace (``phased.gc`` at DEBUG) each collection of the oldest generation,
    and any other that stopped the process for ``SAID_FROM`` seconds or more: its
    generation, its time and the objects it freed. A full collection stops the event loop
    for as long as it walks the objects in the collector's sight (:func:`phased.handlers.
    quiet_collector` keeps start-up's out of it); read against a swap's moments, the trace
    tells whether one fell inside it. Returns the callback it added to ``gc.callbacks``."""
    said = logging.getLogger("phased.gc")
    began = [0.0]

    def collected(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
            return
        took = time.perf_counter() - began[0]
        generation = int(info.get("generation", 0))
        if generation == 2 or took >= SAID_FROM:
            said.debug(
                "collection of generation %d took %.1f ms, %d objects freed",
                generation,
                1000 * took,
                int(info.get("collected", 0)),
            )

    gc.callbacks.append(collected)
    return collected


def read_report_key(settings: Settings) -> bytes | None:
    """The key that signs the jobs' report tokens (``reports.keyFile``); None: no endpoint."""
    path = settings.reports.key_file
    if not path:
        return None
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise SettingsError(f"cannot read reports.keyFile {path}: {exc.strerror}") from exc
    if len(key) < MIN_REPORT_KEY:
        raise SettingsError(
            f"reports.keyFile {path} holds {len(key)} bytes; the report key needs at least "
            f"{MIN_REPORT_KEY} (e.g. head -c 48 /dev/urandom | base64)"
        )
    return key


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("kopf.objects", "kopf._core.engines.peering", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.trace:
        for traced in TRACED:
            logging.getLogger(traced).setLevel(logging.DEBUG)
        trace_collections()
    try:
        settings = read_settings(args.settings)
        report_key = read_report_key(settings)
    except SettingsError as exc:
        print(f"phased: {exc}", file=sys.stderr)
        return 2
    ports = [
        ("metrics", settings.metrics_port, "PHASED_METRICS_PORT", "metricsPort"),
        ("health", settings.health_port, "PHASED_HEALTH_PORT", "healthPort"),
    ]
    if report_key is not None:
        ports.append(("report", settings.reports.port, "PHASED_REPORT_PORT", "reports.port"))
    for what, port, var, key in ports:
        problem = _port_problem(port)
        if problem:
            print(
                f"phased: the {what} port {port} is {problem}; choose another with "
                f"{var} or the settings key {key}",
                file=sys.stderr,
            )
            return 2
    if args.kubeconfig:
        if not Path(args.kubeconfig).is_file():
            print(f"phased: kubeconfig {args.kubeconfig} does not exist", file=sys.stderr)
            return 2
        os.environ["KUBECONFIG"] = args.kubeconfig
    try:
        asyncio.run(_operate(settings, args, list(args.namespace), report_key))
    except KeyboardInterrupt:
        return 0
    except Exception as exc:
        cause = exc.__cause__ or exc
        print(f"phased: stopped: {cause}", file=sys.stderr)
        return 1
    return 0


def _port_problem(port: int) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))  # noqa: S104 - the operator listens on all addresses
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "already in use"
            return f"not usable ({exc.strerror})"
    return ""


async def _operate(
    settings: Settings, args: argparse.Namespace, namespaces: list[str], report_key: bytes | None
) -> None:
    kubeconfig: str | None = args.kubeconfig
    if not args.leader_elect:
        await _serve(settings, kubeconfig, namespaces, report_key)
        return
    from phased.health import StandbyHealth
    from phased.kube.client import KubeClient
    from phased.kube.lease import LeaderLost, LeaseElector

    kube = await KubeClient.connect(kubeconfig)
    identity = f"{socket.gethostname()}-{os.getpid()}"
    elector = LeaseElector(kube, args.lease_namespace, args.lease_name, identity)
    standby = StandbyHealth(settings.health_port)
    await standby.start()
    await elector.acquire()
    await standby.stop()  # the leader's own health server takes the port
    # Every write of the operator is fenced by the Lease: none goes out past the deadline.
    serving = asyncio.create_task(
        _serve(settings, kubeconfig, namespaces, report_key, elector.may_act)
    )
    keeping = asyncio.create_task(elector.keep())
    done, _ = await asyncio.wait({serving, keeping}, return_when=asyncio.FIRST_COMPLETED)
    if keeping in done:
        try:
            keeping.result()
        except LeaderLost as exc:
            # Acting without the lease could act twice: stop at once, restart as a candidate.
            logger.error("leader election: %s; exiting", exc)
            logging.shutdown()
            os._exit(70)
    keeping.cancel()
    await elector.release()
    await kube.close()
    serving.result()


def _own_pod() -> tuple[str, str] | None:
    """The operator's own pod (namespace, name), from the downward API (the chart sets
    POD_NAMESPACE and POD_NAME): it is never displaced from a node."""
    namespace, name = os.environ.get("POD_NAMESPACE", ""), os.environ.get("POD_NAME", "")
    return (namespace, name) if namespace and name else None


async def _serve(
    settings: Settings,
    kubeconfig: str | None,
    namespaces: list[str],
    report_key: bytes | None,
    fence: Callable[[], bool] | None = None,
) -> None:
    import kopf
    from prometheus_client import CollectorRegistry, start_http_server

    from phased.endpoint import ReportEndpoint
    from phased.handlers import build_registry
    from phased.health import HealthServer
    from phased.kube.client import KubeClient
    from phased.metrics import Metrics
    from phased.reconcile import Reconciler

    state: dict[str, Any] = {}

    async def start() -> Reconciler:
        registry = CollectorRegistry()
        metrics = Metrics.create(registry)
        start_http_server(settings.metrics_port, registry=registry)
        kube = await KubeClient.connect(kubeconfig, on_error=metrics.api_error, fence=fence)
        reconciler = Reconciler(
            kube,
            settings,
            metrics,
            report_key=report_key,
            operator_pod=_own_pod(),
            namespaces=namespaces,
        )
        health = HealthServer(reconciler, settings.health_port)
        await health.start()
        state.update(kube=kube, health=health, reconciler=reconciler)
        if report_key is not None:
            endpoint = ReportEndpoint(reconciler, report_key, settings.reports.port, metrics)
            await endpoint.start()
            state["endpoint"] = endpoint
            logger.info("checkpoint reports on :%d", settings.reports.port)
        logger.info(
            "phased started: metrics on :%d/metrics, health on :%d/healthz",
            settings.metrics_port,
            settings.health_port,
        )
        return reconciler

    async def stop() -> None:
        if "reconciler" in state:
            await state["reconciler"].drain()
        if "endpoint" in state:
            await state["endpoint"].stop()
        if "health" in state:
            await state["health"].stop()
        if "kube" in state:
            await state["kube"].close()

    await kopf.operator(
        registry=build_registry(start, stop),
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
    )
