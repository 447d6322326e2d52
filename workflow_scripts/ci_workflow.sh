#!/usr/bin/env bash
# The workflow's CI steps (issue 4's acceptance list), from the repository root:
#   bash workflow_scripts/ci_workflow.sh
# Needs snakemake, snakefmt and the battus package on PATH/in the environment,
# and the shared mirror at ../shared/data (override with BATTUS_MIRROR).
set -euo pipefail
cd "$(dirname "$0")/.."
# .ci/run installs into .venv without activating it
if [ -x .venv/bin/snakemake ]; then export PATH="$PWD/.venv/bin:$PATH"; fi
MIRROR="${BATTUS_MIRROR:-$(cd .. && pwd)/shared/data}"
CORES="${CORES:-2}"
step() { printf '\n== %s\n' "$*"; }

step "default workflow end to end (offline, CPU)"
snakemake --cores "$CORES"
step "HTML report of the default run"
snakemake --report results/report/report.html
step "lint and format"
snakemake --lint
snakefmt --check Snakefile rules
step "dry run of the whole paper (offline)"
BATTUS_MIRROR="$MIRROR" snakemake --dry-run --quiet --configfile config/paper.yaml
step "canonical suite through the mirror"
BATTUS_MIRROR="$MIRROR" snakemake --cores "$CORES" --configfile config/test/ci.yaml
snakemake --configfile config/test/ci.yaml --report results/ci/report/report.html
step "the canonical Battus-Z rows equal the paper's to four decimals"
python3 workflow_scripts/check_paper_tables.py results/ci/report/tables/canonical_quality.csv
step "archive"
snakemake --cores 1 archive
