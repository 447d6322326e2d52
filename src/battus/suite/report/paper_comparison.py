"""The paper's numbers beside this run's (``paper_comparison``): every paper table the run's
canonical and rate-grid experiments cover, cell by cell, with the differences."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .comparison_tables import canonical_panel, rank_columns
from .scores import PAPER_TABLES, dataset_label, method_label, protocol_text, score_of
from .seeds import seed_diff, seed_mean
from .tables import Panel, Table, fmt_value, label_text, long_rows, panel_frame, tidy_frame


def _paper_value(paper: pd.DataFrame, table: str, method: str, dataset: str, metric: str) -> float:
    sel = paper[(paper["table"] == table) & (paper["method"] == method) & (paper["dataset"] == dataset)
                & (paper["metric"] == metric)]
    return float(sel["value"].iloc[0]) if len(sel) else np.nan


def _same(measured, paper: float, digits: int = 4) -> bool:
    return not pd.isna(paper) and round(float(measured), digits) == round(paper, digits)


def table_paper_comparison(spec: dict, scores: dict, paper: pd.DataFrame | None) -> Table:
    """The paper's numbers beside this run's, for every paper table the canonical and rate-grid
    experiments cover: tab:canonical-quality (Battus and Battus-Z cell by cell; every row's rank and
    means), tab:unobserved-quality and both panels of tab:feasibility-sensitivity (PAPER_TABLES).

    Only datasets that map to the paper's (``published:`` in the config) are compared; Δ is measured
    minus paper. Nothing is bold: this table checks a reproduction, it does not rank."""
    exp = spec["experiments"].get("canonical") or {"si": [], "sir": [], "methods": []}
    grid = spec["experiments"].get("rate_grid")
    datasets = [d for d in exp["si"] + exp["sir"] if spec["datasets"][d].get("published")]
    measured = {method_label(spec, m, v): (m, v) for m, v in exp["methods"]}
    paper = paper if paper is not None and "table" in paper else pd.DataFrame(
        columns=["table", "method", "dataset", "metric", "value"])
    in_paper = set(paper.loc[paper["table"] == "canonical-quality", "method"])
    ours = [lab for lab in measured if lab in in_paper] if datasets else []
    records = [score_of(scores, d, m, v) for d in exp["si"] + exp["sir"] for m, v in exp["methods"]]
    if grid:
        records += [score_of(scores, d, grid["method"], v) for d in grid["datasets"] for *_, v in spec["rate_variants"]]
    protocol = protocol_text(records)
    panels, tidy, diffs, equal, total = [], [], [], 0, 0

    def compare(table: str, ids: dict, metric: str, value, reference: float, shown: str = "",
                kind: str = "metric") -> None:
        nonlocal equal, total
        tidy.extend(long_rows({"table": table, **ids}, {f"paper_{metric}": reference, metric: value,
                                                        f"{metric}_minus_paper": seed_diff(value, reference)}))
        total += 1
        if _same(value, reference):
            equal += 1
        else:
            what = " ".join(x for x in (ids["method"], label_text(ids["label"]), shown or metric) if x)
            diffs.append(f"{what} {fmt_value(value, kind)} (paper {fmt_value(reference, kind)})")

    # tab:canonical-quality, cell by cell
    rows = []
    for lab in ours:
        m, v = measured[lab]
        for d in datasets:
            key, s = spec["datasets"][d]["published"], score_of(scores, d, m, v)["hermes"]
            row = {"Method": lab, "Dataset": dataset_label(spec, d)}
            for metric, name in (("f1", "F1"), ("nrmse", "NRMSE")):
                reference = _paper_value(paper, "canonical-quality", lab, key, metric)
                row |= {f"{name} paper": reference, f"{name} measured": s[metric],
                        f"\u0394{name}": seed_diff(s[metric], reference)}
                compare("canonical-quality", {"method": lab, "dataset": d, "label": dataset_label(spec, d)},
                        metric, s[metric], reference, name)
            rows.append(row)
    if rows:
        cols = [c for c in rows[0] if c not in ("Method", "Dataset")]
        panels.append(Panel("tab:canonical-quality, cell by cell", panel_frame(rows), {c: "metric" for c in cols}))

    # tab:canonical-quality, each row's rank and means (the published rows are the paper's own)
    cells = paper[(paper["table"] == "canonical-quality") & paper["metric"].isin(["f1", "nrmse"])]
    published = cells[~cells["method"].isin(ours)].pivot_table(index=["method", "dataset"], columns="metric",
                                                                values="value", dropna=False, sort=False)
    published = published.reset_index().reindex(columns=["method", "dataset", "f1", "nrmse"])
    published["method"] = pd.Categorical(published["method"], list(dict.fromkeys(cells["method"])))
    published = published.sort_values("method", kind="stable").assign(method=lambda f: f["method"].astype(str))
    rows, shifted, ranked = [], [], []
    for model in ("si", "sir"):
        if not ours or not exp[model] or not all(spec["datasets"][d].get("published") for d in exp[model]):
            continue
        panel, _, facts = canonical_panel(spec, scores, exp[model], published, f"{model.upper()} datasets")
        ranked.append(f"{model.upper()} {facts['n_ranked']}")
        frame = panel.frame
        own_rows = frame["Method"].str.removesuffix(" (published)").isin(in_paper)
        metric_cols = [(c, "max" if c.endswith(" F1") else "min") for c in frame.columns
                       if c.endswith((" F1", " NRMSE")) and not c.startswith(("Mean", "\u0394"))]
        paper_rank = rank_columns(frame[own_rows], metric_cols)
        for i, r in frame.iterrows():
            lab = r["Method"].removesuffix(" (published)")
            if lab not in in_paper:
                continue
            row = {"Method": r["Method"], "Panel": model.upper(), "Rank, paper's rows": paper_rank[i]}
            tidy.extend(long_rows({"table": "canonical-quality", "method": lab, "dataset": "all",
                                   "label": model.upper()}, {"mean_rank_among_paper_rows": paper_rank[i]}))
            for metric, name, digits in (("mean_rank", "Rank", 2), ("mean_f1", "Mean F1", 4),
                                         ("mean_nrmse", "Mean NRMSE", 4)):
                reference = _paper_value(paper, "canonical-quality", lab, model.upper(), metric)
                value = r["Rank" if metric == "mean_rank" else name]
                row |= {f"{name} paper": reference, f"{name} here": value, f"\u0394{name}": seed_diff(value, reference)}
                tidy.extend(long_rows({"table": "canonical-quality", "method": lab, "dataset": "all",
                                       "label": model.upper()},
                                      {f"paper_{metric}": reference, metric: value,
                                       f"{metric}_minus_paper": seed_diff(value, reference)}))
                if metric == "mean_rank" and not _same(value, reference, digits) and lab not in ours:
                    shifted.append(f"{lab} {model.upper()} {float(value):.2f} (paper {reference:.2f})")
            rows.append(row)
    if rows:
        df = panel_frame(rows)
        formats = {c: ("rank" if "Rank" in c else "metric") for c in df.columns if c not in ("Method", "Panel")}
        df = df[["Method", "Panel", "Rank paper", "Rank here", "\u0394Rank", "Rank, paper's rows"]
                + [c for c in df.columns if "Mean" in c]]
        panels.append(Panel("tab:canonical-quality, each row's rank and six-dataset means", df, formats))

    # tab:unobserved-quality (means over the 12 datasets) where this run has all 12
    keys = {spec["datasets"][d]["published"] for d in datasets}
    full = len(keys) == 12 and len(datasets) == len(exp["si"] + exp["sir"])
    rows = []
    for lab in ours if full else []:
        m, v = measured[lab]
        for scorer, name in (("hermes", "HERMES-compatible"), ("unobserved", "Unobserved-only")):
            for metric, short in (("f1", "F1"), ("nrmse", "NRMSE")):
                reference = _paper_value(paper, "unobserved-quality", lab, "all", f"{scorer}_mean_{metric}")
                if pd.isna(reference):
                    continue
                value = seed_mean([score_of(scores, d, m, v)[scorer][metric] for d in datasets])
                rows.append({"Method": lab, "Score": f"{name} mean {short}", "Paper": reference, "Measured": value,
                             "\u0394": seed_diff(value, reference)})
                compare("unobserved-quality", {"method": lab, "dataset": "all", "label": ""},
                        f"{scorer}_mean_{metric}", value, reference, f"{name} mean {short}")
    if rows:
        panels.append(Panel("tab:unobserved-quality", panel_frame(rows),
                            {"Paper": "metric", "Measured": "metric", "\u0394": "metric"}))

    # tab:feasibility-sensitivity Panel A: causal-violation rates
    rows = []
    for d in datasets:
        key = spec["datasets"][d]["published"]
        got = {"Truth": score_of(scores, d, *exp["methods"][0])["causal"]["truth"]["rate"]}
        got |= {lab: score_of(scores, d, *measured[lab])["causal"]["prediction"]["rate"] for lab in ours}
        for lab, value in got.items():
            reference = _paper_value(paper, "feasibility-sensitivity-A", lab, key, "violation_percent") / 100
            if pd.isna(reference):
                continue
            rows.append({"Dataset": dataset_label(spec, d), "Method": lab, "Paper (%)": reference,
                         "Measured (%)": value, "\u0394 (points)": value - reference})
            compare("feasibility-sensitivity-A", {"method": lab, "dataset": d, "label": dataset_label(spec, d)},
                    "violation_fraction", value, reference, "violation %", "pct")
    if rows:
        panels.append(Panel("tab:feasibility-sensitivity, Panel A (causal-violation rate)", panel_frame(rows),
                            {"Paper (%)": "pct", "Measured (%)": "pct", "\u0394 (points)": "pct"}))

    # tab:feasibility-sensitivity Panel B: Battus-Z at fixed inference rates, on the paper's datasets
    rows = []
    for bi, br, variant in spec.get("rate_variants", []) if grid and grid["method"] == "battus-z" else []:
        name = f"Battus-Z rates {bi:.2f}/{br:.2f}"
        for d in grid["datasets"]:
            key = spec["datasets"][d].get("published")
            references = {m: _paper_value(paper, "feasibility-sensitivity-B", name, key, m) for m in ("f1", "nrmse")}
            if not key or any(pd.isna(x) for x in references.values()):
                continue
            s = score_of(scores, d, grid["method"], variant)["hermes"]
            row = {"\u03b2^I": bi, "\u03b2^R": br, "Dataset": dataset_label(spec, d)}
            for metric, short in (("f1", "F1"), ("nrmse", "NRMSE")):
                row |= {f"{short} paper": references[metric], f"{short} measured": s[metric],
                        f"\u0394{short}": seed_diff(s[metric], references[metric])}
                compare("feasibility-sensitivity-B", {"method": name, "dataset": d, "label": dataset_label(spec, d)},
                        metric, s[metric], references[metric], short)
            rows.append(row)
    if rows:
        df = panel_frame(rows)
        values = [c for c in df.columns if c not in ("\u03b2^I", "\u03b2^R", "Dataset")]
        panels.append(Panel("tab:feasibility-sensitivity, Panel B (Battus-Z inference rates)", df,
                            {"\u03b2^I": "rate", "\u03b2^R": "rate"} | {c: "metric" for c in values}))

    if not panels:
        df = pd.DataFrame([{"Comparison": "none: these datasets are not the paper's canonical exports"}])
        empty = pd.DataFrame(columns=["table", "method", "dataset", "label", "metric", "value"])  # header only
        return Table("paper_comparison", "The paper's numbers beside this run's", [Panel("", df)],
                     empty, "No dataset of this run maps to one of the paper's (published: in the "
                     f"config), so no number of the paper applies ({PAPER_TABLES}).", protocol)

    note = (f"The paper's numbers ({PAPER_TABLES}, transcribed from its tables) beside this run's; "
            f"\u0394 = measured \u2212 paper. {equal} of {total} compared numbers equal the paper's at its printed "
            "precision (four decimals; violation rates two decimals of a percent).")
    if diffs:
        note += " Different: " + "; ".join(diffs[:40]) + ("; ..." if len(diffs) > 40 else "") + "."
    if ranked:
        note += (f" Ranks: this run ranks {', '.join(ranked)} rows a panel, the paper 11 (its 9 published methods, "
                 "Battus and Battus-Z), so published methods' ranks move though their means are the paper's "
                 "(\"Rank, paper's rows\" ranks only the paper's rows, as the paper does)")
        note += (": " + "; ".join(shifted) + ".") if shifted else "; none moved here."
    return Table("paper_comparison", "The paper's numbers beside this run's", panels, tidy_frame(tidy), note,
                 protocol)
