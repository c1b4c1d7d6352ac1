"""kopf builds a diff "essence" of every event's object (a deep copy of the whole body) for
its change handlers; Phased has only event handlers, so its diff base builds none. That is
only right while the registry has no change or daemon handler: held here."""

from __future__ import annotations

from typing import Any

import kopf

from phased.core.settings import Settings
from phased.handlers import NoEssence, build_registry
from tests.handlers.startup import started


def _registry() -> kopf.OperatorRegistry:
    return build_registry(lambda: None, lambda: None)  # type: ignore[arg-type,return-value]


def test_the_registry_has_event_handlers_only() -> None:
    registry = _registry()
    assert list(registry._watching.get_all_handlers())  # type: ignore[attr-defined]
    assert list(registry._changing.get_all_handlers()) == []  # type: ignore[attr-defined]
    assert list(registry._spawning.get_all_handlers()) == []  # type: ignore[attr-defined]


def test_start_up_installs_the_diff_base_that_builds_no_essence() -> None:
    storage = started(Settings()).persistence.diffbase_storage
    assert isinstance(storage, NoEssence)
    body: dict[str, Any] = {
        "apiVersion": "phased.dev/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": "llm", "namespace": "default", "labels": {"team": "a"}},
        "spec": {"phases": [{"name": "train"}]},
        "status": {"ledger": [{"node": f"gpu-{i}"} for i in range(1000)]},
    }
    assert storage.build(body=kopf.Body(body)) == {}
    # What kopf's own diff base would have copied, and the diff base still reads.
    assert kopf.AnnotationsDiffBaseStorage().build(body=kopf.Body(body))["spec"]
    assert storage.fetch(body=kopf.Body(body)) is None
