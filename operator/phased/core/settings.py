"""Operator settings: how GPU types map to nodes, what a GPU-hour costs, operator defaults.

One documented place: a YAML file (``PHASED_SETTINGS_FILE``, mounted from the Helm chart's
ConfigMap) read at start-up, with a few environment overrides (``PHASED_*``). Validated with
a clear message before the operator starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from phased.api.durations import DURATION_PATTERN
from phased.api.v1alpha1 import GPUType
from phased.core.selector import parse_selector

LABEL_VALUE_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"


class SettingsError(ValueError):
    """Settings that cannot be used; the message says which key and why."""


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class GPUTypeSettings(_Model):
    """How to recognise nodes of one GPU type, and what one of its GPU-hours costs."""

    node_labels: dict[str, str] = Field(min_length=1)
    resource: str = Field(min_length=1)
    price_per_gpu_hour: float = Field(ge=0)


class CPUSettings(_Model):
    """Nodes for CPU-only phases: labels they must carry (none: any node that is not a GPU node).

    A GPU node — one with capacity of a configured GPU resource, or carrying every label of a
    configured GPU type — is not a CPU node unless ``allow_gpu_nodes`` is set; a GPU node a
    CPU phase holds is then billed as the GPU node it is.
    """

    node_labels: dict[str, str] = Field(default_factory=dict)
    price_per_node_hour: float = Field(default=0.0, ge=0)
    allow_gpu_nodes: bool = False


class WorkerPolicy(_Model):
    """What worker templates may ask for; anything else makes the job InvalidSpec."""

    allow_privileged: bool = False
    allow_host_path: bool = False
    allowed_image_prefixes: list[str] = Field(default_factory=list)  # empty: any image
    service_account: str = ""  # empty: the namespace's default, with no token mounted


def _default_gpu_types() -> dict[GPUType, GPUTypeSettings]:
    return {
        GPUType.H100: GPUTypeSettings(
            node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            resource="nvidia.com/gpu",
            price_per_gpu_hour=2.50,
        ),
        GPUType.H200: GPUTypeSettings(
            node_labels={"nvidia.com/gpu.product": "NVIDIA-H200"},
            resource="nvidia.com/gpu",
            price_per_gpu_hour=3.50,
        ),
        GPUType.ASCEND_910B: GPUTypeSettings(
            node_labels={"accelerator": "huawei-Ascend910B"},
            resource="huawei.com/Ascend910",
            price_per_gpu_hour=1.80,
        ),
    }


class ReportSettings(_Model):
    """The endpoint workers report checkpoints to (``checkpoint.report: true``)."""

    port: int = Field(default=8082, ge=1, le=65535)
    # The address workers use, e.g. http://phased-reports.phased-system.svc:8082 (the chart
    # sets it); empty: jobs that ask for reports are InvalidSpec.
    url: str = Field(default="", max_length=512, pattern=r"^(https?://[^\s/]+(/[^\s]*)?)?$")
    # A file holding the key that signs every job's report token (at least 32 bytes; the
    # chart mounts it from a Secret). Empty: no endpoint, and jobs that ask for reports are
    # InvalidSpec. Every replica must read the same key.
    key_file: str = ""


class Settings(_Model):
    gpu_types: dict[GPUType, GPUTypeSettings] = Field(default_factory=_default_gpu_types)
    cpu: CPUSettings = Field(default_factory=CPUSettings)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    workers: WorkerPolicy = Field(default_factory=WorkerPolicy)
    # A periodic reconcile of every job, even when nothing changed.
    resync_interval: str = Field(default="30s", pattern=DURATION_PATTERN)
    # Nodes are relisted this often, to catch deletions missed while a watch was down.
    node_relist_interval: str = Field(default="5m", pattern=DURATION_PATTERN)
    metrics_port: int = Field(default=8080, ge=1, le=65535)
    health_port: int = Field(default=8081, ge=1, le=65535)
    # A label selector limiting which Nodes the operator watches (empty: all). A node a job
    # holds stays in sight whatever the selector (the operator also watches the nodes that
    # carry its installation label); one relabelled out of it is given back cleanly.
    node_selector: str = ""
    reports: ReportSettings = Field(default_factory=ReportSettings)
    # This installation's name, written on every node it claims (phased.dev/installation):
    # two installations sharing a cluster never take, release or adopt each other's nodes.
    installation: str = Field(default="default", max_length=63, pattern=LABEL_VALUE_PATTERN)
    # PriorityClasses whose pods may be displaced: a node whose only pods (besides
    # DaemonSet, static and finished ones) are of these classes may be claimed, and those
    # pods are evicted when the node becomes active. Empty: any other pod keeps a node out.
    preemptible_priority_classes: list[str] = Field(default_factory=list)
    # How long guests on a node that became active may hold out against eviction (their
    # PodDisruptionBudget); after that they are deleted with their own grace period.
    guest_eviction_timeout: str = Field(default="60s", pattern=DURATION_PATTERN)

    @field_validator("node_selector")
    @classmethod
    def _selector_parses(cls, value: str) -> str:
        try:
            parse_selector(value)
        except ValueError as exc:
            raise ValueError(f"not a label selector: {exc}") from exc
        return value

    def gpu_resources(self) -> set[str]:
        return {g.resource for g in self.gpu_types.values()}


def load_settings(text: str | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Build settings from YAML ``text`` (may be empty) and ``PHASED_*`` overrides in ``env``."""
    data: dict[str, Any] = {}
    if text:
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SettingsError(f"settings file is not valid YAML: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise SettingsError("settings file must hold a mapping at the top level")
        data = dict(loaded or {})
    env = env or {}
    overrides = {
        "PHASED_METRICS_PORT": "metricsPort",
        "PHASED_HEALTH_PORT": "healthPort",
        "PHASED_RESYNC_INTERVAL": "resyncInterval",
        "PHASED_NODE_SELECTOR": "nodeSelector",
        "PHASED_CURRENCY": "currency",
        "PHASED_INSTALLATION": "installation",
    }
    for var, key in overrides.items():
        if var in env:
            data[key] = env[var]
    report_overrides = {
        "PHASED_REPORT_PORT": "port",
        "PHASED_REPORT_URL": "url",
        "PHASED_REPORT_KEY_FILE": "keyFile",
    }
    for var, key in report_overrides.items():
        if var in env:
            reports = data.get("reports")
            data["reports"] = {**(reports if isinstance(reports, dict) else {}), key: env[var]}
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise SettingsError(f"invalid settings: {problems}") from exc
