"""``spares.whileIdle`` edited in a spec the operator holds invalid: nothing moves, but the
generation is observed (``status.observedGeneration``, with the ``InvalidSpec`` condition).
When the spec becomes valid by something else than a new generation — here the operator's
settings stop refusing its image — the spares take the new taint and ``SpareTaintsChanged``
says so: the event is judged from the policy the spares were last rewritten for
(``status.pool.sparesWhileIdle``), not from the generation. Before, the observed generation
already matched, and the spares were re-tainted unsaid."""

from __future__ import annotations

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.model import SetNodeRole
from phased.core.settings import Settings, WorkerPolicy
from tests.core.builders import SETTINGS, events
from tests.core.test_an_edit_of_a_running_job_is_held_or_honoured import _training
from tests.core.test_an_edit_of_the_spares_idle_policy_is_said_once_though_the_view_lags import (
    _said,
    _set_policy,
)


def test_an_invalid_edit_made_valid_by_the_settings_is_said_when_it_reaches_the_spares() -> None:
    cluster = _training(spares=2)
    spares = cluster.held(NodeRole.SPARE)
    cluster.settings = Settings(workers=WorkerPolicy(allowed_image_prefixes=["corp.example/"]))
    _set_policy(cluster, "Preemptible")
    cluster.advance(30)
    held = cluster.step()
    assert events(held) == ["InvalidSpec"]
    assert not [a for a in held.actions if isinstance(a, SetNodeRole)]
    assert cluster.status.state == JobState.INVALID
    assert cluster.status.observed_generation == cluster.job.generation

    cluster.settings = SETTINGS  # the operator restarted with a policy that allows the image
    cluster.advance(30)
    plans = cluster.settle()
    moved = sorted(a.node for p in plans for a in p.actions if isinstance(a, SetNodeRole))
    assert moved == spares
    assert _said(plans) == 1
    assert {t.key for n in spares for t in cluster.nodes[n].taints} == {labels.TAINT_SPARE}
    assert cluster.status.pool.spares_while_idle == "Preemptible"
