"""What only the operator can judge about a spec (the CRD and the models check the rest).

* every GPU type a phase accepts must be defined in the operator's settings;
* every container image (worker, sidecars, init containers) must start with one of
  ``settings.workers.allowed_image_prefixes`` (when set);
* no container may ask for a GPU resource of the settings (``nvidia.com/gpu``...): Phased
  gives the worker container the phase's ``gpusPerNode`` of its type;
* privileged containers and hostPath volumes only when ``settings.workers.allowPrivileged``
  / ``allowHostPath`` say so. Everything else a pod may do is for Pod Security Admission on
  the job's namespace to decide;
* ``checkpoint.report`` needs the operator's report endpoint (``reports.url`` and
  ``reports.keyFile`` in its settings).

The fields Phased owns (placement, restartPolicy, names, phased.dev/ labels, the rank
environment) are refused by the CRD and the models: see ``phased.api.podtemplate``.
"""

from __future__ import annotations

from phased.api.v1alpha1 import TrainingJobSpec, WorkerPod
from phased.core.settings import Settings


def spec_problems(spec: TrainingJobSpec, settings: Settings) -> list[str]:
    """Human-readable problems; empty when the operator can run the spec."""
    problems: list[str] = []
    for phase in spec.phases:
        for gpu in phase.gpu_types:
            if gpu not in settings.gpu_types:
                problems.append(
                    f"phase {phase.name!r} accepts GPU type {gpu.value}, which this operator's "
                    f"settings do not define (defined: "
                    f"{', '.join(sorted(t.value for t in settings.gpu_types)) or 'none'})"
                )
        problems += [
            f"phase {phase.name!r} {p}" for p in pod_problems(spec.worker_pod(phase), settings)
        ]
    if spec.checkpoint.report and not (settings.reports.url and settings.reports.key_file):
        problems.append(
            "checkpoint.report is true but this operator has no report endpoint (its settings "
            "need reports.url and reports.keyFile): ask the cluster admin, or set report false"
        )
    return problems


def pod_problems(pod: WorkerPod, settings: Settings) -> list[str]:
    """What the operator's worker policy refuses in one phase's merged worker pod."""
    policy = settings.workers
    problems: list[str] = []
    gpus = settings.gpu_resources()
    for container in pod.all_containers():
        name = container.get("name", "")
        image = container.get("image", "")
        prefixes = policy.allowed_image_prefixes
        if prefixes and not any(image.startswith(p) for p in prefixes):
            problems.append(
                f"uses image {image!r} (container {name}), which does not start with an "
                f"allowed prefix ({', '.join(prefixes)})"
            )
        resources = container.get("resources") or {}
        asked = sorted(gpus & {*resources.get("requests", {}), *resources.get("limits", {})})
        if asked:
            problems.append(
                f"asks for {', '.join(asked)} in container {name}: Phased gives the worker "
                "container the phase's gpusPerNode; remove it"
            )
        privileged = (container.get("securityContext") or {}).get("privileged")
        if privileged and not policy.allow_privileged:
            problems.append(
                f"runs container {name} privileged, which this operator's settings do not "
                "allow (workers.allowPrivileged)"
            )
    host_paths = sorted(v.get("name", "") for v in pod.spec.get("volumes", []) if "hostPath" in v)
    if host_paths and not policy.allow_host_path:
        problems.append(
            f"mounts hostPath volumes ({', '.join(host_paths)}), which this operator's settings "
            "do not allow (workers.allowHostPath)"
        )
    return problems
