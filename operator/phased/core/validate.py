"""What only the operator can judge about a spec (the CRD and the models check the rest).

* every GPU type a phase accepts must be defined in the operator's settings;
* worker images must start with one of ``settings.workers.allowed_image_prefixes`` (when set);
* a template may not set an environment variable Phased sets itself (``PHASED_*``, and the
  torch-style ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``);
* ``checkpoint.report`` needs the operator's report endpoint (``reports.url`` and
  ``reports.keyFile`` in its settings).

Privileged containers and hostPath volumes cannot be asked for yet (the template has no such
fields), so ``allow_privileged`` / ``allow_host_path`` have nothing to check.
"""

from __future__ import annotations

from phased.api.v1alpha1 import TrainingJobSpec
from phased.core.settings import Settings
from phased.core.workers import reserved_env_names


def spec_problems(spec: TrainingJobSpec, settings: Settings) -> list[str]:
    """Human-readable problems; empty when the operator can run the spec."""
    problems: list[str] = []
    prefixes = settings.workers.allowed_image_prefixes
    for phase in spec.phases:
        for gpu in phase.gpu_types:
            if gpu not in settings.gpu_types:
                problems.append(
                    f"phase {phase.name!r} accepts GPU type {gpu.value}, which this operator's "
                    f"settings do not define (defined: "
                    f"{', '.join(sorted(t.value for t in settings.gpu_types)) or 'none'})"
                )
        template = spec.worker_template(phase)
        image = template.image or ""
        if prefixes and not any(image.startswith(p) for p in prefixes):
            problems.append(
                f"phase {phase.name!r} uses image {image!r}, which does not start with an "
                f"allowed prefix ({', '.join(prefixes)})"
            )
        reserved = reserved_env_names(template)
        if reserved:
            problems.append(
                f"phase {phase.name!r} sets {', '.join(reserved)} in env: Phased sets these "
                "itself; rename them"
            )
    if spec.checkpoint.report and not (settings.reports.url and settings.reports.key_file):
        problems.append(
            "checkpoint.report is true but this operator has no report endpoint (its settings "
            "need reports.url and reports.keyFile): ask the cluster admin, or set report false"
        )
    return problems
