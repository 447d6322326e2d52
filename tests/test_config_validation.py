"""The workflow's config check (battus.suite.config.validate_config): short refusals, defaults as
Snakemake's own validate fills them, and no hang on a document of nested YAML anchors."""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path

import pytest
import yaml

from battus.suite.config import validate_config
from battus.suite.experiments import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "config/schemas/config.schema.yaml"


def default_config() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def test_defaults_are_filled_as_snakemake_fills_them():
    from snakemake.utils import validate

    ours, theirs = default_config(), default_config()
    validate_config(ours, SCHEMA)
    validate(theirs, str(SCHEMA))
    assert ours == theirs


@pytest.mark.parametrize("edit, needle", [
    (lambda c: c["downloads"].update({"../outside.txt": {"url": "https://x/y", "sha256": "0" * 64}}),
     "config: downloads: '../outside.txt': pattern"),
    (lambda c: c["downloads"].update({"a/../../b": {"url": "https://x/y", "sha256": "0" * 64}}),
     "config: downloads: 'a/../../b': pattern"),
    (lambda c: c["fit"].update(grid_points=-3), "config: fit.grid_points: -3: minimum 2"),
    (lambda c: c.update(bogus=1), "unknown key 'bogus'"),
])
def test_a_refusal_is_one_short_line_naming_the_key(edit, needle):
    config = default_config()
    edit(config)
    with pytest.raises(ConfigError) as caught:
        validate_config(config, SCHEMA)
    message = str(caught.value)
    assert needle in message and "\n" not in message and len(message) < 200, message


def test_nested_anchors_are_refused_at_once():
    levels = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]")
    bomb = yaml.safe_load("\n".join(levels))  # a kilobyte that expands to 10**9 values
    config = {**copy.deepcopy(default_config()), "datasets": {"x": {"label": bomb}}}
    started = time.monotonic()
    with pytest.raises(ConfigError, match="expands to more than"):
        validate_config(config, SCHEMA)
    assert time.monotonic() - started < 10


def test_a_key_given_twice_is_refused_with_its_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("results: a\nseeds: []\nresults: b\n")
    with pytest.raises(ConfigError, match=r"c.yaml: line 3: key 'results' given twice"):
        validate_config(default_config(), SCHEMA, files=[path])


@pytest.mark.parametrize("edit, needle", [
    (lambda c: c["fit"].update(lower=float("nan")), "fit.lower: nan: not a finite number"),
    (lambda c: c["experiments"]["rate_robustness"].update(seeds=[2**64]), "maximum 18446744073709551615"),
])
def test_values_the_command_line_refuses_are_refused_here(edit, needle):
    config = default_config()
    edit(config)
    with pytest.raises(ConfigError, match=needle):
        validate_config(config, SCHEMA)


def test_a_misspelt_plugin_placeholder_is_refused_before_any_job():
    from battus.suite.experiments import Plan

    config = default_config()
    validate_config(config, SCHEMA)
    name = next(iter(config["methods"]))
    for command in ("python x.py {histroy} {out}", ["python", "x.py", "{histroy}", "{out}"]):
        config["methods"][name]["command"] = command
        with pytest.raises(ConfigError, match=r"command: unknown placeholder \{histroy\}"):
            Plan(config)


@pytest.mark.parametrize("edit, needle", [
    # two tau values that print alike
    (lambda c: c["experiments"]["tau"].update(taus=[0.55, 0.551]), "experiments.tau.taus: 0.551 makes 'tau-0.55'"),
    # a variant of the config's own named like one the tau sweep makes, with other settings
    (lambda c: c["variants"]["battus-z"].update({"tau-0.55": {"label": "mine", "tau": 0.6}}),
     "makes 'tau-0.55', which already names something else"),
    # a dataset of the config's own named like a seed replicate
    (lambda c: c["datasets"].update({"rr-ba-sir-0.10-0.10.seed1": dict(c["datasets"]["ba-sir"], seed=7)}),
     "makes 'rr-ba-sir-0.10-0.10.seed1', which already names something else"),
])
def test_names_that_collide_are_refused_before_any_job(edit, needle):
    from battus.suite.experiments import Plan

    config = default_config()
    edit(config)
    validate_config(config, SCHEMA)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        Plan(config)
