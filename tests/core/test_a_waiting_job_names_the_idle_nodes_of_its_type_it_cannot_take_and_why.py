"""A job short of nodes names the nodes of its type that nobody holds and it still cannot
take, and why — cordoned, not Ready, or tainted by someone else — beside those left alone
for their marks or pods: a person who sees idle GPUs and a waiting job learns which taint
or cordon stands between them. Nodes other jobs hold are no news and are not named."""

from dataclasses import replace

from phased.api.v1alpha1 import JobState, NodeRole
from phased.core import labels
from phased.core.decide import decide
from phased.core.model import EmitEvent, JobRef, Plan, Taint
from tests.core.builders import SETTINGS, T0, nodes, owned, phase, snapshot, spec

TRAIN = spec(phase("train", 8, 8))
OTHER = JobRef(namespace="ml", name="other", uid="uid-other", created=T0)
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


def _left_alone(plan: Plan) -> str:
    found = [
        a.message for a in plan.actions if isinstance(a, EmitEvent) and a.reason == "NodesLeftAlone"
    ]
    assert len(found) == 1, found
    return found[0]


def test_idle_nodes_a_taint_a_cordon_or_readiness_keep_out_are_named_with_why():
    idle = [
        *nodes("t", 2, taints=(GPU_TAINT,)),
        *nodes("c", 1, unschedulable=True),
        *nodes("n", 1, ready=False),
        *nodes("h", 4),
    ]
    plan = decide(snapshot(TRAIN, idle), SETTINGS, T0)
    assert plan.status.state == JobState.WAITING
    message = _left_alone(plan)
    assert "4 H100 node(s) not claimed" in message
    assert "t00 (Tainted: nvidia.com/gpu:NoSchedule)" in message
    assert "c00 (Cordoned)" in message and "n00 (NotReady)" in message
    assert "h00" not in message  # free: it would be claimed with the rest


def test_nodes_held_by_other_jobs_are_not_named():
    busy = [owned(n, NodeRole.ACTIVE, OTHER) for n in nodes("b", 6)]
    plan = decide(snapshot(TRAIN, [*busy, *nodes("c", 1, unschedulable=True)]), SETTINGS, T0)
    message = _left_alone(plan)
    assert "1 H100 node(s)" in message and "b0" not in message


def test_nodes_out_of_the_operators_node_selector_are_not_named():
    """A node out of the settings' ``nodeSelector`` is not the operator's to use: named, it
    sent a person to uncordon or unmark a node no job would ever claim."""
    selected = SETTINGS.model_copy(update={"node_selector": "pool=gpu"})
    inside = [
        replace(n, labels={**n.labels, "pool": "gpu"}) for n in nodes("c", 1, unschedulable=True)
    ]
    outside = [
        *nodes("x", 1, unschedulable=True),  # cordoned, out of the selector
        *[  # marks no job holds it by (its role taken off), out of the selector
            replace(n, labels={k: v for k, v in n.labels.items() if k != labels.LABEL_ROLE})
            for n in [owned(m, NodeRole.ACTIVE, OTHER) for m in nodes("p", 1)]
        ],
    ]
    plan = decide(snapshot(TRAIN, [*inside, *outside]), selected, T0)
    message = _left_alone(plan)
    assert "1 H100 node(s)" in message and "c00 (Cordoned)" in message
    assert "x00" not in message and "p00" not in message
