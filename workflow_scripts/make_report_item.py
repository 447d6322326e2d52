"""Table and figure rules: the spec file and the files an item reads -> that table or figure.

A table is written as CSV, Markdown and LaTeX (battus.suite.report's writers) and, for the HTML
report, as a page of its own in the paper's wide layout (battus.suite.report.html), all from the
one Table the registry builds.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.suite import report  # noqa: E402
from battus.suite.report.html import write_table_html  # noqa: E402
from battus.suite.specfile import read_item_spec  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
spec, runs = read_item_spec(sm.input.spec)
inputs = {key: value for key, value in sm.input.items() if key != "spec"}
if "html" in sm.output.keys():
    data = report.read_inputs(spec, runs, inputs)
    table = report.build_table(sm.params.name, spec, data.scores, data.histories, data.published,
                               data.measured)
    report.write_table(table, sm.output.csv, sm.output.md, sm.output.tex)
    write_table_html(table, sm.output.html)
    log.info("wrote %s, .md, .tex and .html (%d panels, %d CSV rows)", sm.output.csv, len(table.panels),
             len(table.tidy))
else:
    log.info(report.make(sm.params.name, spec, runs, inputs, list(sm.output)))
