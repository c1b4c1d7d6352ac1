"""The edit table: the operator's re-check refuses what the CRD's transition rules refuse,
with its own message, and accepts what they accept; every transition rule is expected by
some case (the end-to-end suite applies the same cases to a real API server)."""

from __future__ import annotations

import pytest

from phased.api.v1alpha1 import parse_manifest, parse_status
from phased.core.edits import edit_problems
from phased.core.model import JobRef
from tests.api.invalid_cases import EDIT_CASES, EditCase, running_job
from tests.api.schema_walk import crd_root_schema


@pytest.mark.parametrize("case", EDIT_CASES, ids=[c.id for c in EDIT_CASES])
def test_the_operator_judges_the_edit_as_the_crd_does(case: EditCase) -> None:
    after = parse_manifest(case.after)
    job = JobRef(namespace="default", name=case.after["metadata"]["name"], uid="u")
    problems = edit_problems(after.spec, parse_status(case.status), (), job)
    assert (case.model_error is None) == (case.api_error is None), case.id
    if case.model_error is None:
        assert problems == []
    else:
        assert any(case.model_error in p for p in problems), problems


def test_the_unedited_job_passes_whatever_its_status() -> None:
    """A status write re-validates the object: an unchanged spec must always pass."""
    spec = parse_manifest(running_job()).spec
    job = JobRef(namespace="default", name=running_job()["metadata"]["name"], uid="u")
    for case in EDIT_CASES:
        assert edit_problems(spec, parse_status(case.status), (), job) == []


def test_every_transition_rule_is_expected_by_some_case() -> None:
    rules = crd_root_schema()["x-kubernetes-validations"]
    transition = {r["message"] for r in rules if "oldSelf" in r["rule"]}
    assert len(transition) == 3
    expected = {c.api_error for c in EDIT_CASES if c.api_error}
    for message in transition:
        assert any(e in message for e in expected), message


def test_each_refused_case_names_the_field_its_rule_points_at() -> None:
    """The API server's refusal names the rule's fieldPath; the end-to-end suite looks for
    the case's field in it."""
    rules = crd_root_schema()["x-kubernetes-validations"]
    for case in EDIT_CASES:
        if case.api_error is None:
            continue
        paths = {r["fieldPath"].lstrip(".") for r in rules if case.api_error in r["message"]}
        assert paths == {case.field}, case.id


def test_the_table_refuses_and_accepts_and_names_each_case_once() -> None:
    ids = [c.id for c in EDIT_CASES]
    assert len(set(ids)) == len(ids)
    assert sum(c.api_error is None for c in EDIT_CASES) >= 5
    assert sum(c.api_error is not None for c in EDIT_CASES) >= 8
