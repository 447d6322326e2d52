#!/usr/bin/env bash
# The workflow's CI steps (its acceptance checks), from the repository root:
#   bash workflow_scripts/ci_workflow.sh
# Needs snakemake, snakefmt and the battus package on PATH/in the environment,
# and the shared mirror at ../shared/data (override with BATTUS_MIRROR).
set -euo pipefail
cd "$(dirname "$0")/.."
# .ci/run installs into .venv without activating it
if [ -x .venv/bin/snakemake ]; then export PATH="$PWD/.venv/bin:$PATH"; fi
MIRROR="${BATTUS_MIRROR:-$(cd .. && pwd)/shared/data}"
CORES="${CORES:-2}"
step() { printf '\n== %s (at %ds)\n' "$*" "$SECONDS"; }

step "default workflow end to end (offline, CPU)"
snakemake --cores "$CORES"
step "the example plug-in, the controls and the baselines are in the default run's canonical table"
python3 - <<'PY'
import csv
from pathlib import Path
rows = list(csv.DictReader(Path("results/report/tables/canonical_quality.csv").open()))
methods = {r["method"]: r["source"] for r in rows}
for name in ("Forward fill (example plug-in)", "Truth (positive control)", "Random (negative control)",
             "Observed copy (naive baseline)", "Graph distance (baseline)"):
    assert name in methods, (name, sorted(methods))
truth = [float(r["value"]) for r in rows if r["method"] == "Truth (positive control)" and r["metric"] in ("f1", "nrmse")]
assert truth and set(truth) <= {0.0, 1.0}, truth  # the positive control scores exactly F1 1 and NRMSE 0
assert Path("results/scores.csv").stat().st_size > 0
print(f"{len(methods)} methods in the canonical table; the positive control scores exactly 1 / 0")
# seeds: the rate-robustness resimulations run at 3 seeds, merged into mean, sd and 95% interval
rr = list(csv.DictReader(Path("results/report/tables/rate_robustness.csv").open()))
assert {r["value"] for r in rr if r["metric"] == "f1_n_seeds"} == {"3"}, rr[:5]
assert "\u00b1" in Path("results/report/tables/rate_robustness.md").read_text()
scores = list(csv.DictReader(Path("results/scores.csv").open()))
seeds = {r["seed"] for r in scores if r["dataset"] == "rr-ba-sir-0.10-0.10" and r["metric"] == "hermes_f1"}
assert len(seeds) == 3, seeds
print(f"rate robustness over seeds {sorted(seeds)}: mean +- sd, 95% interval, one scores.csv row per seed")
PY
step "HTML and zip reports of the default run, from a venv made exactly as the README's first command"
# the README's setup installs only the `workflow` extra: the report must build with that alone
# (here, not .venv: CI's .venv also has the test and cuda extras)
README_VENV="${README_VENV:-build/venv-readme}"  # build/ is git-ignored
python3 -m venv "$README_VENV" && "$README_VENV/bin/pip" install -q -e ".[workflow]"
"$README_VENV/bin/snakemake" --report results/report/report.html
"$README_VENV/bin/snakemake" --report results/report/report.zip
python3 - <<'PY'
import zipfile
from pathlib import Path
html = Path("results/report/report.html")
assert html.stat().st_size > 100_000, f"{html}: {html.stat().st_size} bytes"
with zipfile.ZipFile("results/report/report.zip") as z:
    names = z.namelist()
    assert z.testzip() is None and any(n.endswith("report.html") for n in names), names[:5]
print(f"report.html {html.stat().st_size} bytes; report.zip {len(names)} files")
PY
step "lint and format"
snakemake --lint
snakefmt --check Snakefile rules
step "dry run of the whole paper (offline)"
# no mirror: the shared one lacks the large SNAP graphs, and a run through it stops naming them
BATTUS_MIRROR= snakemake --dry-run --quiet --configfile config/paper.yaml
step "canonical suite through the mirror"
BATTUS_MIRROR="$MIRROR" snakemake --cores "$CORES" --configfile config/test/ci.yaml
snakemake --configfile config/test/ci.yaml --report results/ci/report/report.html
step "the canonical Battus-Z rows equal the paper's to four decimals"
python3 workflow_scripts/check_paper_tables.py results/ci/report/tables/canonical_quality.csv
step "archive"
snakemake --cores 1 archive
