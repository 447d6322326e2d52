"""Validating a workflow configuration against its JSON schema, with a short answer.

:func:`validate_config` does what ``snakemake.utils.validate`` does (JSON
Schema 2020-12, the schema's defaults filled in) but never prints the schema or
the whole document: a refusal is one line naming the key, the value (cut
short) and the rule. Before validating, the configuration is walked with a
budget, so that a small file of nested YAML anchors, which expands to billions
of values, is refused at once instead of validated (or printed) for ever.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import yaml

from ..errors import printable
from .experiments import ConfigError

# values a configuration may hold, shared ones (YAML anchors) counted each time they are reached
MAX_VALUES = 1_000_000
_SHOWN = 60  # characters of a refused value shown


# the exit status of a refused configuration, as of bad input to the battus command line
EXIT_BAD_CONFIG = 2


@contextlib.contextmanager
def refused_in_one_line() -> Iterator[None]:
    """Turn a :class:`ConfigError` raised in the block into one line on stderr and exit status 2.

    For the workflow's own checks while Snakemake reads the Snakefile: Snakemake would show the
    error under a heading naming our rule file, followed by a traceback, and exit with 1. A
    ``SystemExit`` passes through Snakemake (it catches ``Exception``), before any job or output.
    """
    try:
        yield
    except ConfigError as exc:
        print(f"battus: error: {printable(str(exc))}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_BAD_CONFIG) from None


def check_config_files(files: Iterable[str | Path]) -> None:
    """Each YAML file a configuration is read from is UTF-8 text, one YAML document, and gives no
    key twice (YAML keeps the last one silently); else a :class:`ConfigError` naming the file."""
    for path in files:
        _check_unique_keys(Path(path))


def validate_config(config: dict, schema_path: str | Path, files: Iterable[str | Path] = ()) -> None:
    """Check ``config`` against the schema at ``schema_path`` and fill in its defaults, in place;
    a :class:`~battus.suite.experiments.ConfigError` names the first key that breaks a rule.
    ``files``: the YAML files it was read from, checked for a key given twice (YAML keeps the
    last one silently)."""
    import jsonschema
    from jsonschema import Draft202012Validator, validators

    check_config_files(files)
    _walk(config)
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, subschema):
        if isinstance(instance, dict):
            for name, sub in props.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(name, sub["default"])
        yield from properties(validator, props, instance, subschema)

    filling = validators.extend(Draft202012Validator, {"properties": set_defaults})
    error = jsonschema.exceptions.best_match(filling(schema).iter_errors(config))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ConfigError(f"{where}: {_short(error.instance)}: {_rule(error)}")


def _walk(config) -> None:
    """Refuse a configuration that expands to more than :data:`MAX_VALUES` values, or holds a number
    that is not finite (YAML's .nan, .inf: JSON Schema bounds do not catch them)."""
    seen = 0
    pending = [(config, "")]
    while pending:
        node, where = pending.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(f"the document expands to more than {MAX_VALUES:,} values (nested YAML anchors?)")
        if isinstance(node, float) and not math.isfinite(node):
            raise ConfigError(f"{where or '(top level)'}: {node}: not a finite number")
        if isinstance(node, dict):
            pending.extend((value, f"{where}.{key}" if where else str(key)) for key, value in node.items())
        elif isinstance(node, list | tuple):
            pending.extend((value, f"{where}[{i}]") for i, value in enumerate(node))


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a mapping giving one key twice."""

    def construct_mapping(self, node, deep=False):
        keys = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in keys:
                line = key_node.start_mark.line + 1
                raise ConfigError(f"{self.name}: line {line}: key {_short(key)} given twice")
            keys.add(key)
        return super().construct_mapping(node, deep=deep)


def _check_unique_keys(path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    loader = _UniqueKeyLoader(text)
    loader.name = str(path)
    try:
        loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
    finally:
        loader.dispose()


def _short(value) -> str:
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _rule(error) -> str:
    """The rule that failed, in words, without the schema or the whole value."""
    kind, expected = error.validator, error.validator_value
    if kind == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {}))) if isinstance(
            error.instance, dict) else []
        return f"unknown key {_short(extra[0]) if extra else ''} (not in the schema)".replace("  ", " ")
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
                "minItems", "maxItems", "pattern", "type", "multipleOf", "const"):
        return f"{kind} {_short(expected)}"
    if kind == "enum":
        return f"one of {', '.join(map(str, expected))}"
    if kind == "required":
        missing = [k for k in expected if isinstance(error.instance, dict) and k not in error.instance]
        return f"needs {', '.join(missing) or 'more keys'}"
    if kind == "propertyNames":
        return f"key names must match {_short(expected.get('pattern', expected))}"
    message = error.message
    return message if len(message) <= 120 else message[:117] + "..."
