"""The settings' ``nodeSelector`` is judged in the core as the API server judges it on the
Node list and watch (so a node relabelled out of it is seen to have left), and a selector
that does not parse is refused when the settings are read, saying why."""

import pytest

from phased.core.selector import parse_selector, selects
from phased.core.settings import SettingsError, load_settings

LABELS = {"pool": "gpu", "zone": "a", "gen": "4", "phased.dev/pool": "train"}

CASES = [
    ("", True),
    ("pool=gpu", True),
    ("pool==gpu", True),
    ("pool=cpu", False),
    ("pool!=cpu", True),
    ("missing!=x", True),  # != holds when the label is absent
    ("pool", True),
    ("missing", False),
    ("!missing", True),
    ("!pool", False),
    ("zone in (a, b)", True),
    ("zone in (b,c)", False),
    ("zone notin (b)", True),
    ("missing notin (b)", True),
    ("gen>3", True),
    ("gen<4", False),
    ("zone>3", False),  # not a number: never greater
    ("pool=gpu,zone=a", True),
    ("pool=gpu, zone=b", False),
    ("phased.dev/pool=train", True),
    ("pool=", False),  # the empty value
]


@pytest.mark.parametrize(("text", "selected"), CASES, ids=[c[0] or "empty" for c in CASES])
def test_a_selector_selects_as_the_api_server_would(text: str, selected: bool) -> None:
    assert selects(text, LABELS) is selected


BAD = ["pool in ()", "=gpu", "pool gpu", "zone in (a", "!pool=gpu", "gen>x", "a b=c", "Pool/x=1"]


@pytest.mark.parametrize("text", BAD)
def test_a_selector_that_does_not_parse_is_refused_with_the_settings(text: str) -> None:
    with pytest.raises(ValueError):
        parse_selector(text)
    with pytest.raises(SettingsError, match=r"nodeSelector: .*not a label selector"):
        load_settings(f"nodeSelector: {text!r}")
