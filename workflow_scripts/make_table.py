"""Table rules: scores -> CSV, Markdown and LaTeX via battus.report."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus import report  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
spec = sm.params.spec
scores = report.load_scores(sm.params.runs, list(sm.input.get("scores", [])))
histories = None
if "histories" in sm.input.keys():
    histories = {d: report.history_summary(p) for d, p in zip(spec["datasets"], sm.input.histories, strict=True)}
published = report.read_published(sm.input.published) if "published" in sm.input.keys() else None
table = report.build_table(sm.params.table, spec, scores, histories=histories, published=published)
report.write_table(table, sm.output.csv, sm.output.md, sm.output.tex)
log.info("wrote %s (%d panels)", sm.output.csv, len(table.panels))
