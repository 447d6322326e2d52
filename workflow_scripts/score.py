"""Rule score: HERMES-compatible, unobserved-only and causal scores of one prediction -> JSON."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import contextlib  # noqa: E402

from _common import prepare_outputs, setup_log  # noqa: E402

from battus.cli import main  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
# the CLI's `score` is the single definition of the score record
with open(sm.log[0], "a") as fh, contextlib.redirect_stdout(fh):
    status = main(["score", sm.input.history, sm.input.prediction, "--out", sm.output[0], "--quiet"])
if status:
    raise SystemExit(f"battus score failed with status {status}")
log.info("scored %s", sm.input.prediction)
