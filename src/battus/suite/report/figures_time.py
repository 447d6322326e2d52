"""Run-time figures: time per run and dataset, time against graph size, and the large graphs'
times beside the paper's NVIDIA B200 measurements (Table tab:large-results).

Controls (truth, random) are never timed: they are checks of the scorer, not methods. A plug-in's
time is what the plug-in reports (or its command's wall time when it reports none), not an
interval Battus measured: it is drawn hollow and its legend entry says "self-reported".
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .figures import _figure, is_plugin, method_color, method_colors
from .scores import dataset_label, is_control, method_label, read_published, score_of
from .seeds import scaled, seed_sd
from .tables import label_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# the paper's large-graph table (Battus and Battus-Z on an NVIDIA B200), with its graphs' sizes
LARGE_B200 = "data/published/battus_large_b200.csv"
# the paper's method names -> the runs they are (colours)
PAPER_RUNS = {"Battus": "battus/default", "Battus-Z": "battus-z/default"}
BACKEND_NAMES = {"cpu": "CPU", "cuda": "CUDA"}
SELF_REPORTED = "self-reported"


def time_rows(spec: dict, scores: dict, runs: list) -> pd.DataFrame:
    """One row per (dataset, run) timed: controls left out; ``ms`` the mean over seeds where
    repeated, ``sd`` its sd over seeds, ``plugin`` whether the time is the plug-in's own report."""
    rows = []
    replicates = spec.get("replicates", {})  # runs at other seeds are merged into their dataset's
    for d, m, v in dict.fromkeys((replicates.get(d, d), m, v) for d, m, v in runs):
        if is_control(spec, m, v):
            continue
        s = score_of(scores, d, m, v)
        ms = scaled(s["algorithm_seconds"], 1e3)
        rows.append({"d": d, "dataset": label_text(dataset_label(spec, d)), "n": int(s["n"]), "key": f"{m}/{v}",
                     "method": label_text(method_label(spec, m, v)), "ms": float(ms), "sd": seed_sd(ms),
                     "model": str(s.get("model", "")).upper(), "backend": s.get("backend") or "",
                     "device": s.get("device") or "", "plugin": is_plugin(m)})
    return pd.DataFrame(rows).drop_duplicates(["d", "key"])


def _legend_label(row_method: str, plugin: bool) -> str:
    return f"{row_method}: {SELF_REPORTED} time" if plugin else row_method


def _measured_on(df: pd.DataFrame) -> str:
    """What Battus measured the non-plug-in times on, in words."""
    measured = df[~df["plugin"]]
    backends = [BACKEND_NAMES.get(b, b) for b in dict.fromkeys(measured["backend"]) if b]
    return " and ".join(backends) + " backend" + ("s" if len(backends) > 1 else "") if backends else ""


def _error(sub: pd.DataFrame):
    """Error bars of one sd over seeds, the lower arm clipped above 0 (log axis); None without seeds."""
    if not (sub["sd"] > 0).any():
        return None
    sd = sub["sd"].fillna(0).to_numpy()
    return [np.minimum(sd, 0.9 * sub["ms"].to_numpy()), sd]


def figure_timing(spec: dict, scores: dict, runs: list) -> Figure:
    """Time per run: one column of dots per dataset (ordered by size), one dot per method, log axis."""
    df = time_rows(spec, scores, runs)
    order = df.drop_duplicates("d").sort_values(["n", "dataset"])["d"].tolist()
    keys = list(dict.fromkeys(df["key"]))
    colors = method_colors(keys)
    fig = _figure(max(8.5, 0.75 * len(order) + 3.5), 5.2)
    ax = fig.subplots()
    x = np.arange(len(order))
    n = len(keys)
    offsets = (np.arange(n) - (n - 1) / 2) * min(0.8 / max(1, n), 0.12)
    for offset, key in zip(offsets, keys, strict=True):
        sub = df[df["key"] == key].set_index("d").reindex(order)
        plugin = bool(sub["plugin"].dropna().iloc[0])
        ax.errorbar(x + offset, sub["ms"], yerr=_error(sub), ls="none", marker="D" if plugin else "o", ms=6,
                    color=colors[key], mfc="white" if plugin else colors[key], mew=1.4, capsize=2, elinewidth=0.8,
                    label=_legend_label(sub["method"].dropna().iloc[0], plugin))
    ax.set_yscale("log")
    ax.set_ylabel("time per run (ms, log scale)")
    for gap in x[:-1] + 0.5:
        ax.axvline(gap, color="0.88", lw=0.6)
    info = df.drop_duplicates("d").set_index("d")
    ax.set_xticks(x, [f"{info.at[d, 'dataset']}\nn = {info.at[d, 'n']:,}" for d in order], rotation=35,
                  ha="right", fontsize=8)
    ax.set_xlim(-0.5, len(order) - 0.5)
    ax.grid(axis="y", which="major", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    measured = _measured_on(df)
    fig.suptitle("Reconstruction time per run: fit, inference and decoding"
                 + (f"\nmeasured by Battus on the {measured}" if measured else "")
                 + ("; hollow: the plug-in's own report" if df["plugin"].any() else ""), fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return fig


def _size_legend(ax, colors: dict, labels: dict, plugins: dict, models: list[str], extra: list | None = None):
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="none", marker="o", color=colors[k], mfc="white" if plugins[k] else colors[k],
                      mew=1.4, label=_legend_label(labels[k], plugins[k])) for k in colors]
    handles += [Line2D([], [], ls="none", marker=MODEL_MARKERS.get(m, "o"), color="0.3", mfc="0.3",
                       label=f"{m} history") for m in models]
    handles += extra or []
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


MODEL_MARKERS = {"SI": "o", "SIR": "s"}


def figure_time_vs_size(spec: dict, scores: dict, runs: list) -> Figure:
    """Time per run against the graph's vertices, log-log: colour the method, marker the model."""
    df = time_rows(spec, scores, runs)
    keys = list(dict.fromkeys(df["key"]))
    colors = method_colors(keys)
    fig = _figure(9, 5.2)
    ax = fig.subplots()
    # methods side by side at one size: each shifted by a fixed fraction of a decade
    shift = {k: 10 ** ((i - (len(keys) - 1) / 2) * min(0.1 / max(1, len(keys)), 0.025)) for i, k in enumerate(keys)}
    for key in keys:
        sub = df[df["key"] == key].sort_values("n")
        plugin = bool(sub["plugin"].iloc[0])
        for model, grp in sub.groupby("model", sort=False):
            ax.errorbar(grp["n"] * shift[key], grp["ms"], yerr=_error(grp), ls="none",
                        marker=MODEL_MARKERS.get(model, "o"), ms=6, color=colors[key],
                        mfc="white" if plugin else colors[key], mew=1.4, capsize=2, elinewidth=0.8, alpha=0.9)
        # the method's trend: its geometric-mean time at each size, joined
        trend = sub.groupby("n")["ms"].apply(lambda s: float(np.exp(np.log(s).mean())))
        if len(trend) > 1:
            ax.plot(trend.index * shift[key], trend.to_numpy(), color=colors[key], lw=0.9, alpha=0.6,
                    ls="--" if plugin else "-")
    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = sorted(set(df["n"]))
    if len(sizes) <= 8:  # few sizes: ticks at the graphs' own sizes
        from matplotlib.ticker import NullLocator

        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(sizes, [f"{s:,}" for s in sizes], rotation=30, ha="right", fontsize=8)
    ax.margins(x=0.08)
    ax.set_xlabel("vertices n (log scale)")
    ax.set_ylabel("time per run (ms, log scale)")
    ax.grid(which="major", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    labels = dict(zip(df["key"], df["method"], strict=True))
    plugins = dict(zip(df["key"], df["plugin"], strict=True))
    _size_legend(ax, colors, labels, plugins, list(dict.fromkeys(df["model"])))
    measured = _measured_on(df)
    ax.set_title("Reconstruction time against graph size (line: geometric mean at each size;\n"
                 "methods side by side at one size)"
                 + (f"\nmeasured by Battus on the {measured}" if measured else "")
                 + ("; hollow: the plug-in's own report" if df["plugin"].any() else ""), fontsize=10)
    return fig


def large_b200_path() -> Path:
    """The paper's large-graph rows: in the checkout this package is installed from (the workflow's
    folder), else relative to the working folder."""
    here = Path(__file__).resolve().parents[4] / LARGE_B200
    return here if here.exists() else Path(LARGE_B200)


def read_large_b200(path: str | Path | None = None) -> pd.DataFrame:
    """The paper's per-graph rows of Table tab:large-results (the mean rows left out), with sizes."""
    df = read_published(path or large_b200_path())
    df = df[df["n"].notna()].copy()
    df["model"] = df["dataset"].str.rsplit("-", n=1).str[1]
    df["graph"] = df["dataset"].str.rsplit("-", n=1).str[0]
    return df


def _graph_name(label: str) -> str:
    """A dataset's graph, from its label (``Web-Stanford–SI`` -> ``Web-Stanford``)."""
    for sep in ("\u2013", "--", " "):
        if sep in label:
            return label.rsplit(sep, 1)[0]
    return label


def figure_large_timing(spec: dict, scores: dict, runs: list, paper: pd.DataFrame | None = None) -> Figure:
    """The large graphs' times in this run (filled dots) beside the paper's on an NVIDIA B200 (hollow
    diamonds): one column per graph, ordered by vertices, a graph of both side by side in one
    column; one panel per model, log time axis."""
    from matplotlib.lines import Line2D

    df = time_rows(spec, scores, runs)
    df["graph"] = [_graph_name(label) for label in df["dataset"]]
    paper = read_large_b200() if paper is None else paper
    models = list(dict.fromkeys(list(df["model"]) + list(paper["model"])))
    models = [m for m in ("SI", "SIR") if m in models] + [m for m in models if m not in ("SI", "SIR")]
    keys = list(dict.fromkeys(list(df["key"]) + [PAPER_RUNS[m] for m in paper["method"] if m in PAPER_RUNS]))
    colors = method_colors(keys)
    # the graphs, each once, by size: this run's (its own n) and the paper's (n from tab:datasets)
    sizes = dict(zip(paper["graph"], paper["n"].astype(int), strict=True))
    run_sizes = dict(zip(df["graph"], df["n"], strict=True))
    graphs = sorted(set(sizes) | set(run_sizes), key=lambda g: (run_sizes.get(g, sizes.get(g, 0)), g))
    fig = _figure(max(4.6, 0.95 * len(graphs) + 1.2) * len(models) + 2.8, 5.6)
    axes = np.atleast_1d(fig.subplots(1, len(models), sharey=True))
    x = {g: i for i, g in enumerate(graphs)}
    for ax, model in zip(axes, models, strict=True):
        run = df[df["model"] == model]
        pub = paper[paper["model"] == model]
        points = [("run", k, g) for k, g in zip(run["key"], run["graph"], strict=True)]
        points += [("paper", PAPER_RUNS.get(m, m), g) for m, g in zip(pub["method"], pub["graph"], strict=True)]
        per_graph = {g: [p for p in points if p[2] == g] for g in graphs}
        for source, key, g in points:
            column = per_graph[g]
            offset = (column.index((source, key, g)) - (len(column) - 1) / 2) * min(0.8 / len(column), 0.16)
            color = colors.get(key, method_color(key))
            if source == "run":
                sub = run[(run["key"] == key) & (run["graph"] == g)]
                plugin = bool(sub["plugin"].iloc[0])
                ax.errorbar([x[g] + offset], sub["ms"], yerr=_error(sub), ls="none", marker="o", ms=7, color=color,
                            mfc="white" if plugin else color, mew=1.4, capsize=2, elinewidth=0.8)
            else:
                method = next(m for m, k in PAPER_RUNS.items() if k == key) if key in PAPER_RUNS.values() else key
                ms = pub[(pub["method"] == method) & (pub["graph"] == g)]["time_ms"]
                ax.plot([x[g] + offset], ms, ls="none", marker="D", ms=8, mfc="none", mew=1.6, color=color)
        ax.set_yscale("log")
        labels = []
        for g in graphs:
            where = ("this run" if g in run_sizes else "") + (" and paper" if g in run_sizes and g in sizes else
                                                              "paper" if g in sizes else "")
            n = f"{run_sizes.get(g, sizes.get(g, 0)):,}"
            if g in run_sizes and g in sizes and abs(run_sizes[g] - sizes[g]) > 0.01 * sizes[g]:
                n += f" (paper {sizes[g]:,})"  # the run's graph prepared differently
            labels.append(f"{g}\n({where})\nn = {n}")
        ax.set_xticks(range(len(graphs)), labels, rotation=35, ha="right", fontsize=8)
        ax.set_xlim(-0.5, len(graphs) - 0.5)
        for gap in np.arange(len(graphs) - 1) + 0.5:
            ax.axvline(gap, color="0.88", lw=0.6)
        ax.margins(y=0.1)
        ax.set_xlabel("graph, ordered by vertices n")
        ax.set_title(f"{model} histories", fontsize=10)
        ax.grid(axis="y", which="major", color="0.9", lw=0.6)
        ax.set_axisbelow(True)
    axes[0].set_ylabel("time per run (ms, log scale)")
    labels = dict(zip(df["key"], df["method"], strict=True))
    for method, key in PAPER_RUNS.items():
        labels.setdefault(key, method)
    devices = ", ".join(dict.fromkeys(f"{BACKEND_NAMES.get(b, b)} on {dv}" if dv else BACKEND_NAMES.get(b, b)
                                      for b, dv in zip(df["backend"], df["device"], strict=True) if b))
    handles = [Line2D([], [], ls="none", marker="s", ms=8, color=colors[k], label=labels[k]) for k in colors]
    handles += [Line2D([], [], ls="none", marker="o", color="0.3", label=f"this run ({devices or 'measured'})"),
                Line2D([], [], ls="none", marker="D", mfc="none", mew=1.6, color="0.3",
                       label="paper: NVIDIA B200, single run\n(Table tab:large-results)")]
    if df["plugin"].any():
        handles.append(Line2D([], [], ls="none", marker="o", mfc="white", mew=1.4, color="0.3",
                              label=f"plug-in, {SELF_REPORTED}"))
    axes[-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.03, 1.0), borderaxespad=0)
    fig.suptitle("Large graphs: this run's times beside the paper's (fit, inference and decoding)", fontsize=11)
    return fig
