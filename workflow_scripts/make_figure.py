"""Figure rules: scores (or one history and its reconstructions) -> PNG via battus.report."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus import report  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
name, spec, out = sm.params.figure, sm.params.spec, sm.output[0]
if name == "history_drawing":
    labels = [spec["labels"][f"{m}/{v}"] for _, m, v in sm.params.runs]
    report.figure_history_drawing(spec, sm.input.history, list(sm.input.predictions), labels, out)
else:
    scores = report.load_scores(sm.params.runs, list(sm.input.scores))
    published = report.read_published(sm.input.published) if "published" in sm.input.keys() else None
    if name == "tau_curves":
        report.figure_tau_curves(spec, scores, out)
    elif name == "rate_grid_heatmaps":
        report.figure_rate_grid(spec, scores, out)
    elif name == "canonical_bars":
        report.figure_canonical_bars(spec, scores, published, out)
    elif name == "cv_vs_f1":
        report.figure_cv_vs_f1(spec, scores, published, out)
    elif name == "timing":
        report.figure_timing(spec, scores, sm.params.runs, out)
    else:
        raise SystemExit(f"unknown figure {name!r}")
log.info("wrote %s", out)
