#!/usr/bin/env python
"""Check a produced canonical-quality table against the paper's rows.

    python workflow_scripts/check_paper_tables.py results/ci/report/tables/canonical_quality.csv \
        [--method Battus-Z] [--paper data/published/battus_paper.csv] [--digits 4]

Every (dataset, metric) cell of the chosen method's rows, rounded to four
decimals, must equal the paper's value (data/published/battus_paper.csv,
transcribed from tab:canonical-quality); the six-dataset means are checked
too. Prints a line per mismatch and exits 1 on any, 0 when all agree.
"""

from __future__ import annotations

import argparse
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
                    help="config giving each dataset's label and published key")
    ap.add_argument("--digits", type=int, default=4)
    args = ap.parse_args(argv)

    import yaml

    datasets = yaml.safe_load(Path(args.config).read_text())["datasets"]
    label_to_key = {d["label"]: d["published"] for d in datasets.values() if "published" in d}
    table = pd.read_csv(args.table)
    paper = pd.read_csv(args.paper, comment="#")
    paper = paper[paper["method"] == args.method].set_index("dataset")
    rows = table[table["Method"] == args.method]
    if rows.empty:
        print(f"check: no {args.method!r} rows in {args.table}", file=sys.stderr)
        return 1
    bad = checked = 0
    for _, row in rows.iterrows():
        for col, value in row.items():
            if not isinstance(col, str) or not (col.endswith(" F1") or col.endswith(" NRMSE")):
                continue
            label, metric = col.rsplit(" ", 1)
            if label not in label_to_key:
                continue
            key = label_to_key[label]
            expected = paper.at[key, metric.lower()]
            got = round(float(value), args.digits)
            checked += 1
            if abs(got - round(float(expected), args.digits)) > 10 ** (-args.digits) / 2:
                bad += 1
                d = args.digits
                print(f"MISMATCH {args.method} {key} {metric}: got {got:.{d}f}, paper {expected:.{d}f}")
    if checked == 0:
        print("check: no dataset column matched a published dataset", file=sys.stderr)
        return 1
    print(f"check: {checked - bad}/{checked} {args.method} cells equal the paper to {args.digits} decimals")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
