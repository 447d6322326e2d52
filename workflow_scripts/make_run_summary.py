"""Rule run_summary: the report's first page (battus.suite.report.summary) as rst and HTML."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.suite.report.summary import gather, write_summary  # noqa: E402
from battus.suite.specfile import read_item_spec  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
spec, _ = read_item_spec(sm.input.spec)
facts = gather(spec, sm.params.workflow, list(sm.input.histories), sm.input.get("canonical"),
               list(sm.input.finished))
write_summary(spec, facts, sm.output.rst, sm.output.html)
log.info("wrote %s and %s", sm.output.rst, sm.output.html)
