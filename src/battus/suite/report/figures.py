"""The paper's figures (PNG), drawn with matplotlib (imported when a figure is drawn).

One palette keyed by run (:func:`method_color`), so a method has the same colour in every
configuration. Axis rule: quality axes zoom to the data and say so (dot plots, not bars, so that no
length is read as a value); a control's value outside the zoom is drawn at the axis' edge with its
value printed. Where a line has few points its ticks sit at the points' values. Controls (truth,
random) are never timed as methods, and a plug-in's self-reported time is marked apart from the
times Battus measured. Legends sit outside the plotting area and every label inside the canvas
(``layout="constrained"``; tests/test_figures.py checks).

This module: the palette, the shared helpers and the sensitivity, calibration and drawing
figures; :mod:`.figures_quality` (per-dataset quality, heat map, wins and losses) and
:mod:`.figures_time` (run time) hold the others.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .scores import dataset_label, is_control, method_label, score_of
from .seeds import seed_mean, seed_sd, seeded
from .tables import fmt_value, label_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

METHOD_COLORS = {
    "battus/default": "#1f77b4",
    "battus-z/default": "#ff7f0e",
    "battus-z/causal": "#2ca02c",
    "HERMES": "#444444",
    "truth/default": "#8c564b",
    "random/default": "#bcbd22",
    "observed-copy/default": "#e377c2",
    "graph-distance/default": "#17becf",
}
_SPARE_COLORS = ("#d62728", "#9467bd", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
                 "#f7b6d2", "#dbdb8d", "#9edae5", "#7f7f7f")
DPI = 130
# at most this many points on a line: its ticks sit at the points' values
FEW_POINTS = 8


def method_color(key: str) -> str:
    """The colour of a run (``"method/variant"``) or a published method (its name) in every figure."""
    if key in METHOD_COLORS:
        return METHOD_COLORS[key]
    return _SPARE_COLORS[zlib.crc32(key.encode()) % len(_SPARE_COLORS)]


def method_colors(keys: list[str]) -> dict[str, str]:
    """Colours of the runs one figure shows: :func:`method_color`, except that a key-chosen colour
    already taken in this figure moves to the next free spare (in key order, so not list order)."""
    colors = {k: METHOD_COLORS[k] for k in keys if k in METHOD_COLORS}
    for key in sorted(k for k in keys if k not in METHOD_COLORS):
        start = _SPARE_COLORS.index(method_color(key))
        free = [c for i in range(len(_SPARE_COLORS))
                if (c := _SPARE_COLORS[(start + i) % len(_SPARE_COLORS)]) not in colors.values()]
        colors[key] = free[0] if free else method_color(key)
    return colors


def method_name(spec: dict, m: str) -> str:
    """A method's name in words (``Battus-Z``), never its config id, whatever variant a run used."""
    from ..experiments import BUILTIN_LABELS

    return label_text(BUILTIN_LABELS.get(m) or spec["labels"].get(f"{m}/default") or m)


def is_battus(m: str) -> bool:
    """One of Battus's own methods (Battus, Battus-Z and their variants)."""
    from ..experiments import METHOD_LABELS

    return m in METHOD_LABELS


def is_plugin(m: str) -> bool:
    """A plug-in method (config ``methods:``): its time is what it reports, not measured by Battus."""
    from ..experiments import BUILTIN_LABELS

    return m not in BUILTIN_LABELS


def canonical_series(spec: dict, scores: dict, published: pd.DataFrame | None, datasets: list[str],
                     all_published: bool = False) -> dict[str, dict]:
    """The canonical experiment's runs and published rows, each a series over ``datasets``:
    colour key -> ``{"label", "values": [(f1, nrmse)], "control", "published", "method"}``; runs in
    config order, then the published methods (HERMES only unless ``all_published``)."""
    from .scores import published_rows

    exp = spec["experiments"]["canonical"]
    series = {}
    for m, v in exp["methods"]:
        values = [(score_of(scores, d, m, v)["hermes"]["f1"], score_of(scores, d, m, v)["hermes"]["nrmse"])
                  for d in datasets]
        series[f"{m}/{v}"] = {"label": label_text(method_label(spec, m, v)), "values": values,
                              "control": is_control(spec, m, v), "published": False, "method": m}
    rows = published_rows(published, [spec["datasets"][d].get("published") for d in datasets])
    for name, values in rows.items():
        if all_published or name == "HERMES":
            series[name] = {"label": f"{name} (published)", "values": values, "control": False,
                            "published": True, "method": name}
    return series


def few_point_ticks(ax, values: list[float], fmt: str = "{:.2f}") -> None:
    """Ticks at the data's values on the x axis where a line has few points."""
    values = sorted(set(values))
    if len(values) <= FEW_POINTS:
        ax.set_xticks(values, [fmt.format(x) for x in values])


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figure(width: float, height: float) -> Figure:
    # constrained layout keeps every label, tick and outside legend inside the canvas
    return _plt().figure(figsize=(width, height), layout="constrained")


def save_figure(fig: Figure, out: str | Path) -> None:
    fig.savefig(out, dpi=DPI)
    _plt().close(fig)


def _text_color(rgba) -> str:
    """Black or white, whichever contrasts more with a cell colour (WCAG relative luminance)."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgba[:3])
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "black" if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else "white"


def _spread(values: list[float], gap: float) -> list[float]:
    """Positions near ``values``, in the same order, at least ``gap`` apart (end labels)."""
    order = np.argsort(values, kind="stable")
    placed = np.asarray(values, float)[order].copy()
    for i in range(1, len(placed)):
        placed[i] = max(placed[i], placed[i - 1] + gap)
    # centre the shifted block on the original values
    placed -= (placed.mean() - np.mean(values)) if len(placed) else 0.0
    out = np.empty_like(placed)
    out[order] = placed
    return out.tolist()


def figure_tau_curves(spec: dict, scores: dict) -> Figure:
    exp = spec["experiments"]["tau"]
    method_key = f"{exp['method']}/default"
    method = method_name(spec, exp["method"])
    taus = [float(t) for t in spec["tau_variants"]]
    fig = _figure(10, 4.6)
    axes = fig.subplots(1, 2)
    for ax, metric, name in ((axes[0], "f1", "macro-F1"), (axes[1], "nrmse", "NRMSE")):
        curves = []
        for d in exp["datasets"]:
            ys = [score_of(scores, d, exp["method"], v)["hermes"][metric] for v in spec["tau_variants"].values()]
            curves.append(ys)
            ax.plot(taus, ys, color="0.65", lw=0.8, marker=".")
        mean = [seed_mean(column) for column in zip(*curves, strict=True)]
        if any(seeded(y) for y in mean):  # repeated over seeds: error bars of one sd over seeds
            ax.errorbar(taus, [float(y) for y in mean], yerr=[seed_sd(y) for y in mean], capsize=3,
                        color=method_color(method_key), lw=2.5, marker="o",
                        label=f"{method}, mean over datasets (bars: \u00b11 sd over seeds)")
        else:
            ax.plot(taus, mean, color=method_color(method_key), lw=2.5, marker="o",
                    label=f"{method}, mean over datasets")
        ax.axvline(0.65, color="black", ls="--", lw=1, label="reported \u03c4 = .65")
        ax.set_xlabel("decode threshold \u03c4")
        few_point_ticks(ax, taus)
        ax.set_ylabel(f"{name} ({'higher' if metric == 'f1' else 'lower'} is better)")
        # end labels right of the last point, pushed apart so they do not overlap
        low, high = ax.get_ylim()
        ends = _spread([c[-1] for c in curves], gap=0.055 * (high - low))
        for d, c, y in zip(exp["datasets"], curves, ends, strict=True):
            ax.annotate(label_text(dataset_label(spec, d)), (taus[-1], c[-1]), xytext=(8, y),
                        textcoords=("offset points", "data"), fontsize=8, color="0.3", va="center",
                        annotation_clip=False)
        ax.set_ylim(min(low, min(ends)), max(high, max(ends)))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=8)
    fig.suptitle(f"How {method}'s quality depends on its decode threshold \u03c4 (grey: one dataset each)")
    return fig


def figure_rate_grid(spec: dict, scores: dict) -> Figure:
    exp = spec["experiments"]["rate_grid"]
    method = method_name(spec, exp["method"])
    bis, brs = exp["beta_i"], exp["beta_r"]
    nd = len(exp["datasets"])
    fig = _figure(max(6.4, 3.8 * nd + 0.4), 6.6)  # the title's width with one dataset
    axes = fig.subplots(2, nd, squeeze=False)
    variants = {(bi, br): v for bi, br, v in spec["rate_variants"]}
    for j, d in enumerate(exp["datasets"]):
        for i, (metric, cmap) in enumerate((("f1", "viridis"), ("nrmse", "viridis_r"))):
            grid = np.array([[score_of(scores, d, exp["method"], variants[(bi, br)])["hermes"][metric] for br in brs]
                             for bi in bis])
            ax = axes[i][j]
            im = ax.imshow(grid, cmap=cmap, origin="lower")
            for a in range(len(bis)):
                for b in range(len(brs)):
                    ax.text(b, a, fmt_value(grid[a, b], "metric"), ha="center", va="center", fontsize=8,
                            color=_text_color(im.cmap(im.norm(grid[a, b]))))
            ax.set_xticks(range(len(brs)), [fmt_value(x, "rate") for x in brs])
            ax.set_yticks(range(len(bis)), [fmt_value(x, "rate") for x in bis])
            ax.set_xlabel(r"$\beta_R$ used for inference")
            ax.set_ylabel(r"$\beta_I$ used for inference")
            ax.set_title(f"{label_text(dataset_label(spec, d))} {'macro-F1' if metric == 'f1' else 'NRMSE'}",
                         fontsize=9)
            fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(f"{method}'s quality when it infers with other rates ($\\beta_I$, $\\beta_R$)")
    return fig


def figure_reliability(spec: dict, scores: dict) -> Figure:
    """Reliability diagrams of P(I or R), one line per method pooled over the datasets, with the diagonal."""
    exp = spec["experiments"]["calibration"]
    fig = _figure(6.5, 5)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="perfectly calibrated")
    keys = [f"{m}/{v}" for m, v in exp["methods"]]
    colors = method_colors(keys)
    for (m, v), key in zip(exp["methods"], keys, strict=True):
        # pooled over the datasets and, where repeated, over every seed's run
        records = [r for d in exp["datasets"]
                   for r in score_of(scores, d, m, v).get("seeds", [score_of(scores, d, m, v)])]
        pooled = pooled_reliability([r["calibration"]["reliability"] for r in records])
        seen = pooled["count"] > 0
        ax.plot(pooled["mean_predicted"][seen], pooled["observed_frequency"][seen], marker="o", color=colors[key],
                label=label_text(method_label(spec, m, v)))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("predicted P(I or R), bin mean")
    ax.set_ylabel("observed frequency of I or R")
    ax.set_title(f"Reliability on unobserved frames ({len(exp['datasets'])} datasets pooled)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return fig


def figure_history_drawing(spec: dict, dataset: str, history_path: str | Path, predictions: list,
                           labels: list, max_vertices: int = 120) -> Figure:
    """Truth and reconstructions as frame-by-vertex state rasters (the paper's Fig. 2 idea)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.ticker import MaxNLocator

    from ...io import read_history, read_prediction

    problem = read_history(history_path, truth="required")
    truth = problem.truth
    onset = np.where((truth != 0).any(axis=0), np.argmax(truth != 0, axis=0), truth.shape[0])
    rng = np.random.default_rng(0)
    picked = np.sort(rng.choice(problem.n, size=min(max_vertices, problem.n), replace=False))
    order = picked[np.argsort(onset[picked], kind="stable")]
    cmap = ListedColormap(["#d9e6f2", "#d62728", "#7f7f7f"])
    panels = [("truth", truth)]
    panels += [(label_text(lab), read_prediction(p)["states"]) for lab, p in zip(labels, predictions, strict=True)]
    fig = _figure(3.2 * len(panels), 4.8)
    axes = np.atleast_1d(fig.subplots(1, len(panels), sharey=True))
    for ax, (title, states) in zip(axes, panels, strict=True):
        ax.imshow(states[:, order].T, aspect="auto", cmap=cmap, vmin=0, vmax=2, interpolation="nearest")
        for t in problem.observations.times:
            ax.axvline(t, color="k", lw=0.8, ls=":")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # frames are whole numbers
        ax.set_xlabel("frame t (dotted: observed)")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel(f"{len(order)} vertices, sorted by true onset")
    fig.suptitle(f"{label_text(dataset_label(spec, dataset))}: S (light), I (red), R (grey)")
    return fig


def pooled_reliability(records: list[dict]) -> dict:
    """One reliability diagram from several (one per dataset): counts summed, means weighted by count."""
    count = np.zeros(records[0]["bins"])
    predicted, observed = np.zeros_like(count), np.zeros_like(count)
    for r in records:
        c = np.asarray(r["count"], dtype=float)
        count += c
        predicted += c * np.nan_to_num(np.asarray(r["mean_predicted"], dtype=float))
        observed += c * np.nan_to_num(np.asarray(r["observed_frequency"], dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"count": count, "mean_predicted": predicted / count, "observed_frequency": observed / count}


