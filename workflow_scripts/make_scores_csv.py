"""results/<config>/scores.csv: every number of every score file in one long table (battus.suite.report.scores_long)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.files import atomic_path  # noqa: E402
from battus.suite import report  # noqa: E402

sm = snakemake  # noqa: F821
log = setup_log(sm)
prepare_outputs(sm)
frame = report.scores_long(sm.params.runs, list(sm.input), sm.params.seeds, sm.params.replicates)
with atomic_path(sm.output[0]) as tmp:
    frame.to_csv(tmp, index=False)
log.info(f"wrote {sm.output[0]}: {len(frame)} numbers from {len(sm.input)} score files")
