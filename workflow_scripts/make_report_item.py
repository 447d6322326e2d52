"""Table and figure rules: the files an item reads -> that table or figure (battus.suite.report.make)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.suite import report  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
inputs = {key: value for key, value in sm.input.items()}
log.info(report.make(sm.params.name, sm.params.spec, sm.params.runs, inputs, list(sm.output)))
