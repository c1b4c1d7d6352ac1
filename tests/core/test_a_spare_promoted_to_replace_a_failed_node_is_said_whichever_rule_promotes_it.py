"""Every promotion of a spare that replaces a failed node says so with one ``SparePromoted``
event naming both, whichever rule promotes it: the swap while a generation runs, or the pool
formed again between a gang restart and the next generation (the node promoted at the
failure failed in turn while the survivors were still stopping)."""

from dataclasses import replace
from datetime import timedelta

from phased.api.v1alpha1 import NodeRole
from phased.core.model import Action, DeletePod, EmitEvent
from tests.core.builders import Cluster, node, phase, spec, with_ready


class StoppingCluster(Cluster):
    """Survivors of a gang restart stop within their grace instead of vanishing at once."""

    def _apply(self, action: Action) -> None:
        if isinstance(action, DeletePod) and not action.force and action.name in self.pods:
            grace = timedelta(seconds=action.grace_seconds or 30)
            self.pods[action.name] = replace(self.pods[action.name], stop_by=self.now + grace)
            return
        super()._apply(action)


def _promotions(actions) -> list[str]:
    return [a.message for a in actions if isinstance(a, EmitEvent) and a.reason == "SparePromoted"]


def test_the_replacement_of_a_replacement_that_failed_before_the_restart_is_said():
    the_nodes = {f"n{i:02d}": node(f"n{i:02d}", rack=f"r{i // 4}") for i in range(14)}
    cluster = StoppingCluster(spec(phase("train", 6, 8), spares=2), the_nodes)
    cluster.settle()
    first = cluster.held(NodeRole.ACTIVE)[0]
    cluster.nodes[first] = with_ready(cluster.nodes[first], False, cluster.now)
    cluster.advance(31)
    plan = cluster.step()
    (said,) = _promotions(plan.actions)
    (entry,) = cluster.status.failures
    second = entry.replaced_by
    assert second is not None and said == f"spare {second} promoted to active, replacing {first}"
    cluster.nodes[second] = with_ready(cluster.nodes[second], False, cluster.now)
    cluster.advance(31)  # the survivors are still stopping: no generation runs
    plan = cluster.step()
    entries = {f.node: f.replaced_by for f in cluster.status.failures}
    third = entries[second]
    assert third is not None
    assert _promotions(plan.actions) == [f"spare {third} promoted to active, replacing {second}"]
