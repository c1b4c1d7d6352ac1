"""Every TrainingJob in the invalid table is rejected by the models, with its message."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from phased.api.errors import explain
from phased.api.v1alpha1 import parse_manifest
from tests.api.invalid_cases import INVALID_CASES, VALID_CASES, InvalidCase, ValidCase


@pytest.mark.parametrize("case", INVALID_CASES, ids=[c.id for c in INVALID_CASES])
def test_the_models_reject_it_with_its_message(case: InvalidCase) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_manifest(case.manifest)
    problems = "\n".join(explain(caught.value))
    assert case.model_error in problems


@pytest.mark.parametrize("case", VALID_CASES, ids=[c.id for c in VALID_CASES])
def test_the_models_accept_the_edge_case(case: ValidCase) -> None:
    parse_manifest(case.manifest)


def test_the_table_is_large_and_every_case_is_named_once() -> None:
    ids = [c.id for c in INVALID_CASES]
    assert len(ids) >= 30
    assert len(set(ids)) == len(ids)


def test_every_case_names_what_the_api_server_says() -> None:
    assert all(c.api_error.strip() for c in INVALID_CASES)
