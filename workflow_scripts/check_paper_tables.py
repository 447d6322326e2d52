#!/usr/bin/env python
"""Check a produced canonical-quality table against the paper's rows.

    python workflow_scripts/check_paper_tables.py results/ci/report/tables/canonical_quality.csv \
        [--method Battus-Z] [--paper data/published/battus_paper.csv] [--digits 4]

The table is the workflow's tidy CSV (battus.suite.report.tables: one row per number,
columns ``model, method, source, dataset, label, metric, value``). Every
(dataset, metric) cell of the paper's rows for the chosen method
(data/published/battus_paper.csv, transcribed from tab:canonical-quality)
must be in the table, measured by the run, and equal the paper's value when
rounded to four decimals. Prints a line per mismatch or missing cell and exits
1 on any, 0 when all agree.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", help="canonical_quality.csv produced by the workflow")
    ap.add_argument("--method", default="Battus-Z", help="row label to check (default: Battus-Z)")
    ap.add_argument("--paper", default=str(ROOT / "data/published/battus_paper.csv"))
    ap.add_argument("--config", default=str(ROOT / "config/paper.yaml"),
                    help="config giving each dataset's published key")
    ap.add_argument("--digits", type=int, default=4)
    args = ap.parse_args(argv)

    import yaml

    datasets = yaml.safe_load(Path(args.config).read_text())["datasets"]
    published_key = {name: d["published"] for name, d in datasets.items() if "published" in d}
    table = pd.read_csv(args.table)
    missing_columns = {"method", "source", "dataset", "metric", "value"} - set(table.columns)
    if missing_columns:
        print(f"check: {args.table} is not the tidy table (no {sorted(missing_columns)} columns)", file=sys.stderr)
        return 1
    measured = table[(table["method"] == args.method) & (table["source"] == "measured")
                     & table["metric"].isin(["f1", "nrmse"]) & table["dataset"].isin(list(published_key))]
    if measured.empty:
        print(f"check: no measured {args.method!r} cells of a published dataset in {args.table}", file=sys.stderr)
        return 1
    got = {(published_key[r.dataset], r.metric): float(r.value) for r in measured.itertuples()}
    paper = pd.read_csv(args.paper, comment="#")
    paper = paper[paper["method"] == args.method]
    bad = checked = 0
    d = args.digits
    for row in paper.itertuples():
        for metric in ("f1", "nrmse"):
            expected = round(float(getattr(row, metric)), d)
            value = got.get((row.dataset, metric))
            if value is None or math.isnan(value):
                bad += 1
                print(f"MISSING {args.method} {row.dataset} {metric}: not in the table, paper {expected:.{d}f}")
                continue
            checked += 1
            if abs(round(value, d) - expected) > 10 ** (-d) / 2:
                bad += 1
                print(f"MISMATCH {args.method} {row.dataset} {metric.upper()}: got {value:.{d}f}, "
                      f"paper {expected:.{d}f}")
    total = 2 * len(paper)
    print(f"check: {total - bad}/{total} {args.method} cells equal the paper to {d} decimals")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
