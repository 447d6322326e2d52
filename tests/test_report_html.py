"""The report's HTML pieces: a table's page in the wide layout, item spec files, the first page.

Fast and offline: tables built by hand, the first page from a made-up run, the landing text
(reports/workflow.rst) rendered the way `snakemake --report` renders it (Jinja, then docutils).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from battus.suite.report.html import table_html, write_table_html
from battus.suite.report.seeds import SeedStat
from battus.suite.report.summary import random_control, reading_guide, summary_rst, write_summary
from battus.suite.report.tables import Panel, Table, table_markdown
from battus.suite.specfile import item_spec_text, read_item_spec, write_item_spec

ROOT = Path(__file__).resolve().parent.parent


class _Cells(HTMLParser):
    """Every table of a page as rows of (text, bold) cells, plus the headings."""

    def __init__(self):
        super().__init__()
        self.tables, self.headings, self._cell, self._bold, self._heading = [], [], None, False, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell, self._bold = "", False
        elif tag == "strong":
            self._bold = True
        elif tag in ("h1", "h2"):
            self._heading = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append((self._cell, self._bold))
            self._cell = None
        elif tag in ("h1", "h2"):
            self.headings.append(self._heading)
            self._heading = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._heading is not None:
            self._heading += data


def _table() -> Table:
    quality = pd.DataFrame({
        "Method": ["Battus", "  crossing", "Battus-Z", "Random (negative control)"],
        "BA--SI F1": [0.8726, 0.85, 0.8726, 0.70],
        "BA--SI NRMSE": [0.1010, 0.12, 0.09, 0.30],
    })
    seeded = pd.DataFrame({"Rates": ["0.10/0.10", "0.20/0.05"], "F1": [SeedStat([0.80, 0.81, 0.82]), 0.9]},
                          dtype=object)
    panels = [
        Panel("SI datasets", quality, formats={"BA--SI F1": "metric", "BA--SI NRMSE": "metric"},
              best={"BA--SI F1": "max", "BA--SI NRMSE": "min"}, skip_best_rows=[3], rules_before=[2]),
        Panel("Rate robustness", seeded, formats={"F1": "metric"}, best={"F1": "max"}),
    ]
    tidy = pd.DataFrame({"method": ["Battus"], "metric": ["f1"], "value": [0.8726]})
    return Table("demo", "Quality on BA--SI & friends <b>", panels, tidy, note="A note -- with a dash.")


def _markdown_cells(table: Table) -> list[list[list[tuple[str, bool]]]]:
    """The Markdown writer's panels as rows of (text, bold) cells, header first."""
    out, rows = [], None
    for line in table_markdown(table).splitlines():
        if line.startswith("|"):
            if rows is None:
                rows = []
                out.append(rows)
            if re.fullmatch(r"\|[\s:|-]+\|", line):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append([(c.strip("*"), c.startswith("**")) for c in cells])
        else:
            rows = None
    return out


def test_table_page_shows_what_the_markdown_writer_prints():
    table = _table()
    page = table_html(table)
    parsed = _Cells()
    parsed.feed(page)
    # same panels, same cells, same bold, label dashes printed as en dashes
    assert [[[(text.strip(), bold) for text, bold in row] for row in t] for t in parsed.tables] == \
        _markdown_cells(table)
    assert parsed.headings == ["Quality on BA\u2013SI & friends <b>", "SI datasets", "Rate robustness"]
    assert ".8726" in page and "\u00b1" in page  # the paper's number style, mean ± sd over seeds
    assert "<b>" not in page.replace("<b>", "", 0).split("<h1>")[1].split("</h1>")[0]  # caption escaped
    assert "&lt;b&gt;" in page
    assert "A note \u2013 with a dash." in page
    assert '<tr class="rule">' in page  # the LaTeX midrule before the third row
    assert "<script" not in page and "http" not in page  # self-contained, nothing fetched


def test_table_page_is_written_beside_the_other_files(tmp_path):
    path = tmp_path / "demo.html"
    write_table_html(_table(), path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "demo.csv" in text and "demo.tex" in text


def test_spec_file_round_trip(tmp_path):
    spec = {"name": "x", "datasets": {"ba-si": {"label": "BA--SI", "paper": {}}},
            "rate_variants": [[0.1, 0.2, "rates-0.10-0.20"]], "controls": ["random/default"]}
    runs = [("ba-si", "battus", "default"), ("ba-si", "random", "default")]
    path = tmp_path / "s.json"
    write_item_spec(path, spec, runs, log=tmp_path / "s.log")
    assert read_item_spec(path) == (spec, runs)
    assert "2 runs" in (tmp_path / "s.log").read_text()
    with pytest.raises(ValueError, match="round trip"):
        item_spec_text({"seeds": {1: "a"}}, [])


def test_spec_files_of_the_tiny_plan_read_back_equal():
    """Every table's and figure's spec survives its file: the rules read back what the plan said."""
    yaml = pytest.importorskip("yaml")
    utils = pytest.importorskip("snakemake.utils")  # the schema fills in the config's defaults
    from battus.suite.experiments import Plan
    from battus.suite.report import report_made, report_runs, report_spec

    config = yaml.safe_load((ROOT / "config/test/tiny.yaml").read_text())
    utils.validate(config, str(ROOT / "config/schemas/config.schema.yaml"))
    plan = Plan(config)
    for name in report_made(plan, "table") + report_made(plan, "figure"):
        spec, runs = report_spec(name, plan), report_runs(name, plan)
        record = json.loads(item_spec_text(spec, runs))
        assert [tuple(r) for r in record["runs"]] == list(runs)
        assert json.dumps(record["spec"], sort_keys=True) == json.dumps(spec, sort_keys=True), name


SPEC = {
    "name": "battus-tiny", "results": "results", "backend": "cpu",
    "datasets": {"ba-si": {"label": "BA\u2013SI", "model": "si", "source": "simulated on graph ba (ba generator)",
                           "seeds": [123456789, 7]},
                 "covid-sir": {"label": "COVID\u2013SIR", "model": "", "source": "imported (ditto/covid/covid-sir.pt)",
                               "seeds": []}},
    "methods": {"battus-z": {"label": "Battus-Z", "kind": "method", "variants": ["default", "map"]},
                "random": {"label": "Random (negative control)", "kind": "control", "variants": ["default"]},
                "graph-distance": {"label": "Graph distance", "kind": "baseline", "variants": ["default"]}},
    "experiments": ["canonical"], "tables": ["canonical_quality"], "figures": ["timing"],
    "runs": [["ba-si", "battus-z", "default"], ["ba-si", "random", "default"]], "graphs": ["ba"],
    "random_label": "Random (negative control)", "canonical_has_random": True,
}
FACTS = {
    "code": {"version": "0.1.0", "commit": "0123456789abcdef", "dirty": True},
    "machine": {"host": "vm", "cpu": "Some CPU_with *stars*", "cores": 2, "memory_gib": 7.8, "gpus": [],
                "os": "Linux", "python": "3.11.7"},
    "libraries": {"python": "3.11.7", "numpy": "2.4.6"},
    "histories": {"simulate": 3, "import-hermes": 1}, "models": {"covid-sir": "sir"},
    "backends": {"cpu (cpu)": 2}, "hosts": {"vm": 2},
    "timing": {"start": 1.8e9, "end": 1.8e9 + 1085, "wall_seconds": 1085.0, "jobs": 40, "job_seconds": 900.0},
    "random": {"SI": {"f1": 0.7012, "nrmse": 0.2519}},
    "made": "2027-01-15T08:00:00+00:00",
}


def test_first_page_says_what_ran_and_reads_cleanly(tmp_path):
    from docutils.core import publish_parts

    guide = reading_guide(SPEC, FACTS)
    assert "random control scores SI mean F1 .7012, NRMSE .2519" in guide
    assert "not a floor" in guide and "3 simulated" in guide and "1 imported from the canonical" in guide
    text = summary_rst(SPEC, FACTS)
    # rst that docutils reads without a warning
    html = publish_parts(text, writer_name="html5", settings_overrides={"halt_level": 2, "report_level": 2})
    body = html["html_body"]
    for needle in ("battus-tiny", "0123456789ab", "uncommitted", "Some CPU_with *stars*", "18 min 05 s",
                   "numpy 2.4.6", "Random (negative control)", "Graph distance", "123456789, 7", "cpu (cpu): 2",
                   "fixed data", ">SIR<", "imported (ditto/covid/covid-sir.pt)"):
        assert needle in body, needle
    write_summary(SPEC, FACTS, tmp_path / "summary.rst", tmp_path / "summary.html")
    assert "Battus report" in (tmp_path / "summary.html").read_text()


def test_random_control_read_from_the_canonical_csv(tmp_path):
    csv = tmp_path / "canonical_quality.csv"
    csv.write_text("model,method,source,dataset,label,metric,value\n"
                   "SI,Random (negative control),control,all,Mean,mean_f1,0.7\n"
                   "SI,Random (negative control),control,all,Mean,mean_nrmse,0.25\n"
                   "SI,Battus-Z,measured,all,Mean,mean_f1,0.9\n"
                   "SI,Random (negative control),control,ba-si,BA\u2013SI,f1,0.1\n")
    assert random_control(csv, "Random (negative control)") == {"SI": {"f1": 0.7, "nrmse": 0.25}}
    assert random_control(tmp_path / "missing.csv", "Random (negative control)") == {}


def _landing(files: list, cwd: Path, monkeypatch) -> str:
    """reports/workflow.rst as `snakemake --report` renders it (snakemake.report.auto_report)."""
    jinja2 = pytest.importorskip("jinja2")
    from docutils.core import publish_parts

    class Snakemake:
        config = {"name": "battus-tiny"}

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    text = env.from_string((ROOT / "reports/workflow.rst").read_text()).render(
        snakemake=Snakemake, categories={}, files=files)
    monkeypatch.chdir(cwd)
    return publish_parts(text, writer_name="html", settings_overrides={"halt_level": 2})["html_body"]


def test_landing_text_includes_the_first_page_when_it_was_made(tmp_path, monkeypatch):
    class Record:  # what the template sees of a report file (FileRecord: path, target)
        path = Path("results/report/summary.html")
        target = "summary.html"

    (tmp_path / "results/report").mkdir(parents=True)
    write_summary(SPEC, FACTS, tmp_path / "results/report/summary.rst", tmp_path / "results/report/summary.html")
    body = _landing([Record()], tmp_path, monkeypatch)
    assert "Battus report: configuration" in body and ".7012" in body and "Tables" in body
    # without it (the run did not finish): a title and what to do, nothing that could be wrong
    body = _landing([], tmp_path, monkeypatch)
    assert "battus-tiny" in body and "run_summary" in body and "imported" not in body
