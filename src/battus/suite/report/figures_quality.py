"""Quality figures of the canonical experiment: per-dataset dot plot, method x dataset heat map,
per-dataset wins and losses, and causal violations against F1.

Axes zoom to the methods' values and say so; a control (truth, random) whose value lies outside
the zoom is drawn in a band at the axis' edge with its value printed, so that it never vanishes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .figures import _figure, _text_color, canonical_series, is_battus, method_color, method_colors
from .scores import dataset_label, is_control, method_label, score_of
from .seeds import seed_mean, seed_sd, seeded
from .tables import label_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METRICS = (("f1", "macro-F1", "higher"), ("nrmse", "NRMSE", "lower"))
CONTROL_MARKERS = {"truth/default": "*", "random/default": "X"}


def _canonical_datasets(spec: dict) -> list[str]:
    exp = spec["experiments"]["canonical"]
    return exp["si"] + exp["sir"]


def _zoom(values: list[float]) -> tuple[float, float]:
    """Axis limits around ``values`` with a margin (the zoom the figure states)."""
    values = [v for v in values if np.isfinite(v)]
    lo, hi = min(values), max(values)
    pad = max(0.08 * (hi - lo), 0.005)
    return lo - pad, hi + pad


def figure_canonical_bars(spec: dict, scores: dict, published: pd.DataFrame | None) -> Figure:
    """Per-dataset F1 and NRMSE of every method as dots (one column of dots per dataset), the axes
    zoomed to the methods' values; controls off the zoom sit in a band at the edge, value printed."""
    from matplotlib.ticker import MaxNLocator

    datasets = _canonical_datasets(spec)
    series = canonical_series(spec, scores, published, datasets)
    colors = method_colors(list(series))
    width = max(7.5, 0.95 * len(datasets) + 3.2)
    fig = _figure(width, 7.4)
    axes = fig.subplots(2, 1, sharex=True)
    x = np.arange(len(datasets))
    n = len(series)
    offsets = (np.arange(n) - (n - 1) / 2) * min(0.8 / max(1, n), 0.12)
    spread = any(seeded(v) for s in series.values() for pair in s["values"] for v in pair)
    for i, (ax, (_metric, name, better)) in enumerate(zip(axes, METRICS, strict=True)):
        lo, hi = _zoom([float(p[i]) for s in series.values() if not s["control"] for p in s["values"]])
        band = 0.14 * (hi - lo)
        off_scale = {"above": False, "below": False}
        for offset, (key, s) in zip(offsets, series.items(), strict=True):
            ys = np.array([float(p[i]) for p in s["values"]])
            yerr = [seed_sd(p[i]) for p in s["values"]] if spread else None
            style = {"color": colors[key], "label": s["label"], "ls": "none", "ms": 6}
            if s["control"]:
                style.update(marker=CONTROL_MARKERS.get(key, "D"), mfc="white", mew=1.4, ms=8)
            else:
                style.update(marker="s" if s["published"] else "o")
            inside = (ys >= lo) & (ys <= hi)
            shown = np.where(inside, ys, np.nan)
            ax.errorbar(x + offset, shown, yerr=yerr, capsize=2, elinewidth=0.8, **style)
            for j in np.flatnonzero(~inside & np.isfinite(ys)):
                above = ys[j] > hi
                off_scale["above" if above else "below"] = True
                y = hi + band / 2 if above else lo - band / 2
                ax.plot(x[j] + offset, y, marker=style["marker"], color=colors[key], mfc="white", mew=1.4,
                        ms=8, clip_on=False)
                value = f"{ys[j]:.2f}".lstrip("0") if ys[j] > 0 else "0"
                ax.annotate(("\u2191" if above else "\u2193") + value, (x[j] + offset, y), xytext=(6, 0),
                            textcoords="offset points", fontsize=7, va="center", color="0.2")
        # a band beyond an edge with off-scale controls, set off by a dashed line
        ax.set_ylim(lo - band * off_scale["below"], hi + band * off_scale["above"])
        for edge, side in ((lo, "below"), (hi, "above")):
            if off_scale[side]:
                ax.axhline(edge, color="0.6", lw=0.6, ls="--")
        ticks = [t for t in MaxNLocator(6).tick_values(lo, hi) if lo <= t <= hi]
        ax.set_yticks(ticks)
        ax.set_ylabel(f"{name} ({better} is better)\naxis zoomed: {lo:.2f}\u2013{hi:.2f}")
        ax.grid(axis="y", color="0.9", lw=0.6)
        ax.set_axisbelow(True)
    for gap in x[:-1] + 0.5:
        for ax in axes:
            ax.axvline(gap, color="0.85", lw=0.6)
    axes[1].set_xticks(x, [label_text(dataset_label(spec, d)) for d in datasets], rotation=35, ha="right")
    axes[1].set_xlim(-0.5, len(datasets) - 0.5)
    handles, labels = axes[0].get_legend_handles_labels()
    # as many columns as the width holds (long labels: controls, plug-ins)
    fig.legend(handles, labels, loc="outside lower center", ncol=max(1, min(4, len(labels), int(width // 2.7))),
               fontsize=8)
    note = "axes zoomed to the methods; off-scale controls past the dashed lines, value printed"
    fig.suptitle("Quality per dataset and method" + (" (error bars: \u00b11 sd over seeds)" if spread else "")
                 + f"\n{note}", fontsize=10)
    return fig


def figure_quality_heatmap(spec: dict, scores: dict, published: pd.DataFrame | None) -> Figure:
    """Method x dataset heat maps of F1 and NRMSE: the colour scale spans the methods (controls are
    grey cells below a line, their values printed), and every cell prints its value."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    datasets = _canonical_datasets(spec)
    series = canonical_series(spec, scores, published, datasets, all_published=True)
    order = [k for k, s in series.items() if not s["control"]] + [k for k, s in series.items() if s["control"]]
    controls = sum(series[k]["control"] for k in order)
    nrows, ncols = len(order), len(datasets)
    fig = _figure(max(7.0, 3.2 + 0.62 * ncols), 1.6 + 2 * (0.3 * nrows + 0.9))  # titles fit with few datasets
    axes = fig.subplots(2, 1, sharex=True)
    spread = any(seeded(v) for s in series.values() for pair in s["values"] for v in pair)
    for i, (ax, (_metric, name, better)) in enumerate(zip(axes, METRICS, strict=True)):
        grid = np.array([[float(p[i]) for p in series[k]["values"]] for k in order])
        methods = grid[: nrows - controls]
        norm = Normalize(np.nanmin(methods), np.nanmax(methods))
        cmap = colormaps["viridis" if better == "higher" else "viridis_r"]
        shown = np.ma.masked_invalid(np.where(np.arange(nrows)[:, None] < nrows - controls, grid, np.nan))
        cmap = cmap.with_extremes(bad="#eeeeee")
        im = ax.imshow(shown, cmap=cmap, norm=norm, aspect="auto")
        for r in range(nrows):
            for c in range(ncols):
                value = grid[r, c]
                text = "n/r" if not np.isfinite(value) else f"{value:.4f}".replace("0.", ".", 1)
                control = r >= nrows - controls
                color = "0.25" if control or not np.isfinite(value) else _text_color(cmap(norm(value)))
                ax.text(c, r, text, ha="center", va="center", fontsize=7, color=color,
                        style="italic" if control else "normal")
        if controls:
            ax.axhline(nrows - controls - 0.5, color="black", lw=1.2)
        labels = [series[k]["label"] for k in order]  # a control's label says it is one
        ax.set_yticks(range(nrows), labels, fontsize=8)
        for tick, k in zip(ax.get_yticklabels(), order, strict=True):
            if series[k]["control"]:
                tick.set_color("0.35")
                tick.set_style("italic")
        ax.set_title(f"{name} ({better} is better); colours span the methods, controls grey below the line",
                     fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.9, pad=0.01)
    axes[1].set_xticks(range(ncols), [label_text(dataset_label(spec, d)) for d in datasets], rotation=35,
                       ha="right")
    fig.suptitle("Quality of every method on every dataset" + (" (cells: means over seeds)" if spread else ""))
    return fig


def _outcome(a, b, higher: bool) -> int:
    """+1 if ``a`` beats ``b``, -1 if it loses, 0 for a tie: means over seeds within one sd of each
    other (mean +- sd overlap), else equal to four decimals (the tables' rule)."""
    if not (np.isfinite(float(a)) and np.isfinite(float(b))):
        return 2  # not comparable (a value not reported)
    if seeded(a) or seeded(b):
        if abs(float(a) - float(b)) <= seed_sd(a) + seed_sd(b):
            return 0
    elif round(float(a), 4) == round(float(b), 4):
        return 0
    better = float(a) > float(b) if higher else float(a) < float(b)
    return 1 if better else -1


def win_loss_counts(spec: dict, scores: dict, published: pd.DataFrame | None) -> pd.DataFrame:
    """Per-dataset wins, ties and losses of each Battus method against each other method (controls
    excluded), on F1 and NRMSE: one row per (method, other, metric)."""
    datasets = _canonical_datasets(spec)
    series = canonical_series(spec, scores, published, datasets, all_published=True)
    rows = []
    for key, s in series.items():
        if s["control"] or s["published"] or not is_battus(s["method"]):
            continue
        for other_key, other in series.items():
            if other_key == key or other["control"]:
                continue
            for i, (metric, _, better) in enumerate(METRICS):
                outcomes = [_outcome(a[i], b[i], better == "higher")
                            for a, b in zip(s["values"], other["values"], strict=True)]
                rows.append({"method": s["label"], "other": other["label"], "metric": metric,
                             "wins": outcomes.count(1), "ties": outcomes.count(0), "losses": outcomes.count(-1)})
    return pd.DataFrame(rows, columns=["method", "other", "metric", "wins", "ties", "losses"])


WIN_COLORS = {"wins": "#2166ac", "ties": "#bdbdbd", "losses": "#d6604d"}


def figure_win_loss(spec: dict, scores: dict, published: pd.DataFrame | None) -> Figure:
    """Stacked bars of per-dataset wins, ties and losses of each Battus method against each other
    method, F1 and NRMSE side by side; counts printed in the segments."""
    counts = win_loss_counts(spec, scores, published)
    pairs = list(dict.fromkeys(zip(counts["method"], counts["other"], strict=True)))
    n_datasets = len(_canonical_datasets(spec))
    fig = _figure(11, 1.9 + 0.3 * len(pairs))
    axes = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(pairs))
    seeded_any = any(seeded(v) for s in canonical_series(spec, scores, published, _canonical_datasets(spec)).values()
                     for pair in s["values"] for v in pair)
    for ax, (metric, name, better) in zip(axes, METRICS, strict=True):
        sub = counts[counts["metric"] == metric].set_index(["method", "other"]).loc[pairs]
        left = np.zeros(len(pairs))
        for outcome, color in WIN_COLORS.items():
            widths = sub[outcome].to_numpy(float)
            ax.barh(y, widths, left=left, color=color, label=outcome, height=0.72)
            for yy, ll, ww in zip(y, left, widths, strict=True):
                if ww:
                    ax.text(ll + ww / 2, yy, f"{int(ww)}", ha="center", va="center", fontsize=8,
                            color="white" if outcome != "ties" else "black")
            left += widths
        ax.set_xlim(0, n_datasets)
        ax.set_xticks(range(0, n_datasets + 1, max(1, n_datasets // 6)))
        ax.set_xlabel(f"datasets (of {n_datasets})")
        ax.set_title(f"{name} ({better} is better)", fontsize=10)
    # one group of rows per Battus method, set off by a line
    methods = [m for m, _ in pairs]
    for k in range(1, len(pairs)):
        if methods[k] != methods[k - 1]:
            for ax in axes:
                ax.axhline(k - 0.5, color="black", lw=0.8)
    axes[0].set_yticks(y, [f"{m}  vs  {o}" for m, o in pairs], fontsize=8)
    axes[0].invert_yaxis()
    tie = ("tie: means over seeds within one sd of each other" if seeded_any
           else "tie: equal to four decimals, as in the tables")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, [f"{lab} of the Battus method" if lab != "ties" else "ties" for lab in labels],
               loc="outside lower center", ncol=3, fontsize=8)
    fig.suptitle(f"Per-dataset wins, ties and losses of each Battus method ({tie})", fontsize=10)
    return fig


def figure_cv_vs_f1(spec: dict, scores: dict, published: pd.DataFrame | None) -> Figure:
    """Event-weighted causal violations against mean F1, one point per method and model.

    HERMES's published per-dataset F1 gives its mean as a horizontal line: its
    sampler enforces feasibility, but no violation rate is published, so it is
    not drawn as a point. The truth's own violation rate is a vertical line.
    """
    exp = spec["experiments"]["canonical"]
    fig = _figure(8.4, 4.6)
    ax = fig.subplots()
    markers = {"si": "o", "sir": "s"}
    colors = method_colors([f"{m}/{v}" for m, v in exp["methods"]])
    for model in ("si", "sir"):
        datasets = exp.get(model, [])
        if not datasets:
            continue
        truths = [score_of(scores, d, *exp["methods"][0])["causal"]["truth"] for d in datasets]
        truth_cv = sum(t["violations"] for t in truths) / max(1, sum(t["events"] for t in truths))
        ax.axvline(100 * truth_cv, color="grey", lw=0.8, ls=":" if model == "si" else "-.",
                   label=f"truth {model.upper()} violation rate")
        for m, v in exp["methods"]:
            runs = [score_of(scores, d, m, v) for d in datasets]
            violations = sum(r["causal"]["prediction"]["violations"] for r in runs)
            events = sum(r["causal"]["prediction"]["events"] for r in runs)
            f1 = seed_mean([r["hermes"]["f1"] for r in runs])
            label = f"{label_text(method_label(spec, m, v))} ({model.upper()})"
            # controls hollow: the truth's SI and SIR points coincide at (0, 1), both outlines show
            control = is_control(spec, m, v)
            ax.scatter(100 * violations / max(1, events), f1, marker=markers[model],
                       facecolors="none" if control else colors[f"{m}/{v}"], edgecolors=colors[f"{m}/{v}"],
                       linewidths=1.5, s=60 if control else 46, label=label)
            if seeded(f1):  # mean F1 over seeds: one sd over seeds
                ax.errorbar(100 * violations / max(1, events), float(f1), yerr=f1.sd, color=colors[f"{m}/{v}"],
                            capsize=3, lw=0.8)
    if published is not None:
        hermes = published[published["method"] == "HERMES"].set_index("dataset")
        keys = [spec["datasets"][d].get("published") for d in exp.get("si", []) + exp.get("sir", [])]
        values = [hermes.at[k, "f1"] for k in keys if k and k in hermes.index]
        if values:
            ax.axhline(float(np.mean(values)), color=method_color("HERMES"), lw=0.8, ls="--",
                       label="HERMES published mean F1")
    ax.margins(x=0.08, y=0.12)
    ax.set_xlabel("event-weighted causal violations (% of onsets)")
    ax.set_ylabel("mean macro-F1 (HERMES-compatible)")
    # outside the axes: inside, it covered points
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.set_title("Graph-causal feasibility against accuracy")
    return fig
