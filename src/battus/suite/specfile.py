"""An item's spec and runs as a small JSON file, the input of its table or figure rule.

The workflow writes what a table or figure shows (:func:`~battus.suite.report.registry.report_spec`)
and the runs it reads to ``<results>/report/specs/<item>.json`` with a rule of its own whose params
they are. Editing one experiment changes those params only for the items that show it, so only
their spec files are rewritten and only their tables and figures are made again, while the rule
that makes a table has short params (its name), which the HTML report prints in the table's
information panel.

It sits outside :mod:`battus.suite.report`, whose package imports pandas and every table and figure
module (0.6 s): the rule that writes a spec file, one job per table and figure, imports only this.
"""

from __future__ import annotations

import json
from pathlib import Path


def _plain(value):
    """Tuples as lists, recursively (what JSON gives back), so a spec reads back equal to itself."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def item_spec_text(spec: dict, runs: list | None) -> str:
    """The spec file's text; refuses what JSON would not give back as it is (a key not a string)."""
    record = {"spec": _plain(spec), "runs": _plain(runs or [])}
    text = json.dumps(record, indent=1, ensure_ascii=False)
    if json.loads(text) != record:
        raise ValueError("a report spec must survive a JSON round trip (string keys, plain values)")
    return text + "\n"


def write_item_spec(path: str | Path, spec: dict, runs: list | None, log: str | Path | None = None) -> None:
    """Write the spec file; ``log``: a file that says so (the rule's log)."""
    Path(path).write_text(item_spec_text(spec, runs), encoding="utf-8")
    if log:
        Path(log).write_text(f"wrote {path} ({len(runs or [])} runs)\n", encoding="utf-8")


def read_item_spec(path: str | Path) -> tuple[dict, list[tuple[str, str, str]]]:
    """The spec and the (dataset, method, variant) runs of a spec file."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    return record["spec"], [tuple(run) for run in record["runs"]]
