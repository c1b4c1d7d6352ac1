"""Label selectors as the API server reads them: the operator's ``nodeSelector``, judged here.

The settings' ``nodeSelector`` limits which Nodes the operator watches; the API server
applies it to the Node list and watch. The core needs the same answer for a node it already
sees: a node the job holds that a person relabelled out of the selector has left the
operator's scope (:mod:`phased.core.scope`), and a node outside it is never claimed. The
syntax is Kubernetes' string form (``k8s.io/apimachinery/pkg/labels.Parse``): requirements
separated by commas, each one of

* ``key`` (the label is there), ``!key`` (it is not);
* ``key=value``, ``key==value``, ``key!=value`` (``!=`` also holds when the label is absent);
* ``key in (a,b)``, ``key notin (a,b)`` (``notin`` also holds when the label is absent);
* ``key>3``, ``key<3`` (the label's value is an integer above or below the number).

A selector that does not parse is refused when the settings are read, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

_TOKEN = re.compile(r"\s*(?:(?P<op>==|!=|=|!|\(|\)|,|<|>)|(?P<word>[^\s=!(),<>]+))")
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(
    rf"^([a-z0-9]([-a-z0-9]{{0,61}}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{{0,61}}[a-z0-9])?)*/)?{_NAME}$"
)
_VALUE = re.compile(rf"^({_NAME})?$")


class Operator(StrEnum):
    EXISTS = "exists"
    ABSENT = "!"
    IN = "in"
    NOT_IN = "notin"
    GREATER = ">"
    LESS = "<"


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case Operator.EXISTS:
                return value is not None
            case Operator.ABSENT:
                return value is None
            case Operator.IN:
                return value is not None and value in self.values
            case Operator.NOT_IN:
                return value is None or value not in self.values
            case _:
                return _compare(value, self.operator, next(iter(self.values)))


@dataclass(frozen=True)
class Selector:
    """Every requirement must hold; the empty selector selects every node."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def _compare(value: str | None, operator: Operator, bound: str) -> bool:
    try:
        have = int(value) if value is not None else None
    except ValueError:
        return False
    if have is None:
        return False
    return have > int(bound) if operator == Operator.GREATER else have < int(bound)


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"unexpected {text[pos:]!r}")
        out.append(match.group("op") or match.group("word"))
        pos = match.end()
    return out


@lru_cache(maxsize=32)
def parse_selector(text: str) -> Selector:
    """``text`` as a :class:`Selector`; ``ValueError`` saying what is wrong otherwise."""
    tokens = _tokens(text)
    if not tokens:
        return Selector()
    requirements: list[Requirement] = []
    i = 0
    while True:
        requirement, i = _requirement(tokens, i)
        requirements.append(requirement)
        if i == len(tokens):
            return Selector(tuple(requirements))
        if tokens[i] != ",":
            raise ValueError(f"expected ',' before {tokens[i]!r}")
        i += 1


def _requirement(tokens: list[str], i: int) -> tuple[Requirement, int]:
    absent = _at(tokens, i) == "!"
    if absent:
        i += 1
    key = _key(_at(tokens, i))
    i += 1
    op = _at(tokens, i)
    if absent:
        if op not in (None, ","):
            raise ValueError(f"'!{key}' takes no operator")
        return Requirement(key, Operator.ABSENT), i
    if op in (None, ","):
        return Requirement(key, Operator.EXISTS), i
    if op in ("=", "==", "!="):
        value, i = _single_value(tokens, i + 1)
        kind = Operator.NOT_IN if op == "!=" else Operator.IN
        return Requirement(key, kind, frozenset({value})), i
    if op in (">", "<"):
        bound = _at(tokens, i + 1)
        if bound is None or not re.fullmatch(r"-?[0-9]+", bound):
            raise ValueError(f"'{key}{op}' needs an integer")
        kind = Operator.GREATER if op == ">" else Operator.LESS
        return Requirement(key, kind, frozenset({bound})), i + 2
    if op in ("in", "notin"):
        values, i = _value_set(tokens, i + 1, key)
        kind = Operator.IN if op == "in" else Operator.NOT_IN
        return Requirement(key, kind, values), i
    raise ValueError(f"unknown operator {op!r} after {key!r}")


def _single_value(tokens: list[str], i: int) -> tuple[str, int]:
    """A value after ``=``/``!=``; it may be empty (``key=`` selects the empty value)."""
    word = _at(tokens, i)
    if word is None or word in (",", "(", ")", "=", "==", "!=", "!", "<", ">"):
        return "", i
    return _value(word), i + 1


def _value_set(tokens: list[str], i: int, key: str) -> tuple[frozenset[str], int]:
    if _at(tokens, i) != "(":
        raise ValueError(f"expected '(' after the operator of {key!r}")
    values: set[str] = set()
    i += 1
    while True:
        word = _at(tokens, i)
        if word is None:
            raise ValueError(f"unclosed '(' in the values of {key!r}")
        if word == ")":
            if not values:
                raise ValueError(f"the values of {key!r} cannot be empty")
            return frozenset(values), i + 1
        if word == ",":
            i += 1
            continue
        values.add(_value(word))
        i += 1


def _at(tokens: list[str], i: int) -> str | None:
    return tokens[i] if i < len(tokens) else None


def _key(word: str | None) -> str:
    if word is None or not _KEY.match(word):
        raise ValueError(f"{word!r} is not a label key" if word else "a label key is missing")
    return word


def _value(word: str) -> str:
    if len(word) > 63 or not _VALUE.match(word):
        raise ValueError(f"{word!r} is not a label value")
    return word


def selects(text: str, labels: Mapping[str, str]) -> bool:
    """The selector ``text`` (already checked: the settings refuse one that does not parse)
    selects a node with ``labels``. The empty selector selects every node."""
    return not text or parse_selector(text).matches(labels)
