"""Property-based tests of the workflow's config check: any document is planned or refused in one line.

Documents are mutations of config/config.yaml and config/test/tiny.yaml: a value anywhere replaced
(wrong types, huge, negative, NaN, infinite or subnormal numbers, unicode strings, nested lists
and mappings), a key deleted, a key added (random or one the schema knows, in the wrong place),
an entry copied under a name that may collide with one the plan makes (a seed replicate, a τ or
rate sweep's variant). Each goes through what the Snakefile runs before any job:
``validate_config`` (schema, defaults, budget, finite numbers), ``Plan`` (references, names),
every run's options and the report's tables and figures. It must be planned, or refused with a
:class:`ConfigError` of one line that names a key of the document, in bounded time; any other
exception is a bug.

Same knobs as tests/test_fuzz_inputs.py: ``BATTUS_FUZZ_EXAMPLES`` (examples per test) and
``BATTUS_FUZZ_RANDOM=1`` (fresh examples each run instead of the fixed seed).
"""

from __future__ import annotations

import copy
import math
import os
import time
from pathlib import Path
from unittest import mock

import yaml
from hypothesis import event, given
from hypothesis import strategies as st
from test_fuzz_inputs import budget  # its fixed seed and knobs; no deadline: SECONDS is asserted below

from battus.suite.config import validate_config
from battus.suite.experiments import ConfigError, Plan
from battus.suite.report import report_made

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "config/schemas/config.schema.yaml"
BASES = {name: yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
         for name, path in (("default", "config/config.yaml"), ("tiny", "config/test/tiny.yaml"))}
# one document: validated, planned, every run's options and the report's items (a few ms each)
SECONDS = 10.0


def _keys(node, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            found.add(str(key))
            _keys(value, found)
    elif isinstance(node, list):
        for value in node:
            _keys(value, found)
    return found


KNOWN_KEYS = sorted(_keys(BASES["default"], set()) | _keys(BASES["tiny"], set())
                    | _keys(yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))["properties"], set()))
# values that mean something somewhere (names of graphs, datasets, methods, variants, enums, placeholders)
KNOWN_STRINGS = [
    "", "ba", "ba-si", "ba-sir", "er", "battus", "battus-z", "default", "map", "threshold", "sir", "si",
    "cpu", "cuda", "tau-0.55", "{history}", "{histroy}", "{out}", "../outside", "/abs", "results", "a/../../b",
    "\x1b[31m", "\u202e", "caf\u00e9", "\U000e0067",
]

NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 2**31, 2**63, 2**64 - 1, 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-320, 5e-324, 1e308, 0.5, 0.55, 0.551, 1.0, 1.5, float("nan"), float("inf")]),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12), st.sampled_from(KNOWN_STRINGS))
KEYS = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(min_size=1, max_size=10), st.sampled_from(KNOWN_STRINGS))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(KEYS, inner, max_size=4)),
                      max_leaves=12)


def _paths(node, prefix=()) -> list[tuple]:
    """Every place in the document (dict keys and list indices), the document itself first."""
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _at(doc, path):
    for step in path:
        doc = doc[step]
    return doc


@st.composite
def documents(draw):
    """(base name, a mutated copy, the keys the mutations touched)."""
    base = draw(st.sampled_from(sorted(BASES)))
    doc = copy.deepcopy(BASES[base])
    touched: list[str] = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        paths = _paths(doc)
        # the milder kinds keep many documents valid, so that the plan, not only the schema, sees them
        kind = draw(st.sampled_from(["set", "number", "delete", "add", "copy", "copy", "nudge", "nudge", "nudge",
                                     "rename", "rename"]))
        if kind in ("set", "number"):
            path = draw(st.sampled_from(paths[1:]))
            parent = _at(doc, path[:-1])
            parent[path[-1]] = draw(NUMBERS if kind == "number" else VALUES)
        elif kind in ("nudge", "rename"):
            # a number to another of its kind (0, a bound, just past it), a string to a name used elsewhere
            wanted = (int, float) if kind == "nudge" else (str,)
            places = [p for p in paths[1:] if isinstance(_at(doc, p), wanted) and not isinstance(_at(doc, p), bool)]
            if not places:
                continue
            path = draw(st.sampled_from(places))
            old = _at(doc, path)
            if isinstance(old, str):
                new = draw(st.sampled_from(KNOWN_STRINGS + sorted(s for s in _keys(doc, set()) if s)))
            elif isinstance(old, int):
                new = draw(st.sampled_from([0, 1, 2, 3, old - 1, old + 1, 2 * old, -old]))
            else:
                new = draw(st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5, 0.55, 0.551, 0.7, 1.0, old / 2, old + 1e-9]))
            _at(doc, path[:-1])[path[-1]] = new
        elif kind == "delete":
            path = draw(st.sampled_from(paths[1:]))
            parent = _at(doc, path[:-1])
            del parent[path[-1]]
        else:
            mappings = [p for p in paths if isinstance(_at(doc, p), dict)]
            path = draw(st.sampled_from(mappings))
            mapping = _at(doc, path)
            if kind == "copy" and mapping:
                source = draw(st.sampled_from(sorted(mapping, key=str)))
                # names the plan also makes: a seed replicate, a τ or rate sweep's variant, a near twin
                name = draw(st.one_of(KEYS, st.sampled_from([f"{source}.seed1", f"{source}.seed2", "tau-0.55",
                                                              "rates-0.10-0.10", f"{str(source).upper()}",
                                                              f"{source}-final", f"{source} "])))
                mapping[name] = copy.deepcopy(mapping[source])
                path = (*path, name)
            else:
                name = draw(KEYS)
                mapping[name] = draw(VALUES)
                path = (*path, name)
        touched += [str(step) for step in path if isinstance(step, str)]
    return base, doc, touched


def plan(config: dict, stage: list[str] | None = None) -> Plan:
    """What the Snakefile does with a config before any job (rules/common.smk); ``stage`` records
    the step reached (the schema, then the plan)."""
    stage = [] if stage is None else stage
    stage.append("the schema")
    validate_config(config, SCHEMA)
    stage.append("the plan")
    with mock.patch.dict(os.environ, {"BATTUS_MIRROR": ""}):
        planned = Plan(config)
        for run in planned.all_runs():
            planned.options(*run)
        report_made(planned, "table")
        report_made(planned, "figure")
    return planned


def check_refusal(exc: ConfigError, doc: dict, touched: list[str]) -> None:
    message = str(exc)
    assert message.startswith("config: "), message
    assert "\n" not in message and "\r" not in message, message
    assert len(message) <= 400, message
    names = {k for k in _keys(doc, set()) | set(touched) if len(k) >= 2} | {"(top level)"}
    assert any(name in message or repr(name)[1:-1] in message for name in names) or "expands to" in message, \
        f"names no key: {message}"


@budget(120)
@given(documents())
def test_any_document_is_planned_or_refused_in_one_line(case):
    base, doc, touched = case
    started, stage = time.monotonic(), []
    try:
        plan(doc, stage)
    except ConfigError as exc:
        event(f"refused ({base}) by {stage[-1]}")
        check_refusal(exc, doc, touched)
    else:
        event(f"planned ({base})")
    assert time.monotonic() - started < SECONDS


@budget(30)
@given(st.sampled_from(sorted(BASES)), st.data())
def test_a_number_that_is_not_finite_is_refused_anywhere(base, data):
    doc = copy.deepcopy(BASES[base])
    numbers = [p for p in _paths(doc)[1:] if isinstance(_at(doc, p), int | float) and not isinstance(_at(doc, p), bool)]
    path = data.draw(st.sampled_from(numbers))
    value = data.draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    _at(doc, path[:-1])[path[-1]] = value
    try:
        plan(doc)
    except ConfigError as exc:
        check_refusal(exc, doc, [str(s) for s in path if isinstance(s, str)])
        return
    raise AssertionError(f"{'.'.join(map(str, path))} = {value} was accepted")


def test_the_bases_are_planned():
    for doc in BASES.values():
        plan(copy.deepcopy(doc))
