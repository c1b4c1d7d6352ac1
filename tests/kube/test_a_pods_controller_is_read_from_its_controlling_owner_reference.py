"""A pod's ``controller`` is the UID its controlling ownerReference names (the job's, on a
worker Phased made), "" when it has none: the core counts only the job's own pods as its
workers (:mod:`phased.core.podlabels`)."""

from phased.kube.convert import pod_from_raw


def _raw(owners: object) -> dict[str, object]:
    return {"metadata": {"name": "p", "ownerReferences": owners}, "spec": {}, "status": {}}


def test_the_controlling_owner_reference_names_the_controller():
    owners = [
        {"kind": "ConfigMap", "uid": "uid-cm"},
        {"kind": "TrainingJob", "uid": "uid-llm", "controller": True},
    ]
    assert pod_from_raw(_raw(owners)).controller == "uid-llm"


def test_a_pod_with_no_controlling_owner_has_no_controller():
    assert pod_from_raw(_raw([{"kind": "TrainingJob", "uid": "uid-llm"}])).controller == ""
    assert pod_from_raw(_raw(None)).controller == ""
    assert pod_from_raw(_raw(["junk"])).controller == ""
