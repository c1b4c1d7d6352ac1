"""Malformed and extreme TrainingJobs are either accepted or rejected with a readable message.

Whatever a namespace user writes — wrong types at any level, huge lists and numbers, odd
Unicode, lone surrogates, unknown keys — the models either accept it or raise pydantic's
``ValidationError``, never anything else; and the message people see (``explain`` for
``phased plan``, ``format_spec_error`` for the ``InvalidSpec`` condition) is non-empty,
bounded, one line per problem, and names a field path that exists in the resource.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from phased.api.errors import error_message, explain
from phased.api.v1alpha1 import parse_manifest, parse_spec
from phased.reconcile import format_spec_error
from tests.hostile.strategies import (
    POD_ESCAPE_VALUES,
    POD_ESCAPES,
    hostile_spec_dicts,
    json_values,
    odd_text_with_surrogates,
    valid_spec_dicts,
)

BOUNDED = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_LINE = 2048  # one problem, as people read it
MAX_CONDITION = 5 * (MAX_LINE + 2) + 40  # format_spec_error keeps five problems
SPEC_FIELDS = {
    "phases",
    "template",
    "launcher",
    "spares",
    "failurePolicy",
    "checkpoint",
    "priority",
}
MANIFEST_FIELDS = {"apiVersion", "kind", "metadata", "spec", "status"}


def _check_messages(exc: ValidationError, fields: set[str]) -> None:
    lines = explain(exc)
    assert lines, "a rejection must say why"
    for err, line in zip(exc.errors(), lines, strict=True):
        assert isinstance(line, str) and line.strip()
        message = error_message(err["msg"])
        assert message.strip() and "\n" not in message, line[:200]
        assert len(message) <= MAX_LINE, line[:200]
        loc = err["loc"]
        # The path is the field names plus, for a map, the person's own key, echoed back.
        echoed = sum(len(str(part)) + 4 for part in loc)
        assert len(line) <= len(message) + echoed + 10, line[:200]
        # The path starts at a real field, unless the problem is an unknown top-level key
        # (which the message then names: the person's own text, echoed back).
        if not (err["type"] == "extra_forbidden" and len(loc) == 1):
            assert not loc or loc[0] in fields, line[:200]
    condition = format_spec_error(exc)
    keys = sum(len(str(part)) + 4 for err in exc.errors()[:5] for part in err["loc"])
    assert condition.strip() and len(condition) <= MAX_CONDITION + keys


def _spec_verdict(raw: Any) -> None:
    try:
        parse_spec(raw)
    except ValidationError as exc:
        _check_messages(exc, SPEC_FIELDS)


@BOUNDED
@given(valid_spec_dicts())
def test_extreme_but_valid_specs_are_accepted(raw: dict[str, Any]) -> None:
    spec = parse_spec(raw)
    assert 1 <= len(spec.phases) <= 8


@BOUNDED
@given(hostile_spec_dicts())
def test_a_broken_spec_is_accepted_or_rejected_with_a_readable_message(raw: Any) -> None:
    _spec_verdict(raw)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_spec_dicts(), st.data())
def test_wrong_types_at_every_level_are_rejected_not_raised(
    raw: dict[str, Any], data: st.DataObject
) -> None:
    """Every place of a valid spec, in turn, given a value of some other shape (each example
    checks every place, so fewer examples cover as much as the other tests)."""
    from tests.hostile.strategies import _paths

    for path in _paths(raw):
        bad = copy.deepcopy(raw)
        parent = bad
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = data.draw(json_values(odd_text_with_surrogates), label=str(path))
        _spec_verdict(bad)


@BOUNDED
@given(
    st.one_of(json_values(odd_text_with_surrogates), hostile_spec_dicts()),
    st.one_of(json_values(odd_text_with_surrogates), st.just({"name": "llm"})),
    st.sampled_from(["phased.dev/v1alpha1", "phased.dev/v1", "", None, 1]),
    st.sampled_from(["TrainingJob", "trainingjob", "Pod", None]),
)
def test_a_broken_manifest_is_accepted_or_rejected_with_a_readable_message(
    spec: Any, metadata: Any, api_version: Any, kind: Any
) -> None:
    raw = {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}
    try:
        parse_manifest(raw)
    except ValidationError as exc:
        _check_messages(exc, MANIFEST_FIELDS)


@BOUNDED
@given(json_values(odd_text_with_surrogates))
def test_any_json_value_where_a_manifest_belongs_is_rejected_not_raised(raw: Any) -> None:
    try:
        parse_manifest(raw)
    except ValidationError as exc:
        _check_messages(exc, MANIFEST_FIELDS)


@BOUNDED
@given(
    valid_spec_dicts(),
    st.sampled_from(POD_ESCAPES),
    POD_ESCAPE_VALUES,
    st.booleans(),
    st.booleans(),
)
def test_pod_fields_outside_the_templates_pod_spec_are_refused_not_dropped(
    raw: dict[str, Any], key: str, value: Any, in_phase: bool, in_resources: bool
) -> None:
    """Pod fields belong under ``template.spec`` (where Pod Security Admission judges them);
    at the template's top level or in its resources they are refused, not dropped."""
    template = raw["phases"][0].setdefault("template", {}) if in_phase else raw["template"]
    if in_resources:
        template = template.setdefault("resources", {})
    template[key] = value
    with pytest.raises(ValidationError) as caught:
        parse_spec(raw)
    assert any(
        line.endswith(f"{key}: Extra inputs are not permitted") for line in explain(caught.value)
    )


def test_merged_env_and_annotations_past_one_templates_bound_are_accepted_as_by_the_crd() -> None:
    """The CRD bounds each template (128 env, 32 annotations), not their merge; so do the
    models: a merge past one template's bound is not re-validated (it used to fail with the
    path ``env``, which names no field of the spec)."""
    raw = {
        "phases": [
            {
                "name": "train",
                "nodes": {"min": 1, "max": 1},
                "template": {
                    "env": [{"name": f"P{i}"} for i in range(128)],
                    "annotations": {f"p{i}": "" for i in range(32)},
                },
            }
        ],
        "template": {
            "image": "x",
            "env": [{"name": f"J{i}"} for i in range(128)],
            "annotations": {f"j{i}": "" for i in range(32)},
        },
    }
    spec = parse_spec(raw)
    merged = spec.worker_pod(spec.phases[0])
    assert len(merged.worker["env"]) == 256 and len(merged.annotations) == 64
    assert merged.worker["image"] == "x"
