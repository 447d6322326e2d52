"""Wins, ties and losses under DITTO's protocol (``ditto_win_loss``): each method under test against
each other method, dataset by dataset, a tie decided by the uncertainty each number carries.

A mean over datasets can lead on the strength of one dataset; this table shows what the means of the
DITTO-protocol table hide: on how many datasets a method is ahead, level within the uncertainty, or
behind, and how far its mean lead moves when any one dataset is left out.

Uncertainty. DITTO's paper reports one run per dataset, with no standard deviation (KDD'23, Tables 4
and 5, and its appendix D.3, say nothing of repeated runs), and neither do its DHREC and CRI rows. A
published value is therefore given the tolerance our rerun of DITTO measured against its published
rows (:data:`PUBLISHED_TOLERANCE`: .006 F1, .0047 NRMSE; docs/benchmarks.md); a value of this run is
exact at the printed precision, or its 95% Student-t interval where the dataset repeats over seeds.
Two values tie where their intervals overlap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...baselines import BASELINES
from .comparison_tables import canonical_title
from .scores import DITTO_PUBLISHED, dataset_label, is_control, method_label, protocol_text, published_rows, score_of
from .seeds import seed_diff, seed_mean, seeded
from .tables import Panel, Table, fmt_value, label_text, long_rows, panel_frame, tidy_frame

# How far DITTO's published rows may be from a rerun of them: the largest distance of our rerun (150
# proposal-training steps, docs/benchmarks.md section 5) from its published BA and ER rows.
PUBLISHED_TOLERANCE = {"f1": 0.006, "nrmse": 0.0047}
METRICS = (("f1", "F1", "max"), ("nrmse", "NRMSE", "min"))  # NRMSE under DITTO's convention, as it publishes


def interval(value, tolerance: float = 0.0) -> tuple[float, float]:
    """A value's interval: its 95% interval over seeds for a mean over seeds, else the value at the
    printed precision (four decimals) widened by ``tolerance`` either side."""
    if seeded(value):
        return value.ci95()
    x = round(float(value), 4)
    return x - tolerance, x + tolerance


def outcome(a, b, how: str, tol_a: float = 0.0, tol_b: float = 0.0) -> int:
    """1 where ``a`` beats ``b`` (``how``: ``max`` or ``min`` is better), -1 where it loses, 0 where their
    intervals (:func:`interval`) overlap: a tie within the uncertainty."""
    (a_lo, a_hi), (b_lo, b_hi) = interval(a, tol_a), interval(b, tol_b)
    if a_lo <= b_hi and b_lo <= a_hi:
        return 0
    better = float(a) > float(b) if how == "max" else float(a) < float(b)
    return 1 if better else -1


def win_tie_loss(a: list, b: list, how: str, tol_a: float = 0.0, tol_b: float = 0.0) -> tuple[int, int, int]:
    """(wins, ties, losses) of ``a`` against ``b``, dataset by dataset (NaN on either side: not counted)."""
    got = [outcome(x, y, how, tol_a, tol_b) for x, y in zip(a, b, strict=True) if not (pd.isna(x) or pd.isna(y))]
    return got.count(1), got.count(0), got.count(-1)


def leave_one_out(diffs: list) -> tuple[float, float]:
    """The least and greatest mean of ``diffs`` with any one of them left out (NaN: not counted)."""
    values = np.array([float(x) for x in diffs if not pd.isna(x)])
    if len(values) < 2:
        return np.nan, np.nan
    means = (values.sum() - values) / (len(values) - 1)
    return float(means.min()), float(means.max())


def _range(low: float, high: float) -> str:
    if pd.isna(low):
        return "--"
    return f"{fmt_value(low, 'metric')} \u2026 {fmt_value(high, 'metric')}"


def _entries(spec: dict, scores: dict, published: pd.DataFrame | None, datasets: list[str]) -> list[dict]:
    """The rows compared on one panel's datasets: published ones, then this run's (controls left out)."""
    exp = spec["experiments"]["ditto_protocol"]
    keys = [spec["datasets"][d].get("published") for d in datasets]
    entries = []
    for name, values in published_rows(published, keys).items():
        entries.append({"label": name, "source": "published", "under_test": False,
                        "f1": [f1 for f1, _ in values], "nrmse": [nrmse for _, nrmse in values],
                        "tol": PUBLISHED_TOLERANCE})
    for m, v in exp["methods"]:
        variant = spec["ditto_variants"][f"{m}/{v}"]
        if is_control(spec, m, variant):
            continue
        got = [score_of(scores, d, m, variant)["hermes"] for d in datasets]
        entries.append({"label": method_label(spec, m, variant), "source": "measured", "under_test": m not in BASELINES,
                        "f1": [s["f1"] for s in got], "nrmse": [s["nrmse_ditto"] for s in got],
                        "tol": {"f1": 0.0, "nrmse": 0.0}})
    return entries


def win_loss_panel(spec: dict, scores: dict, published: pd.DataFrame | None, model: str,
                   datasets: list[str]) -> tuple[Panel, list[dict], list[str]]:
    """One model's panel: a row per (method under test, other method); its tidy rows; and the pairs
    whose mean lead changes sign when one dataset is left out."""
    entries = _entries(spec, scores, published, datasets)
    rows, tidy, fragile = [], [], []
    for a in entries:
        if not a["under_test"]:
            continue
        for b in entries:
            if b is a:
                continue
            row = {"Method": a["label"], "Against": f"{b['label']} (published)" if b["source"] == "published"
                   else b["label"]}
            ids = {"model": model, "method": a["label"], "against": b["label"], "against_source": b["source"]}
            aggregate = {}
            for key, name, how in METRICS:
                wins, ties, losses = win_tie_loss(a[key], b[key], how, a["tol"][key], b["tol"][key])
                diffs = [seed_diff(x, y) for x, y in zip(a[key], b[key], strict=True)
                         if not (pd.isna(x) or pd.isna(y))]
                mean = seed_mean(diffs) if diffs else np.nan
                low, high = leave_one_out(diffs)
                row |= {f"{name} W": wins, f"{name} T": ties, f"{name} L": losses, f"Mean \u0394{name}": mean}
                if len(datasets) > 1:
                    row[f"\u0394{name} w/o one dataset"] = _range(low, high)
                aggregate |= {f"{key}_wins": wins, f"{key}_ties": ties, f"{key}_losses": losses,
                              f"mean_{key}_difference": mean, f"mean_{key}_difference_without_one_min": low,
                              f"mean_{key}_difference_without_one_max": high}
                # the means without one dataset bracket the mean: one reaching zero is a sign one dataset decides
                if not pd.isna(low) and round(float(mean), 4) != 0 and low <= 0 <= high:
                    kept = [d for d, x, y in zip(datasets, a[key], b[key], strict=True)
                            if not (pd.isna(x) or pd.isna(y))]
                    values = np.array([float(x) for x in diffs])
                    without = (values.sum() - values) / (len(values) - 1)
                    k = int(np.argmin(without) if float(mean) > 0 else np.argmax(without))
                    fragile.append(f"{label_text(a['label'])} against {label_text(b['label'])} on {name}, "
                                   f"{model.upper()} (mean \u0394 {fmt_value(mean, 'metric')}, "
                                   f"{fmt_value(without[k], 'metric')} without "
                                   f"{label_text(dataset_label(spec, kept[k]))})")
                for d, x, y in zip(datasets, a[key], b[key], strict=True):
                    if pd.isna(x) or pd.isna(y):
                        continue
                    tidy += long_rows({**ids, "dataset": d, "label": dataset_label(spec, d)},
                                      {f"{key}_difference": seed_diff(x, y),
                                       f"{key}_outcome": outcome(x, y, how, a["tol"][key], b["tol"][key])})
            rows.append(row)
            tidy += long_rows({**ids, "dataset": "all", "label": "All"}, aggregate)
    df = panel_frame(rows) if rows else pd.DataFrame(columns=["Method", "Against"])
    formats = {c: "int" for c in df.columns if c[-2:] in (" W", " T", " L")}
    formats |= {c: "metric" for c in df.columns if c.startswith("Mean \u0394")}
    starts = [i for i in range(1, len(rows)) if rows[i]["Method"] != rows[i - 1]["Method"]]
    title = f"{model.upper()} datasets ({len(datasets)})"
    return Panel(title, df, formats, rules_before=starts), tidy, fragile


def table_ditto_win_loss(spec: dict, scores: dict, published: pd.DataFrame | None = None) -> Table:
    """Per-dataset wins, ties and losses under DITTO's protocol (module doc), one panel per model."""
    exp = spec["experiments"]["ditto_protocol"]
    panels, tidy, fragile, records, n_published = [], [], [], [], 0
    for model in ("si", "sir"):
        datasets = exp[model]
        if not datasets:
            continue
        panel, rows, weak = win_loss_panel(spec, scores, published, model, datasets)
        panels.append(panel)
        tidy += rows
        fragile += weak
        n_published += sum(1 for r in rows if r.get("against_source") == "published")
        records += [score_of(scores, d, m, spec["ditto_variants"][f"{m}/{v}"]) for d in datasets
                    for m, v in exp["methods"]]
    tol = PUBLISHED_TOLERANCE
    note = ("Each method under test against each other method, dataset by dataset: W, T, L count the datasets "
            "where the method is ahead, level within the uncertainty, or behind, on macro-F1 and on NRMSE "
            "under DITTO's convention (as DITTO publishes it). \u0394 is the method's value minus the other's "
            "(\u0394F1 > 0 and \u0394NRMSE < 0 favour the method); 'w/o one dataset' is the least and "
            "greatest mean \u0394 with any one dataset left out, so a mean lead that rests on one dataset shows "
            "as a range reaching across zero. Ties: two values tie where their intervals overlap. This run's "
            "values are exact at four decimals, or their 95% interval over seeds where a dataset repeats over "
            "seeds.")
    if n_published:
        note += (f" Published rows ({DITTO_PUBLISHED}: DITTO's own, with its DHREC and CRI) are single runs "
                 "with no published standard deviation (DITTO's paper reports none), so each carries the "
                 f"stated tolerance \u00b1{fmt_value(tol['f1'], 'metric')} F1 and \u00b1"
                 f"{fmt_value(tol['nrmse'], 'metric')} NRMSE: how far our rerun of DITTO came from its "
                 "published rows (docs/benchmarks.md).")
    if fragile:
        note += (" Mean differences whose sign one dataset decides (without it the mean \u0394 reaches zero or "
                 "changes sign): " + "; ".join(fragile) + ".")
    else:
        note += " No mean difference changes sign when any one dataset is left out."
    note += (" Controls are not compared; the baselines are compared as opponents, not as methods under "
             "test.")
    datasets = exp["si"] + exp["sir"]
    return Table("ditto_win_loss", canonical_title(spec, datasets, "Wins, ties and losses under DITTO's protocol"),
                 panels, tidy_frame(tidy), note, protocol_text(records, conventions=("ditto",), schedule="final"))
