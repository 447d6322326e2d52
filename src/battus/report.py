"""Assemble the paper's tables and figures from score files.

The workflow's report rules call :func:`build_table` / :func:`build_figure`
with a *spec* (the experiment's configuration, dataset labels, run labels)
and the scores they read, keyed ``"dataset|method|variant"``. A table is a
list of :class:`Panel` objects written by :func:`write_table` as CSV (raw
numbers, one ``panel`` column when there are several), Markdown and LaTeX
(booktabs, best values in bold, the paper's ``.8726`` number style).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

# ---------------------------------------------------------------------------
# Tables as data


@dataclass
class Panel:
    """One block of a table: raw values plus how to print and where to bold."""

    title: str
    frame: pd.DataFrame
    formats: dict[str, str] = field(default_factory=dict)  # column -> metric|pct|rank|int|ms|str
    best: dict[str, str] = field(default_factory=dict)  # column -> max|min (within the column)
    best_by: list[str] = field(default_factory=list)  # bold within groups of these columns
    row_best: tuple[list[str], str] | None = None  # (columns, max|min): bold the best of each row
    skip_best_rows: list[int] = field(default_factory=list)  # rows excluded from column bests
    rules_before: list[int] = field(default_factory=list)  # LaTeX \midrule before these rows


@dataclass
class Table:
    name: str
    caption: str
    panels: list[Panel]
    note: str = ""


def fmt_value(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if kind == "metric":
        text = f"{float(value):.4f}"
        return text[1:] if text.startswith("0.") else text.replace("-0.", "-.")
    if kind == "rate":
        text = f"{float(value):.2f}"
        return text[1:] if text.startswith("0.") else text
    if kind == "pct":
        return f"{100.0 * float(value):.2f}"
    if kind == "rank":
        return f"{float(value):.2f}"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "ms":
        return f"{float(value):.0f}" if float(value) >= 10 else f"{float(value):.1f}"
    return str(value)


def _bold_mask(panel: Panel) -> pd.DataFrame:
    df = panel.frame
    mask = pd.DataFrame(False, index=df.index, columns=df.columns)
    eligible = ~df.index.isin(df.index[panel.skip_best_rows]) if panel.skip_best_rows else np.ones(len(df), bool)
    groups = [df.index[eligible]] if not panel.best_by else [
        idx[eligible[df.index.get_indexer(idx)]] for _, idx in df.groupby(panel.best_by, sort=False).groups.items()
    ]
    for col, how in panel.best.items():
        if col not in df:
            continue
        for idx in groups:
            values = pd.to_numeric(df.loc[idx, col], errors="coerce").round(4)
            if values.notna().any():
                target = values.max() if how == "max" else values.min()
                mask.loc[values.index[values == target], col] = True
    if panel.row_best:
        cols, how = panel.row_best
        cols = [c for c in cols if c in df]
        values = df[cols].apply(pd.to_numeric, errors="coerce").round(4)
        target = values.max(axis=1) if how == "max" else values.min(axis=1)
        for col in cols:
            mask.loc[values[col] == target, col] = True
    return mask


def _formatted(panel: Panel, bold) -> pd.DataFrame:
    mask = _bold_mask(panel)
    out = pd.DataFrame(index=panel.frame.index)
    for col in panel.frame.columns:
        kind = panel.formats.get(col, "str")
        out[col] = [
            bold(fmt_value(v, kind)) if mask.at[i, col] and fmt_value(v, kind) != "--" else fmt_value(v, kind)
            for i, v in panel.frame[col].items()
        ]
    return out


def _tex_escape(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"),
                 ("$", r"\$"), ("{", r"\{"), ("}", r"\}")):
        text = text.replace(a, b)
    return text


def _with_midrules(latex: str, rows_before: list[int]) -> str:
    """Insert ``\\midrule`` before the given data rows of a booktabs tabular."""
    if not rows_before:
        return latex
    lines = latex.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == r"\midrule") + 1
    out = lines[:start]
    for k, line in enumerate(lines[start:]):
        if k in rows_before and k > 0 and line.strip() != r"\bottomrule":
            out.append(r"\midrule")
        out.append(line)
    return "\n".join(out)


def _tex_cell(text: str) -> str:
    if text.startswith(r"\textbf"):
        return text
    indent = len(text) - len(text.lstrip(" "))
    return (r"\quad " if indent else "") + _tex_escape(text.lstrip(" "))


def table_csv(table: Table) -> str:
    if len(table.panels) == 1:
        return table.panels[0].frame.to_csv(index=False)
    frames = [p.frame.assign(panel=p.title)[["panel", *p.frame.columns]] for p in table.panels]
    return pd.concat(frames, ignore_index=True).to_csv(index=False)


def table_markdown(table: Table) -> str:
    parts = [f"### {table.caption}", ""]
    for panel in table.panels:
        if len(table.panels) > 1 or panel.title:
            parts += [f"**{panel.title}**", ""]
        parts += [_formatted(panel, lambda s: f"**{s}**").to_markdown(index=False, disable_numparse=True), ""]
    if table.note:
        parts += [table.note, ""]
    return "\n".join(parts)


def table_latex(table: Table) -> str:
    parts = [
        f"% {table.name}: generated by battus.report (booktabs); do not edit",
        r"\begin{table}[t]",
        rf"\caption{{{_tex_escape(table.caption)}}}",
        rf"\label{{tab:{table.name.replace('_', '-')}}}",
        r"\centering",
        r"\scriptsize",
    ]
    for panel in table.panels:
        shown = _formatted(panel, lambda s: rf"\textbf{{{s}}}")
        shown = shown.apply(lambda col: col.map(_tex_cell))
        shown.columns = [_tex_escape(str(c)) for c in shown.columns]
        align = "".join("l" if panel.formats.get(c, "str") == "str" else "r" for c in panel.frame.columns)
        if len(table.panels) > 1 or panel.title:
            parts.append(rf"\par\smallskip\emph{{{_tex_escape(panel.title)}}}\par")
        parts.append(_with_midrules(shown.to_latex(index=False, escape=False, column_format=align).rstrip(),
                                    panel.rules_before))
    if table.note:
        parts.append(rf"\par\smallskip{{\footnotesize {_tex_escape(table.note)}}}")
    parts.append(r"\end{table}")
    return "\n".join(parts) + "\n"


def write_table(table: Table, csv: str | Path, md: str | Path, tex: str | Path) -> None:
    Path(csv).write_text(table_csv(table))
    Path(md).write_text(table_markdown(table))
    Path(tex).write_text(table_latex(table))


# ---------------------------------------------------------------------------
# Scores


def load_scores(runs: list, paths: list) -> dict[str, dict]:
    """Score JSONs keyed ``dataset|method|variant`` (``runs`` and ``paths`` in the same order)."""
    if len(runs) != len(paths):
        raise ValueError(f"{len(runs)} runs but {len(paths)} score files")
    out = {}
    for (d, m, v), path in zip(runs, paths, strict=True):
        out[f"{d}|{m}|{v}"] = json.loads(Path(path).read_text())
    return out


def _get(scores: dict, d: str, m: str, v: str) -> dict:
    key = f"{d}|{m}|{v}"
    if key not in scores:
        raise KeyError(f"no score for {key}")
    return scores[key]


def _label(spec: dict, d: str) -> str:
    return spec["datasets"].get(d, {}).get("label", d)


def _method_label(spec: dict, m: str, v: str) -> str:
    return spec["labels"].get(f"{m}/{v}", f"{m} {v}")


def read_published(path: str | Path) -> pd.DataFrame:
    """Published rows: method, dataset, f1, nrmse (empty = not reported, note says why)."""
    df = pd.read_csv(path, comment="#")
    for col in ("f1", "nrmse"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


# ---------------------------------------------------------------------------
# The paper's tables


def table_datasets(spec: dict, histories: dict[str, dict]) -> Table:
    rows = []
    for d, info in spec["datasets"].items():
        h = histories[d]
        paper = info.get("paper") or {}
        rows.append({
            "Group": info.get("group", ""),
            "Dataset": info.get("label", d),
            "n": h["n"],
            "|E|": h["edges"],
            "T": h["T"],
            "Model": h["model"].upper(),
            "Graph": info.get("graph_kind", ""),
            "Diffusion": info.get("diffusion_kind", ""),
            "Paper n": paper.get("n", np.nan),
            "Paper |E|": paper.get("edges", np.nan),
        })
    df = pd.DataFrame(rows)
    if df[["Paper n", "Paper |E|"]].isna().all().all():
        df = df.drop(columns=["Paper n", "Paper |E|"])
    formats = {"n": "int", "|E|": "int", "T": "int", "Paper n": "int", "Paper |E|": "int"}
    return Table("datasets", "Dataset statistics (|E|: arcs for directed graphs, edges otherwise)",
                 [Panel("", df, formats)])


def table_ablation(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["ablation"]
    gate = exp["gate"]
    rows = []
    for row in exp["rows"]:
        f1 = np.mean([_get(scores, d, row["method"], row["variant"])["hermes"]["f1"] for d in exp["datasets"]])
        nr = np.mean([_get(scores, d, row["method"], row["variant"])["hermes"]["nrmse"] for d in exp["datasets"]])
        passed = round(f1, 4) >= gate["f1"] and round(nr, 4) <= gate["nrmse"]
        rows.append({"Configuration": row["label"], "Method": row["method"], "Variant": row["variant"],
                     "F1": f1, "NRMSE": nr, "Gate": "Pass" if passed else "Fail"})
    df = pd.DataFrame(rows)
    groups = [r.get("group", 0) for r in exp["rows"]]
    breaks = [i for i in range(1, len(groups)) if groups[i] != groups[i - 1]]
    note = (f"Mean over {len(exp['datasets'])} datasets; gate: mean F1 >= {gate['f1']} and "
            f"mean NRMSE <= {gate['nrmse']} (published HERMES means).")
    return Table("ablation", "Systematic simplification ablations",
                 [Panel("", df, {"F1": "metric", "NRMSE": "metric"}, {"F1": "max", "NRMSE": "min"},
                        rules_before=breaks)], note)


def _rank_columns(df: pd.DataFrame, metric_cols: list[tuple[str, str]]) -> pd.Series:
    ranks = []
    for col, how in metric_cols:
        ranks.append(df[col].rank(ascending=(how == "min"), method="average", na_option="bottom"))
    return pd.concat(ranks, axis=1).mean(axis=1)


def canonical_panel(spec: dict, scores: dict, datasets: list[str], published: pd.DataFrame | None,
                    title: str) -> Panel:
    methods = spec["experiments"]["canonical"]["methods"]
    keys = [spec["datasets"][d].get("published") for d in datasets]
    rows = []
    if published is not None and all(keys):
        for name, grp in published.groupby("method", sort=False):
            by = grp.set_index("dataset")
            if not all(k in by.index for k in keys):
                continue
            row = {"Method": name}
            for d, k in zip(datasets, keys, strict=True):
                row[f"{_label(spec, d)} F1"] = by.at[k, "f1"]
                row[f"{_label(spec, d)} NRMSE"] = by.at[k, "nrmse"]
            rows.append(row)
    n_published = len(rows)
    for m, v in methods:
        row = {"Method": _method_label(spec, m, v)}
        for d in datasets:
            s = _get(scores, d, m, v)["hermes"]
            row[f"{_label(spec, d)} F1"] = s["f1"]
            row[f"{_label(spec, d)} NRMSE"] = s["nrmse"]
        rows.append(row)
    df = pd.DataFrame(rows)
    metric_cols = [(f"{_label(spec, d)} {k}", "max" if k == "F1" else "min") for d in datasets for k in ("F1", "NRMSE")]
    df["Rank"] = _rank_columns(df, metric_cols)
    df["Mean F1"] = df[[c for c, h in metric_cols if h == "max"]].mean(axis=1, skipna=True)
    df["Mean NRMSE"] = df[[c for c, h in metric_cols if h == "min"]].mean(axis=1, skipna=True)
    formats = {c: "metric" for c, _ in metric_cols} | {"Rank": "rank", "Mean F1": "metric", "Mean NRMSE": "metric"}
    best = dict(metric_cols) | {"Rank": "min", "Mean F1": "max", "Mean NRMSE": "min"}
    panel = Panel(title, df, formats, best)
    panel.n_published = n_published  # type: ignore[attr-defined]
    return panel


def table_canonical_quality(spec: dict, scores: dict, published: pd.DataFrame | None) -> Table:
    exp = spec["experiments"]["canonical"]
    panels = []
    for model, title in (("si", "SI datasets"), ("sir", "SIR datasets")):
        if exp[model]:
            panels.append(canonical_panel(spec, scores, exp[model], published, title))
    note = ("Baseline rows reproduce HERMES Table 2 (published values, data/published/hermes_table2.csv); "
            "Battus rows are measured by this run. Rank averages the metric columns (ties share the mean "
            "rank; a missing published value, SPIN's OOM, ranks last and is left out of its means).")
    if not any(getattr(p, "n_published", 0) for p in panels):
        note = "No published baseline applies to these datasets; only this run's methods are shown."
    return Table("canonical_quality", "Canonical reconstruction quality", panels, note)


def table_unobserved_quality(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["canonical"]
    datasets = exp["si"] + exp["sir"]
    rows = []
    for m, v in exp["methods"]:
        got = [_get(scores, d, m, v) for d in datasets]
        rows.append({
            "Method": _method_label(spec, m, v),
            "HERMES F1": np.mean([s["hermes"]["f1"] for s in got]),
            "HERMES NRMSE": np.mean([s["hermes"]["nrmse"] for s in got]),
            "Unobserved F1": np.mean([s["unobserved"]["f1"] for s in got]),
            "Unobserved NRMSE": np.mean([s["unobserved"]["nrmse"] for s in got]),
        })
    df = pd.DataFrame(rows)
    formats = {c: "metric" for c in df.columns if c != "Method"}
    best = {c: ("max" if c.endswith("F1") else "min") for c in formats}
    return Table("unobserved_quality", "Mean canonical quality with and without the observed frames",
                 [Panel("", df, formats, best)],
                 f"Means over {len(datasets)} datasets; unobserved-only drops every observed frame.")


def _causal_panel(spec: dict, scores: dict, datasets: list[str], title: str) -> Panel:
    methods = spec["experiments"]["canonical"]["methods"]
    rows, totals = [], {}
    for d in datasets:
        first = _get(scores, d, *methods[0])
        row = {"Dataset": _label(spec, d), "Truth": first["causal"]["truth"]["rate"]}
        truth = first["causal"]["truth"]
        totals.setdefault("Truth", []).append((truth["violations"], truth["events"]))
        for m, v in methods:
            c = _get(scores, d, m, v)["causal"]["prediction"]
            lab = _method_label(spec, m, v)
            row[lab] = c["rate"]
            totals.setdefault(lab, []).append((c["violations"], c["events"]))
        rows.append(row)
    weighted = {"Dataset": "Event-weighted"}
    for lab, pairs in totals.items():
        events = sum(e for _, e in pairs)
        weighted[lab] = sum(v for v, _ in pairs) / events if events else 0.0
    rows.append(weighted)
    df = pd.DataFrame(rows)
    cols = [_method_label(spec, m, v) for m, v in methods]
    return Panel(title, df, {c: "pct" for c in df.columns if c != "Dataset"}, row_best=(cols, "min"),
                 rules_before=[len(df) - 1])


def rate_grid_panel(spec: dict, scores: dict) -> Panel:
    exp = spec["experiments"]["rate_grid"]
    rows = []
    for bi, br, variant in spec["rate_variants"]:
        row = {"beta_I": bi, "beta_R": br}
        for d in exp["datasets"]:
            s = _get(scores, d, exp["method"], variant)["hermes"]
            row[f"{_label(spec, d)} F1"] = s["f1"]
            row[f"{_label(spec, d)} NRMSE"] = s["nrmse"]
        rows.append(row)
    df = pd.DataFrame(rows)
    metric = [c for c in df.columns if c.endswith(" F1") or c.endswith(" NRMSE")]
    return Panel("Panel B: Battus-Z rate sensitivity (F1, NRMSE)", df,
                 {"beta_I": "rate", "beta_R": "rate"} | {c: "metric" for c in metric},
                 {c: ("max" if c.endswith("F1") else "min") for c in metric})


def table_feasibility_sensitivity(spec: dict, scores: dict) -> Table:
    panels = []
    canon = spec["experiments"].get("canonical")
    if canon:
        if canon["si"]:
            panels.append(_causal_panel(spec, scores, canon["si"], "Panel A: causal-violation rate (%), SI"))
        if canon["sir"]:
            panels.append(_causal_panel(spec, scores, canon["sir"], "Panel A: causal-violation rate (%), SIR"))
    if "rate_grid" in spec["experiments"]:
        panels.append(rate_grid_panel(spec, scores))
    return Table("feasibility_sensitivity", "Causal feasibility and Battus-Z rate sensitivity", panels,
                 "Violation: a non-initial onset with no in-neighbour infected at the preceding frame (Eq. 8).")


def table_tau_sensitivity(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["tau"]
    taus = list(spec["tau_variants"])
    panels = []
    for metric, how, title in (("f1", "max", "Panel A: macro-F1"), ("nrmse", "min", "Panel B: NRMSE")):
        rows = []
        for d in exp["datasets"]:
            row = {"Dataset": _label(spec, d)}
            for t, variant in spec["tau_variants"].items():
                row[t] = _get(scores, d, exp["method"], variant)["hermes"][metric]
            rows.append(row)
        df = pd.DataFrame(rows)
        mean = {"Dataset": "Mean"} | {t: df[t].mean() for t in taus}
        df = pd.concat([df, pd.DataFrame([mean])], ignore_index=True)
        panels.append(Panel(title, df, {t: "metric" for t in taus}, row_best=(taus, how),
                            rules_before=[len(df) - 1]))
    return Table("tau_sensitivity", "Decode-threshold sensitivity", panels)


def table_rate_robustness(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["rate_robustness"]
    m, v = exp["method"]
    runs = spec["rate_runs"]  # [dataset, topology, model, beta_i, beta_r]
    pairs = list(dict.fromkeys((bi, br) for *_, bi, br in runs))
    cols = list(dict.fromkeys((topo, model) for _, topo, model, _, _ in runs))
    rows = []
    for bi, br in pairs:
        ref = math.isclose(bi, 0.1) and math.isclose(br, 0.1)
        row = {"Gen. (beta_I/beta_R)": f"{fmt_value(bi, 'rate')}/{fmt_value(br, 'rate')}" + (" (ref)" if ref else "")}
        for topo, model in cols:
            d = next(r[0] for r in runs if r[1] == topo and r[2] == model and (r[3], r[4]) == (bi, br))
            s = _get(scores, d, m, v)["hermes"]
            row[f"{topo.upper()}-{model.upper()} F1"] = s["f1"]
            row[f"{topo.upper()}-{model.upper()} NRMSE"] = s["nrmse"]
        rows.append(row)
    df = pd.DataFrame(rows)
    metric = [c for c in df.columns if c.endswith(" F1") or c.endswith(" NRMSE")]
    return Table("rate_robustness", "Generation-side rate misspecification (Battus-Z at fixed rates)",
                 [Panel("", df, {c: "metric" for c in metric},
                        {c: ("max" if c.endswith("F1") else "min") for c in metric})])


def table_large_results(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["large"]
    rows = []
    for d in exp["datasets"]:
        for m, v in exp["methods"]:
            s = _get(scores, d, m, v)
            rows.append({"Graph": _label(spec, d), "Model": s["model"].upper(), "Method": _method_label(spec, m, v),
                         "F1": s["hermes"]["f1"], "NRMSE": s["hermes"]["nrmse"],
                         "Time (ms)": 1e3 * s["algorithm_seconds"], "Backend": s.get("backend", ""),
                         "Device": s.get("device", "")})
    df = pd.DataFrame(rows)
    means = []
    for (model, method), grp in df.groupby(["Model", "Method"], sort=False):
        means.append({"Graph": "Mean", "Model": model, "Method": method, "F1": grp["F1"].mean(),
                      "NRMSE": grp["NRMSE"].mean(),
                      "Time (ms)": float(np.exp(np.log(grp["Time (ms)"].clip(lower=1e-6)).mean())),
                      "Backend": "", "Device": ""})
    first_mean = len(df)
    df = pd.concat([df, pd.DataFrame(means)], ignore_index=True)
    return Table("large_results", "Large-graph results (time: fit-inference-decode interval)",
                 [Panel("", df, {"F1": "metric", "NRMSE": "metric", "Time (ms)": "ms"},
                        {"F1": "max", "NRMSE": "min", "Time (ms)": "min"}, best_by=["Graph", "Model"],
                        rules_before=[first_mean])],
                 "Quality means are arithmetic, time means geometric.")


def build_table(name: str, spec: dict, scores: dict, histories: dict | None = None,
                published: pd.DataFrame | None = None) -> Table:
    if name == "datasets":
        return table_datasets(spec, histories or {})
    if name == "canonical_quality":
        return table_canonical_quality(spec, scores, published)
    builders = {
        "ablation": table_ablation,
        "unobserved_quality": table_unobserved_quality,
        "feasibility_sensitivity": table_feasibility_sensitivity,
        "tau_sensitivity": table_tau_sensitivity,
        "rate_robustness": table_rate_robustness,
        "large_results": table_large_results,
    }
    if name not in builders:
        raise ValueError(f"unknown table {name!r}")
    return builders[name](spec, scores)


def history_summary(path: str | Path) -> dict:
    """n, |E| (arcs if directed else edges), T and model of a history file."""
    from .io import read_history

    p = read_history(path)
    return {"n": p.n, "edges": p.graph.num_edges, "arcs": p.graph.m, "T": p.T, "model": p.model,
            "directed": p.graph.directed}


# ---------------------------------------------------------------------------
# Figures


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_tau_curves(spec: dict, scores: dict, out: str | Path) -> None:
    plt = _plt()
    exp = spec["experiments"]["tau"]
    taus = [float(t) for t in spec["tau_variants"]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, name in ((axes[0], "f1", "macro-F1"), (axes[1], "nrmse", "NRMSE")):
        curves = []
        for d in exp["datasets"]:
            ys = [_get(scores, d, exp["method"], v)["hermes"][metric] for v in spec["tau_variants"].values()]
            curves.append(ys)
            ax.plot(taus, ys, color="0.6", lw=0.8, marker=".")
            ax.annotate(_label(spec, d), (taus[-1], ys[-1]), fontsize=6, color="0.4")
        ax.plot(taus, np.mean(curves, axis=0), color="C0", lw=2.5, marker="o", label="mean")
        ax.axvline(0.65, color="C3", ls="--", lw=1, label="reported tau = .65")
        ax.set_xlabel("decode threshold tau")
        ax.set_ylabel(name)
        ax.legend(fontsize=8)
    fig.suptitle("Battus-Z decode-threshold sensitivity")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def figure_rate_grid(spec: dict, scores: dict, out: str | Path) -> None:
    plt = _plt()
    exp = spec["experiments"]["rate_grid"]
    bis, brs = exp["beta_i"], exp["beta_r"]
    nd = len(exp["datasets"])
    fig, axes = plt.subplots(2, nd, figsize=(3.6 * nd, 6.4), squeeze=False)
    variants = {(bi, br): v for bi, br, v in spec["rate_variants"]}
    for j, d in enumerate(exp["datasets"]):
        for i, (metric, cmap) in enumerate((("f1", "viridis"), ("nrmse", "viridis_r"))):
            grid = np.array([[_get(scores, d, exp["method"], variants[(bi, br)])["hermes"][metric] for br in brs]
                             for bi in bis])
            ax = axes[i][j]
            im = ax.imshow(grid, cmap=cmap, origin="lower")
            for a in range(len(bis)):
                for b in range(len(brs)):
                    ax.text(b, a, fmt_value(grid[a, b], "metric"), ha="center", va="center", fontsize=7, color="w")
            ax.set_xticks(range(len(brs)), [fmt_value(x, "rate") for x in brs])
            ax.set_yticks(range(len(bis)), [fmt_value(x, "rate") for x in bis])
            ax.set_xlabel("beta_R")
            ax.set_ylabel("beta_I")
            ax.set_title(f"{_label(spec, d)} {metric.upper()}", fontsize=9)
            fig.colorbar(im, ax=ax, shrink=0.75)
    fig.suptitle("Battus-Z inference-rate grid")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def figure_canonical_bars(spec: dict, scores: dict, published: pd.DataFrame | None, out: str | Path) -> None:
    plt = _plt()
    exp = spec["experiments"]["canonical"]
    datasets = exp["si"] + exp["sir"]
    series: dict[str, list] = {}
    for m, v in exp["methods"]:
        lab = _method_label(spec, m, v)
        series[lab] = [(_get(scores, d, m, v)["hermes"]["f1"], _get(scores, d, m, v)["hermes"]["nrmse"])
                       for d in datasets]
    if published is not None:
        hermes = published[published["method"] == "HERMES"].set_index("dataset")
        keys = [spec["datasets"][d].get("published") for d in datasets]
        if all(k in hermes.index for k in keys if k) and any(keys):
            series["HERMES (published)"] = [
                (hermes.at[k, "f1"], hermes.at[k, "nrmse"]) if k else (np.nan, np.nan) for k in keys
            ]
    fig, axes = plt.subplots(2, 1, figsize=(max(6, 0.9 * len(datasets) + 2), 6.5), sharex=True)
    width = 0.8 / max(1, len(series))
    x = np.arange(len(datasets))
    for k, (lab, vals) in enumerate(series.items()):
        for i, ax in enumerate(axes):
            ax.bar(x + (k - (len(series) - 1) / 2) * width, [v[i] for v in vals], width, label=lab)
    axes[0].set_ylabel("macro-F1 (higher is better)")
    axes[1].set_ylabel("NRMSE (lower is better)")
    axes[0].set_ylim(bottom=max(0.0, min(v[0] for vals in series.values() for v in vals if not np.isnan(v[0])) - 0.1))
    axes[1].set_xticks(x, [_label(spec, d) for d in datasets], rotation=35, ha="right")
    axes[0].legend(fontsize=8, ncol=len(series))
    fig.suptitle("Per-dataset quality")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def figure_cv_vs_f1(spec: dict, scores: dict, published: pd.DataFrame | None, out: str | Path) -> None:
    """Event-weighted causal violations against mean F1, one point per method and model.

    HERMES's published per-dataset F1 gives its mean as a horizontal line: its
    sampler enforces feasibility, but no violation rate is published, so it is
    not drawn as a point. The truth's own violation rate is a vertical line.
    """
    plt = _plt()
    exp = spec["experiments"]["canonical"]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    markers = {"si": "o", "sir": "s"}
    for model in ("si", "sir"):
        datasets = exp.get(model, [])
        if not datasets:
            continue
        truths = [_get(scores, d, *exp["methods"][0])["causal"]["truth"] for d in datasets]
        truth_pairs = [(t["violations"], t["events"]) for t in truths]
        truth_cv = sum(v for v, _ in truth_pairs) / max(1, sum(e for _, e in truth_pairs))
        ax.axvline(100 * truth_cv, color="grey", lw=0.8, ls=":" if model == "si" else "-.")
        ax.annotate(f"truth {model.upper()}", (100 * truth_cv, 1.0 if model == "si" else 0.5),
                    xycoords=("data", "axes fraction"), fontsize=7, rotation=90, va="top", ha="right",
                    color="grey")
        for k, (m, v) in enumerate(exp["methods"]):
            runs = [_get(scores, d, m, v) for d in datasets]
            violations = sum(r["causal"]["prediction"]["violations"] for r in runs)
            events = sum(r["causal"]["prediction"]["events"] for r in runs)
            f1 = float(np.mean([r["hermes"]["f1"] for r in runs]))
            ax.scatter(100 * violations / max(1, events), f1, marker=markers[model], color=f"C{k}", s=46,
                       label=f"{_method_label(spec, m, v)} ({model.upper()})")
    if published is not None:
        hermes = published[published["method"] == "HERMES"].set_index("dataset")
        keys = [spec["datasets"][d].get("published") for d in exp.get("si", []) + exp.get("sir", [])]
        values = [hermes.at[k, "f1"] for k in keys if k and k in hermes.index]
        if values:
            ax.axhline(float(np.mean(values)), color="black", lw=0.8, ls="--")
            ax.annotate("HERMES (published mean F1)", (0.99, float(np.mean(values))),
                        xycoords=("axes fraction", "data"), fontsize=7, ha="right", va="bottom")
    ax.set_xlabel("event-weighted causal violations (%)")
    ax.set_ylabel("mean macro-F1 (HERMES-compatible)")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("Graph-causal feasibility against accuracy")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def figure_timing(spec: dict, scores: dict, runs: list, out: str | Path) -> None:
    plt = _plt()
    rows = []
    for d, m, v in runs:
        s = _get(scores, d, m, v)
        rows.append({"dataset": _label(spec, d), "n": s["n"], "method": _method_label(spec, m, v),
                     "ms": 1e3 * s["algorithm_seconds"], "backend": s.get("backend", "")})
    df = pd.DataFrame(rows).drop_duplicates(["dataset", "method"])
    order = df.groupby("dataset")["n"].first().sort_values().index.tolist()
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(order) + 2), 4.5))
    methods = list(dict.fromkeys(df["method"]))
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(order))
    for k, method in enumerate(methods):
        sub = df[df["method"] == method].set_index("dataset").reindex(order)
        ax.bar(x + (k - (len(methods) - 1) / 2) * width, sub["ms"], width, label=method)
    ax.set_yscale("log")
    ax.set_ylabel("algorithm interval (ms, log scale)")
    n_of = df.groupby("dataset")["n"].first()
    ax.set_xticks(x, [f"{d}\nn={n_of[d]:,}" for d in order], rotation=35, ha="right", fontsize=7)
    backends = ", ".join(sorted(set(df["backend"])))
    ax.set_title(f"Fit-inference-decode time per run (backend: {backends})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


def figure_history_drawing(spec: dict, history_path: str | Path, predictions: list, labels: list,
                           out: str | Path, max_vertices: int = 120) -> None:
    """Truth and reconstructions as frame-by-vertex state rasters (the paper's Fig. 2 idea)."""
    from matplotlib.colors import ListedColormap

    from .io import read_history, read_prediction

    plt = _plt()
    problem = read_history(history_path, require_truth=True)
    truth = problem.truth
    onset = np.where((truth != 0).any(axis=0), np.argmax(truth != 0, axis=0), truth.shape[0])
    rng = np.random.default_rng(0)
    picked = np.sort(rng.choice(problem.n, size=min(max_vertices, problem.n), replace=False))
    order = picked[np.argsort(onset[picked], kind="stable")]
    cmap = ListedColormap(["#d9e6f2", "#d62728", "#7f7f7f"])
    panels = [("truth", truth)]
    panels += [(lab, read_prediction(p)["states"]) for lab, p in zip(labels, predictions, strict=True)]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 4.6), sharey=True)
    for ax, (title, states) in zip(np.atleast_1d(axes), panels, strict=True):
        ax.imshow(states[:, order].T, aspect="auto", cmap=cmap, vmin=0, vmax=2, interpolation="nearest")
        for t in problem.observations.times:
            ax.axvline(t, color="k", lw=0.8, ls=":")
        ax.set_xlabel("frame t (dotted: observed)")
        ax.set_title(title, fontsize=9)
    np.atleast_1d(axes)[0].set_ylabel(f"{len(order)} vertices, sorted by true onset")
    fig.suptitle(f"{problem.name}: S (light), I (red), R (grey)")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    plt.close(fig)


# ---------------------------------------------------------------------------
# The report of a workflow plan (battus.experiments.Plan): which tables and
# figures it makes, what each one shows (its spec), and making one of them


@dataclass(frozen=True)
class ReportItem:
    """One table or figure: the experiments it shows and what else it reads."""

    kind: str  # "table" (CSV, Markdown, LaTeX) or "figure" (PNG)
    shows: tuple[str, ...]  # config experiments it prints and whose runs' scores it reads
    published: bool = False  # also reads the published HERMES Table 2 rows


REPORT_ITEMS = {
    "datasets": ReportItem("table", ("datasets",)),  # reads the histories, no scores
    "ablation": ReportItem("table", ("ablation",)),
    "canonical_quality": ReportItem("table", ("canonical",), published=True),
    "unobserved_quality": ReportItem("table", ("canonical",)),
    "feasibility_sensitivity": ReportItem("table", ("canonical", "rate_grid")),
    "tau_sensitivity": ReportItem("table", ("tau",)),
    "rate_robustness": ReportItem("table", ("rate_robustness",)),
    "large_results": ReportItem("table", ("large",)),
    "tau_curves": ReportItem("figure", ("tau",)),
    "rate_grid_heatmaps": ReportItem("figure", ("rate_grid",)),
    "canonical_bars": ReportItem("figure", ("canonical",), published=True),
    "cv_vs_f1": ReportItem("figure", ("canonical",), published=True),
    "timing": ReportItem("figure", ("canonical", "large")),
    "history_drawing": ReportItem("figure", ("canonical",)),  # reads one history and its predictions
}


def report_runs(name: str, plan) -> list[tuple[str, str, str]] | None:
    """The (dataset, method, variant) runs a table or figure reads, once each; None: not made by this plan."""
    if name == "datasets":
        return [] if "datasets" in plan.experiments else None
    if name == "history_drawing":
        canonical = plan.experiments.get("canonical") or {}
        if not canonical.get("drawing"):
            return None
        return [(canonical["drawing"], m, v) for m, v in canonical["methods"]]
    runs = [run for experiment in REPORT_ITEMS[name].shows for run in plan.runs(experiment)]
    return list(dict.fromkeys(runs)) or None


def report_made(plan, kind: str) -> list[str]:
    """The tables (or figures) this plan makes, in the paper's order."""
    return [n for n, item in REPORT_ITEMS.items() if item.kind == kind and report_runs(n, plan) is not None]


def report_spec(name: str, plan) -> dict:
    """What a table or figure shows: only its own experiments' settings, labels and datasets,
    so that editing one experiment reruns only its own tables."""
    experiments = {k: plan.experiments[k] for k in REPORT_ITEMS[name].shows if k in plan.experiments}
    runs = report_runs(name, plan) or []
    names = list(dict.fromkeys(d for d, _, _ in runs))
    if name == "datasets":
        names = plan.experiments["datasets"]["datasets"]
    spec = {
        "name": plan.name,
        "experiments": experiments,
        "datasets": {d: plan.dataset_info(d) for d in names},
        "labels": {f"{m}/{v}": plan.run_label(m, v) for _, m, v in runs},
    }
    if "tau" in experiments:
        tau = experiments["tau"]
        spec["tau_variants"] = {f"{x:.2f}": plan.tau_variant(tau["method"], x) for x in tau["taus"]}
    if "rate_grid" in experiments:
        grid = experiments["rate_grid"]
        spec["rate_variants"] = [[bi, br, plan.rates_variant(grid["method"], bi, br)]
                                 for bi in grid["beta_i"] for br in grid["beta_r"]]
    if "rate_robustness" in experiments:
        spec["rate_runs"] = [list(r) for r in plan.rate_robustness]
    return spec


def make(name: str, spec: dict, runs: list, inputs: dict, outputs: list) -> str:
    """Make one table (outputs: CSV, Markdown, LaTeX) or figure (outputs: PNG) from its input files.

    ``inputs``: ``scores`` (one file per run, in ``runs`` order), ``histories``
    (the dataset table), ``history`` and ``predictions`` (the history drawing),
    ``published`` (HERMES Table 2 rows), each present only where needed.
    Returns a one-line summary for the log.
    """
    published = read_published(inputs["published"]) if "published" in inputs else None
    if name == "history_drawing":
        labels = [spec["labels"][f"{m}/{v}"] for _, m, v in runs]
        figure_history_drawing(spec, inputs["history"], list(inputs["predictions"]), labels, outputs[0])
        return f"wrote {outputs[0]}"
    scores = load_scores(runs, list(inputs.get("scores", [])))
    if REPORT_ITEMS[name].kind == "table":
        histories = None
        if "histories" in inputs:
            histories = {d: history_summary(p) for d, p in zip(spec["datasets"], inputs["histories"], strict=True)}
        table = build_table(name, spec, scores, histories=histories, published=published)
        write_table(table, *outputs)
        return f"wrote {outputs[0]} ({len(table.panels)} panels)"
    figures = {
        "tau_curves": lambda out: figure_tau_curves(spec, scores, out),
        "rate_grid_heatmaps": lambda out: figure_rate_grid(spec, scores, out),
        "canonical_bars": lambda out: figure_canonical_bars(spec, scores, published, out),
        "cv_vs_f1": lambda out: figure_cv_vs_f1(spec, scores, published, out),
        "timing": lambda out: figure_timing(spec, scores, runs, out),
    }
    if name not in figures:
        raise ValueError(f"unknown figure {name!r}")
    figures[name](outputs[0])
    return f"wrote {outputs[0]}"
