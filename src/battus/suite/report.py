"""Assemble the paper's tables and figures from score files.

The workflow's report rules call :func:`make` with a *spec* (the experiment's
configuration, dataset labels, run labels) and the score files it reads, keyed
``"dataset|method|variant"``.

Tables. A :class:`Table` holds wide :class:`Panel` objects for reading and one
tidy long frame (:attr:`Table.tidy`) for analysis. :func:`write_table` writes

- CSV: the tidy frame. One row per number: the columns that say what was
  measured (``dataset``, ``label``, ``method``, ...), then ``metric`` and
  ``value``. Metric names carry their unit (``time_ms``, ``violation_fraction``);
  every proportion (F1, NRMSE, violation rates) is a fraction in [0, 1].
  Aggregates over datasets are rows with ``dataset = "all"`` and the metric
  says how they aggregate (``mean_f1``, ``geomean_time_ms``; a pooled
  ``violation_fraction`` is event-weighted). Every cell is filled: a value
  that was not reported (SPIN's OOM) is a missing row, not a blank cell.
- Markdown and LaTeX (booktabs): the wide panels, best values in bold, the
  paper's ``.8726`` number style, violation rates in percent (headers say %).

Seeds. An experiment repeated over seeds (``seeds:`` in its config) gives one
score file per seed of a simulated dataset; :func:`load_scores` merges them
into one record per (dataset, method, variant) whose numbers are
:class:`SeedStat` floats: the mean over seeds, keeping the per-seed values.
Markdown and LaTeX print them ``mean ± sd`` (sample sd, ddof 1); the tidy CSV
gives the mean under the metric's own name plus ``<metric>_sd``,
``<metric>_ci95_low``, ``<metric>_ci95_high`` (Student-t interval of the mean
over seeds) and ``<metric>_n_seeds``. Means over datasets (:func:`seed_mean`)
are taken seed by seed, so their sd is over seeds too. Ranking and bold use the
mean. A single seed prints and writes as before.

Labels. Config labels are written LaTeX-style (``BA--SI``) because the .tex
tables need it; :func:`label_text` is the one conversion: an en dash for PNGs,
Markdown and CSV, ``--`` kept for LaTeX.

Figures. One palette keyed by run (:func:`method_color`), so a method has the
same colour in every configuration. Axis rule: bar charts start at 0 on F1
and NRMSE axes alike (a bar's length is its value); line and point plots zoom
to the data on both. Legends sit outside the plotting area and every label
inside the canvas (``layout="constrained"``; tests/test_figures.py checks).
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# ---------------------------------------------------------------------------
# Labels


def label_text(text: str, latex: bool = False) -> str:
    """A config label as printed: ``--``/``---`` become an en/em dash (PNG, Markdown, CSV);
    with ``latex`` the Unicode dashes become ``--``/``---`` instead."""
    if latex:
        return text.replace("\u2014", "---").replace("\u2013", "--")
    return text.replace("---", "\u2014").replace("--", "\u2013")


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
    tidy: pd.DataFrame  # the CSV: one row per number (module docstring)
    note: str = ""


# ---------------------------------------------------------------------------
# Seeds: means over seeds, their sd and 95% interval

# Student's t 0.975 quantile for 1..30 degrees of freedom (scipy.stats.t.ppf, six decimals)
_T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
         2.200985, 2.178813, 2.160369, 2.144787, 2.13145, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
         2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.04523, 2.042272)


def t975(dof: int) -> float:
    """Student's t 0.975 quantile: a table to 30 degrees of freedom, then the Cornish-Fisher
    expansion about the normal quantile (Abramowitz & Stegun 26.7.5; error < 1e-6 beyond 30)."""
    if dof < 1:
        raise ValueError(f"t quantile needs at least 1 degree of freedom, got {dof}")
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = 1.959963984540054
    terms = ((z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96,
             (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
             (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
    return z + sum(g / dof ** (k + 1) for k, g in enumerate(terms))


class SeedStat(float):
    """A mean over seeds (its value as a float) that keeps the per-seed values it averages."""

    values: np.ndarray

    def __new__(cls, values):
        values = np.asarray(values, dtype=float)
        if values.ndim != 1 or len(values) < 1:
            raise ValueError("SeedStat needs a non-empty list of per-seed values")
        obj = super().__new__(cls, float(values.mean()))
        obj.values = values
        return obj

    def __reduce__(self):
        return SeedStat, (self.values.tolist(),)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def sd(self) -> float:
        """Sample standard deviation over seeds (ddof 1); NaN for one seed."""
        return float(self.values.std(ddof=1)) if self.n > 1 else math.nan

    def ci95(self) -> tuple[float, float]:
        """The 95% Student-t interval of the mean over seeds (NaN for one seed)."""
        if self.n < 2:
            return math.nan, math.nan
        half = t975(self.n - 1) * self.sd / math.sqrt(self.n)
        return float(self) - half, float(self) + half


def seeded(value) -> bool:
    """A number averaged over two or more seeds."""
    return isinstance(value, SeedStat) and value.n > 1


def seed_sd(value) -> float:
    """The sd over seeds of a number (0 where it is not averaged over seeds: for error bars)."""
    return value.sd if seeded(value) else 0.0


def scaled(value, factor: float) -> float:
    """``factor * value``, keeping the seeds of a mean over seeds (a unit change)."""
    return SeedStat(factor * value.values) if seeded(value) else factor * value


def seed_mean(values, reduce=np.mean) -> float:
    """The mean (or ``reduce``) over datasets of numbers that may be means over seeds.

    Seed by seed where any is (datasets of one experiment share its seed list): the result is a
    SeedStat whose sd is over seeds of the mean over datasets. A number of one dataset without
    seeds (an imported history) counts the same in every seed. Plain floats give a plain float;
    numbers over different seed counts give the plain reduce of their means.
    """
    values = list(values)
    counts = {v.n for v in values if seeded(v)}
    if len(counts) != 1:
        return float(reduce(np.array([float(v) for v in values])))
    n = counts.pop()
    per_seed = np.array([v.values if seeded(v) else np.full(n, float(v)) for v in values])
    return SeedStat(reduce(per_seed, axis=0))


def merge_seeds(records: list):
    """One score record from the records of several seeds: every number that differs between
    seeds (and every float) becomes a SeedStat, equal integers stay, anything else (strings,
    lists such as observed times or reliability bins, None) is the first seed's."""
    first = records[0]
    if isinstance(first, dict):
        return {k: merge_seeds([r[k] for r in records]) for k in first
                if all(isinstance(r, dict) and k in r for r in records)}
    numeric = all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in records)
    if not numeric or (all(isinstance(r, int) for r in records) and len(set(records)) == 1):
        return first
    return SeedStat([float(r) for r in records])


def long_rows(ids: dict, metrics: dict) -> list[dict]:
    """Rows of a tidy frame: ``ids`` repeated for each (metric, value), missing values left out.

    A mean over seeds gives its mean under the metric's name, then ``<metric>_sd``,
    ``<metric>_ci95_low``, ``<metric>_ci95_high`` and ``<metric>_n_seeds``.
    """
    rows = []
    for metric, value in metrics.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        if seeded(value):
            low, high = value.ci95()
            rows += [{**ids, "metric": metric, "value": float(value)},
                     {**ids, "metric": f"{metric}_sd", "value": value.sd},
                     {**ids, "metric": f"{metric}_ci95_low", "value": low},
                     {**ids, "metric": f"{metric}_ci95_high", "value": high},
                     {**ids, "metric": f"{metric}_n_seeds", "value": value.n}]
            continue
        rows.append({**ids, "metric": metric, "value": float(value) if isinstance(value, SeedStat) else value})
    return rows


def panel_frame(rows: list[dict]) -> pd.DataFrame:
    """A panel's frame that keeps means over seeds as SeedStat cells (pandas would make them
    plain floats), so that Markdown and LaTeX can print their sd."""
    frame = pd.DataFrame(rows)
    for col in frame.columns:
        cells = [row.get(col) for row in rows]
        if any(seeded(c) for c in cells):
            frame[col] = pd.Series([np.nan if c is None else c for c in cells], index=frame.index, dtype=object)
    return frame


def tidy_frame(rows: list[dict]) -> pd.DataFrame:
    """A tidy frame whose ``value`` column keeps counts as integers (``884``, not ``884.0``)."""
    frame = pd.DataFrame(rows)
    if "value" in frame:
        frame["value"] = pd.Series([row["value"] for row in rows], index=frame.index, dtype=object)
    return frame


def fmt_value(value, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if seeded(value) and kind in ("metric", "pct", "ms"):
        # a mean over seeds: mean ± sample sd
        return f"{fmt_value(float(value), kind)} \u00b1 {fmt_value(value.sd, kind)}"
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
    return label_text(text, latex=True).replace("\u00b1", r"$\pm$")


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


def _tex_cell_pm(text: str) -> str:
    """A LaTeX cell whose ``mean ± sd`` prints the ± in math mode."""
    return _tex_cell(text).replace("\u00b1", r"$\pm$")


def _tex_cell(text: str) -> str:
    if text.startswith(r"\textbf"):
        return text
    indent = len(text) - len(text.lstrip(" "))
    return (r"\quad " if indent else "") + _tex_escape(text.lstrip(" "))


def table_csv(table: Table) -> str:
    """The tidy frame as CSV: labels with en dashes, labels' indentation stripped."""
    tidy = table.tidy.copy()
    for col in tidy.columns:
        if pd.api.types.is_string_dtype(tidy[col]):
            tidy[col] = tidy[col].map(lambda v: label_text(v.strip()) if isinstance(v, str) else v)
    return tidy.to_csv(index=False)


def table_markdown(table: Table) -> str:
    parts = [f"### {label_text(table.caption)}", ""]
    for panel in table.panels:
        if len(table.panels) > 1 or panel.title:
            parts += [f"**{label_text(panel.title)}**", ""]
        shown = _formatted(panel, lambda s: f"**{s}**").map(label_text)
        shown.columns = [label_text(str(c)) for c in shown.columns]
        parts += [shown.to_markdown(index=False, disable_numparse=True), ""]
    if table.note:
        parts += [label_text(table.note), ""]
    return "\n".join(parts)


def table_latex(table: Table) -> str:
    parts = [
        f"% {table.name}: generated by battus.suite.report (booktabs); do not edit",
        r"\begin{table}[t]",
        rf"\caption{{{_tex_escape(table.caption)}}}",
        rf"\label{{tab:{table.name.replace('_', '-')}}}",
        r"\centering",
        r"\scriptsize",
    ]
    for panel in table.panels:
        shown = _formatted(panel, lambda s: rf"\textbf{{{s}}}")
        shown = shown.apply(lambda col: col.map(_tex_cell_pm))
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


def load_scores(runs: list, paths: list, replicates: dict | None = None) -> dict[str, dict]:
    """Score JSONs keyed ``dataset|method|variant`` (``runs`` and ``paths`` in the same order).

    ``replicates`` maps a dataset simulated at another seed to the dataset it repeats (the spec's
    ``replicates``): the runs of one dataset over several seeds are merged (:func:`merge_seeds`)
    into one record under the dataset's own key, which keeps the per-seed records as ``seeds``.
    """
    if len(runs) != len(paths):
        raise ValueError(f"{len(runs)} runs but {len(paths)} score files")
    replicates = replicates or {}
    groups: dict[str, list[dict]] = {}
    for (d, m, v), path in zip(runs, paths, strict=True):
        groups.setdefault(f"{replicates.get(d, d)}|{m}|{v}", []).append(json.loads(Path(path).read_text()))
    out = {}
    for key, records in groups.items():
        out[key] = records[0] if len(records) == 1 else {**merge_seeds(records), "seeds": records}
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


def _is_control(spec: dict, m: str, v: str) -> bool:
    """A positive or negative control (a check of the scorer and a floor): never ranked or bold."""
    return f"{m}/{v}" in spec.get("controls", ())


CONTROLS_NOTE = " Controls (the truth, a random consistent history) check the scorer and set a floor: not ranked."


def read_published(path: str | Path) -> pd.DataFrame:
    """Published rows: method, dataset, f1, nrmse (empty = not reported, note says why)."""
    df = pd.read_csv(path, comment="#")
    for col in ("f1", "nrmse"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def published_rows(published: pd.DataFrame | None, keys: list[str | None]) -> dict[str, list[tuple[float, float]]]:
    """Each published method's (F1, NRMSE) on the datasets ``keys``, in order; only methods that report
    every one of them (a value may be NaN: not reported), none where a dataset has no published key."""
    if published is None or not keys or not all(keys):
        return {}
    rows = {}
    for name, grp in published.groupby("method", sort=False):
        by = grp.set_index("dataset")
        if all(k in by.index for k in keys):
            rows[name] = [(float(by.at[k, "f1"]), float(by.at[k, "nrmse"])) for k in keys]
    return rows


DITTO_PUBLISHED = "data/published/ditto_kdd23.csv"


# ---------------------------------------------------------------------------
# The paper's tables


def table_datasets(spec: dict, histories: dict[str, dict]) -> Table:
    rows, tidy = [], []
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
        ids = {"group": info.get("group", ""), "dataset": d, "label": info.get("label", d),
               "model": h["model"].upper(), "graph_kind": info.get("graph_kind", ""),
               "diffusion_kind": info.get("diffusion_kind", "")}
        tidy += long_rows(ids, {"n_vertices": h["n"], "edges": h["edges"], "horizon_T_steps": h["T"],
                                "paper_n_vertices": paper.get("n"), "paper_edges": paper.get("edges")})
    df = pd.DataFrame(rows)
    if df[["Paper n", "Paper |E|"]].isna().all().all():
        df = df.drop(columns=["Paper n", "Paper |E|"])
    formats = {"n": "int", "|E|": "int", "T": "int", "Paper n": "int", "Paper |E|": "int"}
    return Table("datasets", "Dataset statistics (|E|: arcs for directed graphs, edges otherwise)",
                 [Panel("", df, formats)], tidy_frame(tidy))


def ablation_gate(spec: dict, published: pd.DataFrame | None) -> dict | None:
    """The ablation's quality gate, or None where it would compare different data.

    The gate's thresholds are HERMES's published means over the canonical
    suite, so it applies only when the ablation's datasets are that suite:
    each maps to a published dataset (``published:`` in the config) and
    together they are exactly the datasets of HERMES's published rows.
    """
    exp = spec["experiments"]["ablation"]
    if published is None:
        return None
    keys = [spec["datasets"].get(d, {}).get("published") for d in exp["datasets"]]
    hermes = set(published.loc[published["method"] == "HERMES", "dataset"])
    if not all(keys) or len(set(keys)) != len(keys) or set(keys) != hermes:
        return None
    return exp["gate"]


def table_ablation(spec: dict, scores: dict, published: pd.DataFrame | None = None) -> Table:
    exp = spec["experiments"]["ablation"]
    gate = ablation_gate(spec, published)
    rows, tidy = [], []
    for row in exp["rows"]:
        got = {d: _get(scores, d, row["method"], row["variant"])["hermes"] for d in exp["datasets"]}
        f1 = seed_mean([s["f1"] for s in got.values()])
        nr = seed_mean([s["nrmse"] for s in got.values()])
        shown = {"Configuration": row["label"], "Method": row["method"], "Variant": row["variant"],
                 "F1": f1, "NRMSE": nr}
        ids = {"configuration": row["label"], "method": row["method"], "variant": row["variant"]}
        for d, s in got.items():
            tidy += long_rows({**ids, "dataset": d, "label": _label(spec, d)}, {"f1": s["f1"], "nrmse": s["nrmse"]})
        overall = {"mean_f1": f1, "mean_nrmse": nr}
        if gate is not None:
            passed = round(f1, 4) >= gate["f1"] and round(nr, 4) <= gate["nrmse"]
            shown["Gate"] = "Pass" if passed else "Fail"
            overall["passes_gate"] = int(passed)
        rows.append(shown)
        tidy += long_rows({**ids, "dataset": "all", "label": "Mean"}, overall)
    df = panel_frame(rows)
    groups = [r.get("group", 0) for r in exp["rows"]]
    breaks = [i for i in range(1, len(groups)) if groups[i] != groups[i - 1]]
    note = f"Mean over {len(exp['datasets'])} datasets."
    if gate is not None:
        note += (f" Gate: mean F1 >= {gate['f1']} and mean NRMSE <= {gate['nrmse']}, HERMES's published "
                 "means over the same datasets.")
    else:
        note += (" No gate: HERMES's published means are over the canonical exports, not over these "
                 "datasets.")
    return Table("ablation", "Systematic simplification ablations",
                 [Panel("", df, {"F1": "metric", "NRMSE": "metric"}, {"F1": "max", "NRMSE": "min"},
                        rules_before=breaks)], tidy_frame(tidy), note)


def _rank_columns(df: pd.DataFrame, metric_cols: list[tuple[str, str]]) -> pd.Series:
    ranks = []
    for col, how in metric_cols:
        ranks.append(pd.to_numeric(df[col], errors="coerce").rank(ascending=(how == "min"), method="average",
                                                                  na_option="bottom"))
    return pd.concat(ranks, axis=1).mean(axis=1)


def canonical_panel(spec: dict, scores: dict, datasets: list[str], published: pd.DataFrame | None,
                    title: str) -> tuple[Panel, pd.DataFrame, int]:
    """One model's panel, its tidy rows and how many published baseline rows it holds."""
    methods = spec["experiments"]["canonical"]["methods"]
    keys = [spec["datasets"][d].get("published") for d in datasets]
    rows, sources = [], []
    for name, values in published_rows(published, keys).items():
        row = {"Method": name}
        for d, (f1, nrmse) in zip(datasets, values, strict=True):
            row[f"{_label(spec, d)} F1"] = f1
            row[f"{_label(spec, d)} NRMSE"] = nrmse
        rows.append(row)
        sources.append("published")
    n_published = len(rows)
    for m, v in methods:
        row = {"Method": _method_label(spec, m, v)}
        for d in datasets:
            s = _get(scores, d, m, v)["hermes"]
            row[f"{_label(spec, d)} F1"] = s["f1"]
            row[f"{_label(spec, d)} NRMSE"] = s["nrmse"]
        rows.append(row)
        sources.append("control" if _is_control(spec, m, v) else "measured")
    df = panel_frame(rows)
    metric_cols = [(f"{_label(spec, d)} {k}", "max" if k == "F1" else "min") for d in datasets for k in ("F1", "NRMSE")]
    ranked = np.array([source != "control" for source in sources])
    df["Rank"] = _rank_columns(df[ranked], metric_cols).reindex(df.index)
    for name, kind in (("Mean F1", "max"), ("Mean NRMSE", "min")):
        cols = [c for c, h in metric_cols if h == kind]
        if any(seeded(x) for c in cols for x in df[c]):  # means over seeds: the mean seed by seed
            df[name] = pd.Series([seed_mean([x for x in row if not pd.isna(x)]) if row.notna().any() else np.nan
                                  for _, row in df[cols].iterrows()], index=df.index, dtype=object)
        else:
            df[name] = df[cols].mean(axis=1, skipna=True)
    formats = {c: "metric" for c, _ in metric_cols} | {"Rank": "rank", "Mean F1": "metric", "Mean NRMSE": "metric"}
    best = dict(metric_cols) | {"Rank": "min", "Mean F1": "max", "Mean NRMSE": "min"}
    model = title.split()[0]
    tidy = []
    for (_, row), source in zip(df.iterrows(), sources, strict=True):
        ids = {"model": model, "method": row["Method"], "source": source}
        for d in datasets:
            tidy += long_rows({**ids, "dataset": d, "label": _label(spec, d)},
                              {"f1": row[f"{_label(spec, d)} F1"], "nrmse": row[f"{_label(spec, d)} NRMSE"]})
        tidy += long_rows({**ids, "dataset": "all", "label": "Mean"},
                          {"mean_f1": row["Mean F1"], "mean_nrmse": row["Mean NRMSE"], "mean_rank": row["Rank"]})
    controls = [i for i, source in enumerate(sources) if source == "control"]
    return Panel(title, df, formats, best, skip_best_rows=controls), tidy_frame(tidy), n_published


def table_canonical_quality(spec: dict, scores: dict, published: pd.DataFrame | None) -> Table:
    exp = spec["experiments"]["canonical"]
    panels, tidy, n_published = [], [], 0
    for model, title in (("si", "SI datasets"), ("sir", "SIR datasets")):
        if exp[model]:
            panel, rows, n = canonical_panel(spec, scores, exp[model], published, title)
            panels.append(panel)
            tidy.append(rows)
            n_published += n
    note = ("Baseline rows reproduce HERMES Table 2 (published values, data/published/hermes_table2.csv); "
            "Battus rows are measured by this run. Rank averages the metric columns (ties share the mean "
            "rank; a missing published value, SPIN's OOM, ranks last and is left out of its means).")
    if not n_published:
        note = "No published baseline applies to these datasets; only this run's methods are shown."
    else:
        note += convention_note(spec, scores, published)
    if spec.get("controls"):
        note += CONTROLS_NOTE
    return Table("canonical_quality", "Canonical reconstruction quality", panels,
                 pd.concat(tidy, ignore_index=True), note)


def convention_note(spec: dict, scores: dict, published: pd.DataFrame) -> str:
    """Whether a method's mean NRMSE still beats HERMES's published mean under DITTO's convention.

    This run's NRMSE is the paper's convention (SI keeps the 1/2 of a zero recovery term); DITTO's
    evaluation code gives sqrt(2) times that on SI. HERMES does not say which its published rows use,
    so the note gives both and names the methods whose comparison with HERMES flips.
    """
    exp = spec["experiments"]["canonical"]
    datasets = exp["si"] + exp["sir"]
    keys = [spec["datasets"][d].get("published") for d in datasets]
    hermes = published[published["method"] == "HERMES"].set_index("dataset")
    if not all(k in hermes.index for k in keys):
        return ""
    reference = float(np.mean([hermes.at[k, "nrmse"] for k in keys]))
    parts, flips = [], []
    for m, v in exp["methods"]:
        if _is_control(spec, m, v):
            continue
        got = [_get(scores, d, m, v)["hermes"] for d in datasets]
        if any("nrmse_ditto" not in s for s in got):
            return ""
        paper = float(np.mean([s["nrmse"] for s in got]))
        ditto = float(np.mean([s["nrmse_ditto"] for s in got]))
        label = label_text(_method_label(spec, m, v))
        parts.append(f"{label} {fmt_value(paper, 'metric')} -> {fmt_value(ditto, 'metric')}")
        if (paper < reference) != (ditto < reference):
            flips.append(label)
    verdict = (f" {', '.join(flips)} would no longer beat HERMES's published mean under DITTO's convention."
               if flips else " No comparison with HERMES's published mean changes.")
    return (f" Mean NRMSE under DITTO's evaluation code (SI x sqrt(2)), against HERMES's published "
            f"{fmt_value(reference, 'metric')} (its convention is not stated): " + "; ".join(parts) + "." + verdict)


def table_ditto_protocol(spec: dict, scores: dict, published: pd.DataFrame | None = None) -> Table:
    """The canonical comparison with only the final frame observed (DITTO's protocol), NRMSE under
    DITTO's evaluation code (nrmse_ditto) beside the paper's convention.

    ``published``: DITTO's own single-snapshot rows (DITTO_PUBLISHED), shown where every dataset of a
    panel maps to one of them (``published:`` in the config); they are on DITTO's convention, so their
    paper-convention mean is left empty rather than converted.
    """
    exp = spec["experiments"]["ditto_protocol"]
    panels, tidy, n_published = [], [], 0
    for model, title in (("si", "SI datasets"), ("sir", "SIR datasets")):
        datasets = exp[model]
        if not datasets:
            continue
        rows, sources = [], []
        keys = [spec["datasets"][d].get("published") for d in datasets]
        for name, values in published_rows(published, keys).items():
            row = {"Method": f"{name} (published)"}
            for d, (f1, nrmse) in zip(datasets, values, strict=True):
                row[f"{_label(spec, d)} F1"] = f1
                row[f"{_label(spec, d)} NRMSE (DITTO)"] = nrmse
            row["Mean F1"] = float(np.nanmean([f1 for f1, _ in values]))
            row["Mean NRMSE (DITTO)"] = float(np.nanmean([nrmse for _, nrmse in values]))
            row["Mean NRMSE (paper)"] = np.nan
            rows.append(row)
            sources.append("published")
            ids = {"model": model, "method": name, "source": "published", "protocol": "final"}
            for d, (f1, nrmse) in zip(datasets, values, strict=True):
                tidy += long_rows({**ids, "dataset": d, "label": _label(spec, d)},
                                  {"f1": f1, "nrmse_ditto_convention": nrmse})
            tidy += long_rows({**ids, "dataset": "all", "label": "Mean"},
                              {"mean_f1": row["Mean F1"], "mean_nrmse_ditto_convention": row["Mean NRMSE (DITTO)"]})
        n_published += len(rows)
        for m, v in exp["methods"]:
            variant = spec["ditto_variants"][f"{m}/{v}"]
            row = {"Method": _method_label(spec, m, variant)}
            got = {d: _get(scores, d, m, variant)["hermes"] for d in datasets}
            for d, s in got.items():
                row[f"{_label(spec, d)} F1"] = s["f1"]
                row[f"{_label(spec, d)} NRMSE (DITTO)"] = s["nrmse_ditto"]
            # means over datasets, seed by seed where the datasets repeat over seeds (seed_mean)
            row["Mean F1"] = seed_mean([s["f1"] for s in got.values()])
            row["Mean NRMSE (DITTO)"] = seed_mean([s["nrmse_ditto"] for s in got.values()])
            row["Mean NRMSE (paper)"] = seed_mean([s["nrmse"] for s in got.values()])
            rows.append(row)
            sources.append("control" if _is_control(spec, m, variant) else "measured")
            ids = {"model": model, "method": row["Method"], "source": sources[-1], "protocol": "final"}
            for d, s in got.items():
                tidy += long_rows({**ids, "dataset": d, "label": _label(spec, d)},
                                  {"f1": s["f1"], "nrmse_ditto_convention": s["nrmse_ditto"],
                                   "nrmse_paper_convention": s["nrmse"]})
            tidy += long_rows({**ids, "dataset": "all", "label": "Mean"},
                              {"mean_f1": row["Mean F1"], "mean_nrmse_ditto_convention": row["Mean NRMSE (DITTO)"],
                               "mean_nrmse_paper_convention": row["Mean NRMSE (paper)"]})
        df = panel_frame(rows)
        formats = {c: "metric" for c in df.columns if c != "Method"}
        best = {c: ("max" if "F1" in c else "min") for c in formats}
        controls = [i for i, source in enumerate(sources) if source == "control"]
        panels.append(Panel(title, df, formats, best, skip_best_rows=controls))
    note = ("Only the final frame observed (DITTO's protocol, KDD'23). NRMSE (DITTO) is computed as DITTO's "
            "evaluation code does (q-rz/KDD23-DITTO inc/test.py: for SI sqrt(MSE of infection times)/(T+1), "
            "sqrt(2) times the paper's convention, which keeps the 1/2 of a zero recovery term); SIR is the "
            "same under both.")
    if n_published:
        note += (f" Rows marked (published) are DITTO's own, not rerun ({DITTO_PUBLISHED}: Qiu et al., KDD'23, "
                 "Tables 4 and 5, same protocol and convention); HERMES Table 2's DITTO row equals them, so it "
                 "was measured with the final frame alone.")
    else:
        note += (" DITTO's published rows are over the canonical exports (ref. qiu2023ditto); these datasets "
                 "are not those, so none is shown.")
    if spec.get("controls"):
        note += CONTROLS_NOTE.replace("not ranked", "never bold")
    return Table("ditto_protocol", "Canonical quality under DITTO's protocol (final frame only)", panels,
                 tidy_frame(tidy), note)


SCORES_COLUMNS = ["dataset", "protocol", "method", "variant", "seed", "metric", "convention", "value"]


def protocol_of(observed_times: list[int], T: int) -> str:
    """The observation protocol a run was scored under: benchmark {floor(T/2), T}, final {T}, or custom."""
    from ..problem import schedule_times

    for name in ("benchmark", "final"):
        if list(observed_times) == schedule_times(T, name).tolist():
            return name
    return "custom"


def scores_long(runs: list, paths: list, seeds: dict, replicates: dict | None = None) -> pd.DataFrame:
    """Every number of every score file, one row each (SCORES_COLUMNS): the leaderboard's input.

    ``metric`` names the scorer and the measure (``hermes_f1``, ``unobserved_nrmse``,
    ``causal_violation_fraction``, ``time_ms``, ``calibration_brier``, ...); ``convention`` is
    ``paper`` or ``ditto`` for NRMSE and empty otherwise; ``seed`` is the simulation seed of a
    simulated dataset, empty for an imported one. A dataset simulated at another seed
    (``replicates``: its name -> the dataset it repeats) is written under the dataset it
    repeats, its own seed in ``seed``: one row per seed.
    """
    replicates = replicates or {}
    rows = []
    for (d, m, v), path in zip(runs, paths, strict=True):
        s = json.loads(Path(path).read_text())
        ids = {"dataset": replicates.get(d, d), "protocol": protocol_of(s["observed_times"], s["T"]),
               "method": m, "variant": v, "seed": "" if seeds.get(d) is None else seeds[d]}

        def add(metric: str, value, convention: str = "", ids: dict = ids) -> None:
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                rows.append({**ids, "metric": metric, "convention": convention, "value": value})

        for scorer in ("hermes", "unobserved"):
            add(f"{scorer}_f1", s[scorer]["f1"])
            add(f"{scorer}_nrmse", s[scorer]["nrmse"], "paper")
            add(f"{scorer}_nrmse", s[scorer].get("nrmse_ditto"), "ditto")
        causal = s["causal"]["prediction"]
        add("causal_violation_fraction", causal["rate"])
        add("causal_violations", causal["violations"])
        add("causal_events", causal["events"])
        add("time_ms", 1e3 * s["algorithm_seconds"])
        for key in ("brier", "log_loss", "ece", "overconfidence"):
            add(f"calibration_{key}", (s.get("calibration") or {}).get(key))
    return tidy_frame(rows).reindex(columns=SCORES_COLUMNS)


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


def table_calibration(spec: dict, scores: dict) -> Table:
    """Brier score, log-loss, ECE and overconfidence of the posteriors, on the unobserved frames."""
    exp = spec["experiments"]["calibration"]
    rows, tidy = [], []
    for m, v in exp["methods"]:
        lab = _method_label(spec, m, v)
        got = {d: _get(scores, d, m, v).get("calibration") for d in exp["datasets"]}
        missing = [d for d, c in got.items() if c is None]
        if missing:
            raise ValueError(f"{lab}: no posteriors scored on {', '.join(missing)} (a method without probabilities)")
        row = {"Method": lab}
        for key, name in (("brier", "Brier"), ("log_loss", "Log-loss"), ("ece", "ECE"),
                          ("overconfidence", "Overconfidence")):
            row[name] = seed_mean([c[key] for c in got.values()])
        rows.append(row)
        for d, c in got.items():
            tidy += long_rows({"method": lab, "dataset": d, "label": _label(spec, d)},
                              {k: c[k] for k in ("brier", "log_loss", "ece", "overconfidence")})
        tidy += long_rows({"method": lab, "dataset": "all", "label": "Mean"},
                          {"mean_brier": row["Brier"], "mean_log_loss": row["Log-loss"], "mean_ece": row["ECE"],
                           "mean_overconfidence": row["Overconfidence"]})
    df = panel_frame(rows)
    formats = {c: "metric" for c in df.columns if c != "Method"}
    best = {"Brier": "min", "Log-loss": "min", "ECE": "min"}
    verdicts = [f"{r['Method']} is {'over' if r['Overconfidence'] > 0 else 'under'}confident "
                f"({r['Overconfidence']:+.4f})" for r in rows]
    note = (f"Means over {len(exp['datasets'])} datasets, unobserved frames only. Brier: mean squared distance of "
            "the (S, I, R) probabilities to the true state; log-loss floored at 1e-15; ECE: expected calibration "
            "error of P(I or R) in 10 bins; overconfidence: mean probability of the most likely state minus how "
            "often it is right (positive = overconfident). " + "; ".join(verdicts) + ".")
    return Table("calibration", "Calibration of the posterior marginals", [Panel("", df, formats, best)],
                 tidy_frame(tidy), note)


def table_unobserved_quality(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["canonical"]
    datasets = exp["si"] + exp["sir"]
    rows, tidy, controls = [], [], []
    for m, v in exp["methods"]:
        got = {d: _get(scores, d, m, v) for d in datasets}
        lab = _method_label(spec, m, v)
        row = {"Method": lab}
        if _is_control(spec, m, v):
            controls.append(len(rows))
        for scorer, name in (("hermes", "HERMES"), ("unobserved", "Unobserved")):
            f1 = seed_mean([s[scorer]["f1"] for s in got.values()])
            nr = seed_mean([s[scorer]["nrmse"] for s in got.values()])
            row |= {f"{name} F1": f1, f"{name} NRMSE": nr}
            ids = {"method": lab, "scorer": scorer}
            for d, s in got.items():
                tidy += long_rows({**ids, "dataset": d, "label": _label(spec, d)},
                                  {"f1": s[scorer]["f1"], "nrmse": s[scorer]["nrmse"]})
            tidy += long_rows({**ids, "dataset": "all", "label": "Mean"}, {"mean_f1": f1, "mean_nrmse": nr})
        rows.append(row)
    df = panel_frame(rows)
    formats = {c: "metric" for c in df.columns if c != "Method"}
    best = {c: ("max" if c.endswith("F1") else "min") for c in formats}
    return Table("unobserved_quality", "Mean canonical quality with and without the observed frames",
                 [Panel("", df, formats, best, skip_best_rows=controls)], tidy_frame(tidy),
                 f"Means over {len(datasets)} datasets; unobserved-only drops every observed frame."
                 + (CONTROLS_NOTE.replace("not ranked", "never bold") if controls else ""))


def _causal_panel(spec: dict, scores: dict, datasets: list[str], title: str) -> tuple[Panel, list[dict]]:
    """Violation rates per dataset (percent in the panel, fractions and counts in the tidy rows)."""
    methods = spec["experiments"]["canonical"]["methods"]
    model = title.rsplit(" ", 1)[-1]
    rows, totals, tidy = [], {}, []
    for d in datasets:
        first = _get(scores, d, *methods[0])
        truth = first["causal"]["truth"]
        row = {"Dataset": _label(spec, d), "Truth": truth["rate"]}
        counts = {("Truth", "truth"): truth}
        for m, v in methods:
            counts[(_method_label(spec, m, v), v)] = _get(scores, d, m, v)["causal"]["prediction"]
        for (lab, variant), c in counts.items():
            row[lab] = c["rate"]
            totals.setdefault((lab, variant), []).append((c["violations"], c["events"]))
            tidy += long_rows({"panel": "A", "model": model, "dataset": d, "label": _label(spec, d),
                               "method": lab, "variant": variant},
                              {"violation_fraction": c["rate"], "violations": c["violations"],
                               "events": c["events"]})
        rows.append(row)
    weighted = {"Dataset": "Event-weighted"}
    for (lab, variant), pairs in totals.items():
        violations, events = sum(v for v, _ in pairs), sum(e for _, e in pairs)
        weighted[lab] = violations / events if events else 0.0
        tidy += long_rows({"panel": "A", "model": model, "dataset": "all", "label": "Event-weighted",
                           "method": lab, "variant": variant},
                          {"violation_fraction": weighted[lab], "violations": violations, "events": events})
    rows.append(weighted)
    df = panel_frame(rows).rename(columns=lambda c: c if c == "Dataset" else f"{c} (%)")
    cols = [f"{_method_label(spec, m, v)} (%)" for m, v in methods]
    panel = Panel(title, df, {c: "pct" for c in df.columns if c != "Dataset"}, row_best=(cols, "min"),
                  rules_before=[len(df) - 1])
    return panel, tidy


def rate_grid_panel(spec: dict, scores: dict) -> tuple[Panel, list[dict]]:
    exp = spec["experiments"]["rate_grid"]
    method = _method_label(spec, exp["method"], "default")
    rows, tidy = [], []
    for bi, br, variant in spec["rate_variants"]:
        row = {"beta_I": bi, "beta_R": br}
        for d in exp["datasets"]:
            record = _get(scores, d, exp["method"], variant)
            s = record["hermes"]
            row[f"{_label(spec, d)} F1"] = s["f1"]
            row[f"{_label(spec, d)} NRMSE"] = s["nrmse"]
            # the rates a run inferred with are what identifies it: beta_i/beta_r are rows too
            tidy += long_rows({"panel": "B", "model": record["model"].upper(), "dataset": d, "label": _label(spec, d),
                               "method": method, "variant": variant},
                              {"beta_i": bi, "beta_r": br, "f1": s["f1"], "nrmse": s["nrmse"]})
        rows.append(row)
    df = panel_frame(rows)
    metric = [c for c in df.columns if c.endswith(" F1") or c.endswith(" NRMSE")]
    panel = Panel(f"Panel B: {method} rate sensitivity (F1, NRMSE)", df,
                  {"beta_I": "rate", "beta_R": "rate"} | {c: "metric" for c in metric},
                  {c: ("max" if c.endswith("F1") else "min") for c in metric})
    return panel, tidy


def table_feasibility_sensitivity(spec: dict, scores: dict) -> Table:
    panels, tidy = [], []
    canon = spec["experiments"].get("canonical")
    if canon:
        for model in ("si", "sir"):
            if canon[model]:
                panel, rows = _causal_panel(spec, scores, canon[model],
                                            f"Panel A: causal-violation rate, {model.upper()}")
                panels.append(panel)
                tidy += rows
    if "rate_grid" in spec["experiments"]:
        panel, rows = rate_grid_panel(spec, scores)
        panels.append(panel)
        tidy += rows
    return Table("feasibility_sensitivity", "Causal feasibility and Battus-Z rate sensitivity", panels,
                 tidy_frame(tidy),
                 "Violation: a non-initial onset with no in-neighbour infected at the preceding frame (Eq. 8); "
                 "Panel A in percent of onsets.")


def table_tau_sensitivity(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["tau"]
    taus = list(spec["tau_variants"])
    method = _method_label(spec, exp["method"], "default")
    panels, tidy = [], []
    for metric, how, title in (("f1", "max", "Panel A: macro-F1"), ("nrmse", "min", "Panel B: NRMSE")):
        rows = []
        for d in exp["datasets"]:
            row = {"Dataset": _label(spec, d)}
            for t, variant in spec["tau_variants"].items():
                row[t] = _get(scores, d, exp["method"], variant)["hermes"][metric]
                tidy += long_rows({"method": method, "tau": float(t), "dataset": d, "label": _label(spec, d)},
                                  {metric: row[t]})
            rows.append(row)
        df = panel_frame(rows)
        mean = {"Dataset": "Mean"} | {t: seed_mean(df[t]) for t in taus}
        for t in taus:
            tidy += long_rows({"method": method, "tau": float(t), "dataset": "all", "label": "Mean"},
                              {f"mean_{metric}": mean[t]})
        df = pd.concat([df, panel_frame([mean])], ignore_index=True)
        panels.append(Panel(title, df, {t: "metric" for t in taus}, row_best=(taus, how),
                            rules_before=[len(df) - 1]))
    return Table("tau_sensitivity", "Decode-threshold sensitivity", panels, tidy_frame(tidy))


def table_rate_robustness(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["rate_robustness"]
    m, v = exp["method"]
    runs = spec["rate_runs"]  # [dataset, topology, model, beta_i, beta_r]
    pairs = list(dict.fromkeys((bi, br) for *_, bi, br in runs))
    cols = list(dict.fromkeys((topo, model) for _, topo, model, _, _ in runs))
    rows, tidy = [], []
    for bi, br in pairs:
        ref = math.isclose(bi, 0.1) and math.isclose(br, 0.1)
        row = {"Gen. (beta_I/beta_R)": f"{fmt_value(bi, 'rate')}/{fmt_value(br, 'rate')}" + (" (ref)" if ref else "")}
        for topo, model in cols:
            d = next(r[0] for r in runs if r[1] == topo and r[2] == model and (r[3], r[4]) == (bi, br))
            s = _get(scores, d, m, v)["hermes"]
            label = f"{topo.upper()}--{model.upper()}"
            row[f"{label} F1"] = s["f1"]
            row[f"{label} NRMSE"] = s["nrmse"]
            tidy += long_rows({"method": _method_label(spec, m, v), "generation_beta_i": bi,
                               "generation_beta_r": br, "reference": int(ref), "topology": topo,
                               "model": model.upper(), "dataset": d, "label": label},
                              {"f1": s["f1"], "nrmse": s["nrmse"]})
        rows.append(row)
    df = panel_frame(rows)
    metric = [c for c in df.columns if c.endswith(" F1") or c.endswith(" NRMSE")]
    return Table("rate_robustness", "Generation-side rate misspecification (Battus-Z at fixed rates)",
                 [Panel("", df, {c: "metric" for c in metric},
                        {c: ("max" if c.endswith("F1") else "min") for c in metric})], tidy_frame(tidy))


def _geomean(values: np.ndarray, axis: int | None = None) -> np.ndarray:
    return np.exp(np.log(np.clip(values, 1e-6, None)).mean(axis=axis))


def table_large_results(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["large"]
    rows, tidy = [], []
    for d in exp["datasets"]:
        for m, v in exp["methods"]:
            s = _get(scores, d, m, v)
            row = {"Graph": _label(spec, d), "Model": s["model"].upper(), "Method": _method_label(spec, m, v),
                   "F1": s["hermes"]["f1"], "NRMSE": s["hermes"]["nrmse"],
                   "Time (ms)": scaled(s["algorithm_seconds"], 1e3), "Backend": s.get("backend", ""),
                   "Device": s.get("device", "")}
            rows.append(row)
            tidy += long_rows({"model": row["Model"], "method": row["Method"], "dataset": d, "label": row["Graph"],
                               "backend": row["Backend"], "device": row["Device"]},
                              {"f1": row["F1"], "nrmse": row["NRMSE"], "time_ms": row["Time (ms)"]})
    df = panel_frame(rows)
    means = []
    for (model, method), grp in df.groupby(["Model", "Method"], sort=False):
        mean = {"Graph": "Mean", "Model": model, "Method": method, "F1": seed_mean(grp["F1"]),
                "NRMSE": seed_mean(grp["NRMSE"]),
                "Time (ms)": seed_mean(grp["Time (ms)"], _geomean),
                "Backend": "", "Device": ""}
        means.append(mean)
        tidy += long_rows({"model": model, "method": method, "dataset": "all", "label": "Mean",
                           "backend": ", ".join(sorted(set(grp["Backend"]))),
                           "device": ", ".join(sorted(set(grp["Device"])))},
                          {"mean_f1": mean["F1"], "mean_nrmse": mean["NRMSE"], "geomean_time_ms": mean["Time (ms)"]})
    first_mean = len(df)
    df = pd.concat([df, panel_frame(means)], ignore_index=True)
    return Table("large_results", "Large-graph results (time: fit-inference-decode interval)",
                 [Panel("", df, {"F1": "metric", "NRMSE": "metric", "Time (ms)": "ms"},
                        {"F1": "max", "NRMSE": "min", "Time (ms)": "min"}, best_by=["Graph", "Model"],
                        rules_before=[first_mean])],
                 tidy_frame(tidy), "Quality means are arithmetic, time means geometric.")


def seeds_note(table: Table) -> str:
    """What ``±`` means, where a table shows means over seeds ("" where none)."""
    counts = sorted({x.n for p in table.panels for col in p.frame.columns for x in p.frame[col] if seeded(x)})
    if not counts:
        return ""
    n = " or ".join(str(c) for c in counts)
    return (f"Simulated datasets repeated over {n} seeds: mean \u00b1 sample sd (ddof 1) over seeds; the CSV "
            "adds the 95% Student-t interval of the mean (_ci95_low, _ci95_high) and n_seeds.")


def build_table(name: str, spec: dict, scores: dict, histories: dict | None = None,
                published: pd.DataFrame | None = None) -> Table:
    """One of the paper's tables (REPORT_ITEMS) from its spec and scores; a note says what ``±`` means."""
    table = _build_table(name, spec, scores, histories, published)
    note = seeds_note(table)
    if note:
        table.note = f"{table.note} {note}".strip()
    return table


def _build_table(name: str, spec: dict, scores: dict, histories: dict | None,
                 published: pd.DataFrame | None) -> Table:
    if name == "datasets":
        return table_datasets(spec, histories or {})
    if name == "canonical_quality":
        return table_canonical_quality(spec, scores, published)
    if name == "ablation":
        return table_ablation(spec, scores, published)
    if name == "ditto_protocol":
        return table_ditto_protocol(spec, scores, published)
    builders = {
        "unobserved_quality": table_unobserved_quality,
        "calibration": table_calibration,
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
    from ..io import read_history

    p = read_history(path)
    return {"n": p.n, "edges": p.graph.num_edges, "arcs": p.graph.m, "T": p.T, "model": p.model,
            "directed": p.graph.directed}


# ---------------------------------------------------------------------------
# Figures

# One colour per run, whatever the configuration lists first: the methods and
# controls the package knows are fixed here; other runs (named ablations,
# plug-ins) and published baselines take a colour chosen from their key.
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
    method = _method_label(spec, exp["method"], "default")
    taus = [float(t) for t in spec["tau_variants"]]
    fig = _figure(10, 4.6)
    axes = fig.subplots(1, 2)
    for ax, metric, name in ((axes[0], "f1", "macro-F1"), (axes[1], "nrmse", "NRMSE")):
        curves = []
        for d in exp["datasets"]:
            ys = [_get(scores, d, exp["method"], v)["hermes"][metric] for v in spec["tau_variants"].values()]
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
        ax.set_ylabel(name)
        # end labels right of the last point, pushed apart so they do not overlap
        low, high = ax.get_ylim()
        ends = _spread([c[-1] for c in curves], gap=0.055 * (high - low))
        for d, c, y in zip(exp["datasets"], curves, ends, strict=True):
            ax.annotate(label_text(_label(spec, d)), (taus[-1], c[-1]), xytext=(8, y),
                        textcoords=("offset points", "data"), fontsize=8, color="0.3", va="center",
                        annotation_clip=False)
        ax.set_ylim(min(low, min(ends)), max(high, max(ends)))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=8)
    fig.suptitle(f"{method} decode-threshold sensitivity (grey: one dataset each)")
    return fig


def figure_rate_grid(spec: dict, scores: dict) -> Figure:
    exp = spec["experiments"]["rate_grid"]
    method = _method_label(spec, exp["method"], "default")
    bis, brs = exp["beta_i"], exp["beta_r"]
    nd = len(exp["datasets"])
    fig = _figure(3.8 * nd + 0.4, 6.6)
    axes = fig.subplots(2, nd, squeeze=False)
    variants = {(bi, br): v for bi, br, v in spec["rate_variants"]}
    for j, d in enumerate(exp["datasets"]):
        for i, (metric, cmap) in enumerate((("f1", "viridis"), ("nrmse", "viridis_r"))):
            grid = np.array([[_get(scores, d, exp["method"], variants[(bi, br)])["hermes"][metric] for br in brs]
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
            ax.set_title(f"{label_text(_label(spec, d))} {'macro-F1' if metric == 'f1' else 'NRMSE'}", fontsize=9)
            fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(f"{method} inference-rate grid")
    return fig


def _bar_offsets(n: int) -> tuple[np.ndarray, float]:
    width = 0.8 / max(1, n)
    return (np.arange(n) - (n - 1) / 2) * width, width


def figure_canonical_bars(spec: dict, scores: dict, published: pd.DataFrame | None) -> Figure:
    exp = spec["experiments"]["canonical"]
    datasets = exp["si"] + exp["sir"]
    series: dict[str, tuple[str, list]] = {}  # colour key -> (label, [(f1, nrmse)])
    for m, v in exp["methods"]:
        series[f"{m}/{v}"] = (_method_label(spec, m, v),
                              [(_get(scores, d, m, v)["hermes"]["f1"], _get(scores, d, m, v)["hermes"]["nrmse"])
                               for d in datasets])
    if published is not None:
        hermes = published[published["method"] == "HERMES"].set_index("dataset")
        keys = [spec["datasets"][d].get("published") for d in datasets]
        if all(k in hermes.index for k in keys if k) and any(keys):
            series["HERMES"] = ("HERMES (published)", [
                (hermes.at[k, "f1"], hermes.at[k, "nrmse"]) if k else (np.nan, np.nan) for k in keys
            ])
    fig = _figure(max(6.5, 0.9 * len(datasets) + 2), 7)
    axes = fig.subplots(2, 1, sharex=True)
    offsets, width = _bar_offsets(len(series))
    colors = method_colors(list(series))
    x = np.arange(len(datasets))
    spread = any(seeded(v[i]) for _, vals in series.values() for v in vals for i in range(2))
    for offset, (key, (lab, vals)) in zip(offsets, series.items(), strict=True):
        for i, ax in enumerate(axes):
            # repeated over seeds: the bar is the mean, its error bar one sd over seeds
            yerr = [seed_sd(v[i]) for v in vals] if spread else None
            ax.bar(x + offset, [float(v[i]) for v in vals], width, label=label_text(lab), color=colors[key],
                   yerr=yerr, error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "black"})
    # the axis rule: bars start at 0 on both metrics (a bar's length is its value)
    axes[0].set_ylim(0, 1)
    axes[1].set_ylim(bottom=0)
    axes[0].set_ylabel("macro-F1 (higher is better)")
    axes[1].set_ylabel("NRMSE (lower is better)")
    axes[1].set_xticks(x, [label_text(_label(spec, d)) for d in datasets], rotation=35, ha="right")
    handles, labels = axes[0].get_legend_handles_labels()
    # one column beside the panels: a row of long labels (controls, plug-ins) outgrows the canvas
    fig.legend(handles, labels, loc="outside right upper", fontsize=8)
    fig.suptitle("Per-dataset quality" + (" (error bars: \u00b11 sd over seeds)" if spread else ""))
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
        truths = [_get(scores, d, *exp["methods"][0])["causal"]["truth"] for d in datasets]
        truth_cv = sum(t["violations"] for t in truths) / max(1, sum(t["events"] for t in truths))
        ax.axvline(100 * truth_cv, color="grey", lw=0.8, ls=":" if model == "si" else "-.",
                   label=f"truth {model.upper()} violation rate")
        for m, v in exp["methods"]:
            runs = [_get(scores, d, m, v) for d in datasets]
            violations = sum(r["causal"]["prediction"]["violations"] for r in runs)
            events = sum(r["causal"]["prediction"]["events"] for r in runs)
            f1 = seed_mean([r["hermes"]["f1"] for r in runs])
            label = f"{label_text(_method_label(spec, m, v))} ({model.upper()})"
            ax.scatter(100 * violations / max(1, events), f1, marker=markers[model], color=colors[f"{m}/{v}"],
                       s=46, label=label)
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


def figure_timing(spec: dict, scores: dict, runs: list) -> Figure:
    rows = []
    replicates = spec.get("replicates", {})  # runs at other seeds are merged into their dataset's
    for d, m, v in dict.fromkeys((replicates.get(d, d), m, v) for d, m, v in runs):
        s = _get(scores, d, m, v)
        ms = scaled(s["algorithm_seconds"], 1e3)
        rows.append({"dataset": label_text(_label(spec, d)), "n": s["n"], "key": f"{m}/{v}",
                     "method": label_text(_method_label(spec, m, v)), "ms": float(ms), "sd": seed_sd(ms),
                     "backend": s.get("backend", "")})
    df = pd.DataFrame(rows).drop_duplicates(["dataset", "key"])
    order = df.groupby("dataset")["n"].first().sort_values().index.tolist()
    fig = _figure(max(6.5, 0.7 * len(order) + 2.5), 5)
    ax = fig.subplots()
    keys = list(dict.fromkeys(df["key"]))
    offsets, width = _bar_offsets(len(keys))
    colors = method_colors(keys)
    x = np.arange(len(order))
    for offset, key in zip(offsets, keys, strict=True):
        sub = df[df["key"] == key].set_index("dataset").reindex(order)
        # repeated over seeds: mean time, error bar one sd over seeds (clipped above 0 on the log axis)
        err = None if not (df["sd"] > 0).any() else [np.minimum(sub["sd"].fillna(0), 0.9 * sub["ms"]),
                                                      sub["sd"].fillna(0)]
        ax.bar(x + offset, sub["ms"], width, label=sub["method"].dropna().iloc[0], color=colors[key], yerr=err,
               error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "black"})
    ax.set_yscale("log")
    ax.set_ylabel("algorithm interval (ms, log scale)")
    n_of = df.groupby("dataset")["n"].first()
    ax.set_xticks(x, [f"{d}\nn={n_of[d]:,}" for d in order], rotation=35, ha="right", fontsize=7)
    backends = ", ".join(sorted(set(df["backend"])))
    ax.set_title(f"Fit-inference-decode time per run (backend: {backends})")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
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
        records = [r for d in exp["datasets"] for r in _get(scores, d, m, v).get("seeds", [_get(scores, d, m, v)])]
        pooled = pooled_reliability([r["calibration"]["reliability"] for r in records])
        seen = pooled["count"] > 0
        ax.plot(pooled["mean_predicted"][seen], pooled["observed_frequency"][seen], marker="o", color=colors[key],
                label=label_text(_method_label(spec, m, v)))
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

    from ..io import read_history, read_prediction

    problem = read_history(history_path, require_truth=True)
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
    fig.suptitle(f"{label_text(_label(spec, dataset))}: S (light), I (red), R (grey)")
    return fig


def render_figure(name: str, spec: dict, runs: list, inputs: dict) -> Figure:
    """One figure of REPORT_ITEMS from its input files (as :func:`make` reads them), not saved."""
    published = read_published(inputs["published"]) if "published" in inputs else None
    if name == "history_drawing":
        labels = [spec["labels"][f"{m}/{v}"] for _, m, v in runs]
        return figure_history_drawing(spec, runs[0][0], inputs["history"], list(inputs["predictions"]), labels)
    scores = load_scores(runs, list(inputs.get("scores", [])), spec.get("replicates"))
    figures = {
        "tau_curves": lambda: figure_tau_curves(spec, scores),
        "rate_grid_heatmaps": lambda: figure_rate_grid(spec, scores),
        "canonical_bars": lambda: figure_canonical_bars(spec, scores, published),
        "cv_vs_f1": lambda: figure_cv_vs_f1(spec, scores, published),
        "timing": lambda: figure_timing(spec, scores, runs),
        "reliability": lambda: figure_reliability(spec, scores),
    }
    if name not in figures:
        raise ValueError(f"unknown figure {name!r}")
    return figures[name]()


# ---------------------------------------------------------------------------
# The report of a workflow plan (battus.suite.experiments.Plan): which tables and
# figures it makes, what each one shows (its spec), and making one of them


@dataclass(frozen=True)
class ReportItem:
    """One table or figure: the experiments it shows and what else it reads."""

    kind: str  # "table" (CSV, Markdown, LaTeX) or "figure" (PNG)
    shows: tuple[str, ...]  # config experiments it prints and whose runs' scores it reads
    published: str | None = None  # also reads these published rows (a key of config `published:`)


REPORT_ITEMS = {
    "datasets": ReportItem("table", ("datasets",)),  # reads the histories, no scores
    # the published rows decide whether the ablation's gate applies (same datasets)
    "ablation": ReportItem("table", ("ablation",), published="hermes_table2"),
    "canonical_quality": ReportItem("table", ("canonical",), published="hermes_table2"),
    "unobserved_quality": ReportItem("table", ("canonical",)),
    "ditto_protocol": ReportItem("table", ("ditto_protocol",), published="ditto_kdd23"),
    "calibration": ReportItem("table", ("calibration",)),
    "feasibility_sensitivity": ReportItem("table", ("canonical", "rate_grid")),
    "tau_sensitivity": ReportItem("table", ("tau",)),
    "rate_robustness": ReportItem("table", ("rate_robustness",)),
    "large_results": ReportItem("table", ("large",)),
    "tau_curves": ReportItem("figure", ("tau",)),
    "rate_grid_heatmaps": ReportItem("figure", ("rate_grid",)),
    "canonical_bars": ReportItem("figure", ("canonical",), published="hermes_table2"),
    "cv_vs_f1": ReportItem("figure", ("canonical",), published="hermes_table2"),
    "timing": ReportItem("figure", ("canonical", "large")),
    "reliability": ReportItem("figure", ("calibration",)),
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
        # the methods under test: the truth is drawn anyway, the other yardsticks would crowd it
        return [(canonical["drawing"], m, v) for m, v in canonical["methods"] if not plan.is_yardstick(m)]
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
    # datasets simulated at another seed -> the dataset they repeat (their runs are merged)
    replicates = {d: plan.base_dataset(d) for d, _, _ in runs if plan.base_dataset(d) != d}
    names = list(dict.fromkeys(plan.base_dataset(d) for d, _, _ in runs))
    if name == "datasets":
        names = plan.experiments["datasets"]["datasets"]
    spec = {
        "name": plan.name,
        "experiments": experiments,
        "datasets": {d: plan.dataset_info(d) for d in names},
        "labels": {f"{m}/{v}": plan.run_label(m, v) for _, m, v in runs},
        "controls": sorted({f"{m}/{v}" for _, m, v in runs if plan.is_control(m)}),
    }
    if replicates:
        spec["replicates"] = replicates
    if "ditto_protocol" in experiments:
        methods = experiments["ditto_protocol"]["methods"]
        spec["ditto_variants"] = {f"{m}/{v}": plan.ditto_variant(v) for m, v in methods}
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
    if REPORT_ITEMS[name].kind == "figure":
        save_figure(render_figure(name, spec, runs, inputs), outputs[0])
        return f"wrote {outputs[0]}"
    published = read_published(inputs["published"]) if "published" in inputs else None
    scores = load_scores(runs, list(inputs.get("scores", [])), spec.get("replicates"))
    histories = None
    if "histories" in inputs:
        histories = {d: history_summary(p) for d, p in zip(spec["datasets"], inputs["histories"], strict=True)}
    table = build_table(name, spec, scores, histories=histories, published=published)
    write_table(table, *outputs)
    return f"wrote {outputs[0]} ({len(table.panels)} panels, {len(table.tidy)} CSV rows)"
