"""The paper's tables that compare methods on the canonical datasets: dataset statistics,
canonical quality (beside the published baselines), DITTO's protocol, unobserved-frame quality
and calibration of the posteriors."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .scores import (
    DITTO_PUBLISHED,
    UPSTREAM_MEASURED,
    UPSTREAM_TAG,
    dataset_label,
    is_control,
    measured_rows,
    method_label,
    protocol_text,
    published_rows,
    score_of,
)
from .seeds import seed_diff, seed_mean
from .tables import Panel, Table, fmt_value, label_text, long_rows, panel_frame, tidy_frame

CONVERTED_MARK = "\u2020"
CONVERTED_NOTE = ("converted, not printed by its authors: a published NRMSE under DITTO's convention restated "
                  "under the paper's, \u00f7\u221a2 on SI (DITTO's evaluation code gives \u221a2 times the "
                  "paper's value there, battus.score.nrmse) and unchanged on SIR; bold compares it as any "
                  "other cell.")

CONTROLS_NOTE = (" Controls (the truth; a random history consistent with the observations, which shows what the "
                 "protocol gives for free rather than a floor of zero) are shown for scale: never bold.")


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
                 [Panel("", df, formats)], tidy_frame(tidy),
                 protocol=("Data only (no reconstruction): T is the history's last frame; the quality tables "
                           "observe frames {\u230aT/2\u230b, T} of it unless they say otherwise."))


def rank_columns(df: pd.DataFrame, metric_cols: list[tuple[str, str]]) -> pd.Series:
    ranks = []
    for col, how in metric_cols:
        ranks.append(pd.to_numeric(df[col], errors="coerce").rank(ascending=(how == "min"), method="average",
                                                                  na_option="bottom"))
    return pd.concat(ranks, axis=1).mean(axis=1)


def negative_control(spec: dict, methods: list) -> tuple[str, str] | None:
    """The random control among ``methods`` (a random history consistent with the observations): the
    floor every method's margin is measured from; None where the experiment does not run it."""
    return next(((m, v) for m, v in methods if m == "random" and is_control(spec, m, v)), None)


def yardstick_note(spec: dict, scores: dict, datasets: list[str], methods: list, variant=lambda m, v: v) -> str:
    """What the random control and the baselines are for, from how they scored on ``datasets``: on how
    many each baseline's F1 (HERMES-compatible scorer) falls below the random control's. "" where the
    experiment runs no random control or no baseline. ``variant`` maps a config variant to the run's."""
    from ...baselines import BASELINES

    negative = negative_control(spec, [(m, variant(m, v)) for m, v in methods])
    baselines = [(m, variant(m, v)) for m, v in methods if m in BASELINES and not is_control(spec, m, variant(m, v))]
    if negative is None or not baselines or not datasets:
        return ""

    def f1(d: str, m: str, v: str) -> float:
        return round(float(score_of(scores, d, m, v)["hermes"]["f1"]), 4)

    below = {label_text(method_label(spec, m, v)): sum(f1(d, m, v) < f1(d, *negative) for d in datasets)
             for m, v in baselines}
    counts = " and ".join(f"{label} on {k}" for label, k in below.items())
    text = (f" Measured here, the random control's F1 is above {counts} of the {len(datasets)} datasets. "
            "The random control is the floor a method's margin is read from. The "
            "baselines are fixed dating rules with no diffusion model (observed copy: every change as early as "
            "the observations allow; graph distance: by arc distance to the region not yet reached)")
    if all(k == len(datasets) for k in below.values()):
        return text + (": below the floor on every dataset, they show what committing to such a rule costs, "
                       "not a bar above the control, and beating them is no evidence of quality.")
    return text + (": where they fall below the control they show what such a rule costs; where above, how "
                   "much the observations (and the graph) give without a model.")


def _mean_over(values: list) -> float:
    values = [x for x in values if not pd.isna(x)]
    return seed_mean(values) if values else np.nan


def canonical_panel(spec: dict, scores: dict, datasets: list[str], published: pd.DataFrame | None,
                    title: str, measured: pd.DataFrame | None = None) -> tuple[Panel, pd.DataFrame, dict]:
    """One model's panel, its tidy rows and what its notes say (published rows, the control's place).

    Rows: published baselines (tagged), then the upstream methods' rows measured under this protocol
    (``measured``, tagged; never ranked or bold, a mean only over a complete panel), above a rule, then
    this run's methods, baselines and controls.
    Rank averages the metric columns' ranks over every row but the controls; a control's rank is the
    place it would take among them (they keep theirs). ``ΔF1``/``ΔNRMSE vs random``: the mean over
    datasets of a row's value minus the random control's (seed by seed where there are seeds).
    """
    methods = spec["experiments"]["canonical"]["methods"]
    keys = [spec["datasets"][d].get("published") for d in datasets]
    rows, sources, names = [], [], []
    for name, values in published_rows(published, keys).items():
        row = {"Method": f"{name} (published)"}
        for d, (f1, nrmse) in zip(datasets, values, strict=True):
            row[f"{dataset_label(spec, d)} F1"] = f1
            row[f"{dataset_label(spec, d)} NRMSE"] = nrmse
        rows.append(row)
        sources.append("published")
        names.append(name)
    n_published = len(rows)
    incomplete = []  # upstream rows without a value on some dataset: no mean, no margin
    for name, values in measured_rows(measured, spec, datasets, "benchmark").items():
        row = {"Method": name}
        for d, got in zip(datasets, values, strict=True):
            row[f"{dataset_label(spec, d)} F1"] = np.nan if got is None else got["f1"]
            row[f"{dataset_label(spec, d)} NRMSE"] = np.nan if got is None else got["nrmse"]
        if any(got is None for got in values):
            incomplete.append(len(rows))
        rows.append(row)
        sources.append("upstream")
        names.append(name)
    n_external = len(rows)
    for m, v in methods:
        row = {"Method": method_label(spec, m, v)}
        for d in datasets:
            s = score_of(scores, d, m, v)["hermes"]
            row[f"{dataset_label(spec, d)} F1"] = s["f1"]
            row[f"{dataset_label(spec, d)} NRMSE"] = s["nrmse"]
        rows.append(row)
        sources.append("control" if is_control(spec, m, v) else "measured")
        names.append(row["Method"])
    df = panel_frame(rows)
    metric_cols = [(f"{dataset_label(spec, d)} {k}", "max" if k == "F1" else "min")
                   for d in datasets for k in ("F1", "NRMSE")]
    ranked = np.array([source not in ("control", "upstream") for source in sources])
    df["Rank"] = rank_columns(df[ranked], metric_cols).reindex(df.index)
    for i in np.flatnonzero(np.array(sources) == "control"):  # where a control would place, the others keeping theirs
        with_it = ranked.copy()
        with_it[i] = True
        df.at[df.index[i], "Rank"] = rank_columns(df[with_it], metric_cols).at[df.index[i]]
    for name, kind in (("Mean F1", "max"), ("Mean NRMSE", "min")):
        cols = [c for c, h in metric_cols if h == kind]
        df[name] = pd.Series([np.nan if i in incomplete else _mean_over(list(row))
                              for i, (_, row) in enumerate(df[cols].iterrows())], index=df.index, dtype=object)
    negative = negative_control(spec, methods)
    margins = {}
    if negative is not None:
        floor = len(rows) - len(methods) + methods.index(list(negative))
        for kind in ("F1", "NRMSE"):
            cols = [f"{dataset_label(spec, d)} {kind}" for d in datasets]
            col = f"\u0394 vs random {kind}"
            margins[kind] = col
            df[col] = pd.Series([np.nan if sources[i] == "control" or i in incomplete else
                                 _mean_over([seed_diff(df.at[i, c], df.at[floor, c]) for c in cols
                                             if not pd.isna(df.at[i, c])])
                                 for i in range(len(df))], index=df.index, dtype=object)
    formats = ({c: "metric" for c, _ in metric_cols} | {"Rank": "rank", "Mean F1": "metric", "Mean NRMSE": "metric"}
               | {c: "metric" for c in margins.values()})
    best = dict(metric_cols) | {"Rank": "min", "Mean F1": "max", "Mean NRMSE": "min"}
    model = title.split()[0]
    tidy = []
    for (_, row), source, name in zip(df.iterrows(), sources, names, strict=True):
        ids = {"model": model, "method": name, "source": "measured_upstream" if source == "upstream" else source}
        for d in datasets:
            f1, nrmse = row[f"{dataset_label(spec, d)} F1"], row[f"{dataset_label(spec, d)} NRMSE"]
            extra = {}
            if margins and source != "control":
                extra = {"f1_minus_random_control": np.nan if pd.isna(f1) else
                         seed_diff(f1, df.at[floor, f"{dataset_label(spec, d)} F1"]),
                         "nrmse_minus_random_control": np.nan if pd.isna(nrmse) else
                         seed_diff(nrmse, df.at[floor, f"{dataset_label(spec, d)} NRMSE"])}
            tidy += long_rows({**ids, "dataset": d, "label": dataset_label(spec, d)},
                              {"f1": f1, "nrmse": nrmse} | extra)
        aggregate = {"mean_f1": row["Mean F1"], "mean_nrmse": row["Mean NRMSE"], "mean_rank": row["Rank"]}
        if source == "upstream":
            del aggregate["mean_rank"]
        if margins and source != "control":
            aggregate |= {"mean_f1_minus_random_control": row[margins["F1"]],
                          "mean_nrmse_minus_random_control": row[margins["NRMSE"]]}
        tidy += long_rows({**ids, "dataset": "all", "label": "Mean"}, aggregate)
    # controls and the upstream rows measured elsewhere: shown for scale, never bold nor compared
    controls = [i for i, source in enumerate(sources) if source in ("control", "upstream")]
    facts = {"n_published": n_published, "n_ranked": int(ranked.sum()), "model": model,
             "upstream": [n for n, source in zip(names, sources, strict=True) if source == "upstream"]}
    from ...baselines import BASELINES

    under_test = {method_label(spec, m, v) for m, v in methods if m not in BASELINES}
    if negative is not None:
        r = df.loc[floor]
        others = df[ranked]
        pub = df[np.array(sources) == "published"]
        facts["control"] = {
            "label": r["Method"], "rank": float(r["Rank"]), "f1": float(r["Mean F1"]), "nrmse": float(r["Mean NRMSE"]),
            "place": int((pd.to_numeric(others["Rank"]) < float(r["Rank"])).sum()) + 1,
            "f1_beats_published": int((pd.to_numeric(pub["Mean F1"]) < float(r["Mean F1"])).sum()),
            "nrmse_beats_published": int((pd.to_numeric(pub["Mean NRMSE"]) > float(r["Mean NRMSE"])).sum()),
            "worse_nrmse": [(label_text(df.at[i, "Method"]), label_text(c.rsplit(" ", 1)[0]),
                             float(df.at[i, c]), float(df.at[floor, c]))
                            for i in range(len(df)) if sources[i] == "measured" and names[i] in under_test
                            for c, h in metric_cols if h == "min" and not pd.isna(df.at[i, c])
                            and round(float(df.at[i, c]), 4) > round(float(df.at[floor, c]), 4)],
        }
    rules = [k for k in dict.fromkeys((n_published, n_external)) if 0 < k < len(rows)]
    return (Panel(title, df, formats, best, skip_best_rows=controls, rules_before=rules), tidy_frame(tidy),
            facts)


def _control_note(facts: list[dict]) -> str:
    """What the random control's place says about the protocol, panel by panel."""
    parts, worse = [], []
    for f in facts:
        c = f.get("control")
        if not c:
            continue
        text = (f"{f['model']}: mean F1 {fmt_value(c['f1'], 'metric')}, NRMSE {fmt_value(c['nrmse'], 'metric')}, "
                f"rank {c['rank']:.2f} (place {c['place']} of {f['n_ranked'] + 1})")
        if f["n_published"]:
            text += (f"; better mean F1 than {c['f1_beats_published']} and lower mean NRMSE than "
                     f"{c['nrmse_beats_published']} of the {f['n_published']} published methods")
        parts.append(text)
        worse += [f"{m} on {d} ({fmt_value(x, 'metric')} against {fmt_value(y, 'metric')})"
                  for m, d, x, y in c["worse_nrmse"]]
    if not parts:
        return ""
    note = (" The random control (a random history consistent with the observations) is not a floor of "
            "zero: " + "; ".join(parts) + ". Much of the score is free under this protocol (the observed "
            "frames count and the final frame is pinned), so read every comparison through the "
            "\u0394 vs random columns (mean over datasets of value minus the control's; \u0394F1 > 0 and "
            "\u0394NRMSE < 0 are better than the control).")
    if worse:
        note += " Methods under test with NRMSE worse than the random control's: " + "; ".join(worse) + "."
    return note


def canonical_title(spec: dict, datasets: list[str], what: str) -> str:
    """A title that names the data: the canonical HERMES suite only where every dataset is one of its
    exports (``published:`` in the config), else the datasets' groups."""
    if all(spec["datasets"][d].get("published") for d in datasets):
        return f"{what} on the canonical HERMES suite"
    groups = list(dict.fromkeys(spec["datasets"][d].get("group") or "" for d in datasets))
    groups = [g[0].lower() + g[1:] if g[1:2].islower() else g for g in groups if g]
    named = ", ".join(groups[:-1]) + f" and {groups[-1]}" if len(groups) > 1 else (groups or ["these"])[0]
    return f"{what} on {named} datasets (not the canonical suite)"


def table_canonical_quality(spec: dict, scores: dict, published: pd.DataFrame | None,
                            measured: pd.DataFrame | None = None) -> Table:
    """This run's methods beside HERMES's published Table 2 and the upstream methods' rows measured under
    the same protocol (``measured``, :func:`~battus.suite.report.scores.read_measured`)."""
    exp = spec["experiments"]["canonical"]
    panels, tidy, facts = [], [], []
    for model, title in (("si", "SI datasets"), ("sir", "SIR datasets")):
        if exp[model]:
            panel, rows, f = canonical_panel(spec, scores, exp[model], published, title, measured)
            panels.append(panel)
            tidy.append(rows)
            facts.append(f)
    n_published = sum(f["n_published"] for f in facts)
    note = ("Rows tagged (published) reproduce HERMES Table 2 (published values, not rerun: "
            "data/published/hermes_table2.csv), above the rule; the rows below are measured by this run. "
            "Rank averages the ranks of the metric columns (ties share the mean rank; a missing published "
            "value, SPIN's OOM, ranks last and is left out of its means).")
    if not n_published:
        note = ("No published baseline applies to these datasets; only this run's methods are shown. Rank "
                "averages the ranks of the metric columns (ties share the mean rank).")
    else:
        if any(f["n_ranked"] != 11 for f in facts):
            ranked = "; ".join(f"{f['model']} {f['n_ranked']}" for f in facts)
            note += (f" Rows ranked: {ranked}, not the paper's 11 (its 9 published methods, Battus and "
                     "Battus-Z): a published method's rank here is not the paper's (the paper-vs-measured "
                     "table, paper_comparison, gives both).")
        note += convention_note(spec, scores, published)
    shown = list(dict.fromkeys(n for f in facts for n in f["upstream"]))
    if shown:
        note += upstream_note(shown, "two-snapshot (HERMES's)") + (
            " The upstream code reads only the final frame, so under this protocol it gets the same input "
            "as under DITTO's and ignores the frame ⌊T/2⌋: these rows are not a reproduction of "
            "HERMES's rows of CRI, DHREC, GCN and GIN in the paper's Table 2.")
    if spec.get("controls"):
        note += (" Controls (the truth, a random consistent history) are never bold and take no rank from "
                 "the others; a control's Rank is the place it would take among them.")
    note += _control_note(facts)
    datasets = exp["si"] + exp["sir"]
    note += yardstick_note(spec, scores, datasets, exp["methods"])
    records = [score_of(scores, d, m, v) for d in datasets for m, v in exp["methods"]]
    return Table("canonical_quality", canonical_title(spec, datasets, "Reconstruction quality"), panels,
                 pd.concat(tidy, ignore_index=True), note, protocol_text(records))


def convention_note(spec: dict, scores: dict, published: pd.DataFrame) -> str:
    """Whether a method's mean NRMSE still beats HERMES's published mean under DITTO's convention.

    This run's NRMSE is the paper's convention (SI keeps the 1/2 of a zero recovery term); DITTO's
    evaluation code gives sqrt(2) times that on SI. HERMES does not say which its published rows use,
    so the note gives both and says, method by method, whether its comparison with HERMES flips.
    """
    exp = spec["experiments"]["canonical"]
    datasets = exp["si"] + exp["sir"]
    keys = [spec["datasets"][d].get("published") for d in datasets]
    hermes = published[published["method"] == "HERMES"].set_index("dataset")
    if not all(k in hermes.index for k in keys):
        return ""
    reference = float(np.mean([hermes.at[k, "nrmse"] for k in keys]))
    parts, flips, kept = [], [], []
    for m, v in exp["methods"]:
        if is_control(spec, m, v):
            continue
        got = [score_of(scores, d, m, v)["hermes"] for d in datasets]
        if any("nrmse_ditto" not in s for s in got):
            return ""
        paper = float(np.mean([s["nrmse"] for s in got]))
        ditto = float(np.mean([s["nrmse_ditto"] for s in got]))
        label = label_text(method_label(spec, m, v))
        shown = f"{label} ({fmt_value(paper, 'metric')} \u2192 {fmt_value(ditto, 'metric')})"
        parts.append(shown)
        if (paper < reference) != (ditto < reference):
            flips.append(shown)
        elif ditto < reference:
            kept.append(label)
    verdict = ""
    if flips:
        verdict += f" Only {', '.join(flips)} would no longer beat HERMES's published mean under DITTO's convention."
    if kept:
        verdict += f" {', '.join(kept)} beat{'s' if len(kept) == 1 else ''} it under both."
    if not flips and not kept:
        verdict = " No comparison with HERMES's published mean changes."
    return (f" Mean NRMSE over the {len(datasets)} datasets, paper's convention \u2192 DITTO's evaluation code "
            f"(SI \u00d7\u221a2), against HERMES's published {fmt_value(reference, 'metric')} (its convention is "
            f"not stated): " + "; ".join(parts) + "." + verdict)


def upstream_note(shown: list[str], protocol: str) -> str:
    """What the rows tagged :data:`UPSTREAM_TAG` are (``shown``: their labels, "" where none is)."""
    if not shown:
        return ""
    names = ", ".join(label.removesuffix(f" {UPSTREAM_TAG}") for label in shown)
    return (f" Rows tagged {UPSTREAM_TAG} ({names}) were measured by running the unmodified code of "
            f"q-rz/KDD23-DITTO through its plug-ins (examples/methods) under the {protocol} protocol "
            f"({UPSTREAM_MEASURED}; docs/benchmarks.md, section 5), not by this run; a cell is empty "
            "where a dataset was not run or did not finish, and a mean is given only where every dataset of "
            "the panel has a value. They are never ranked, bold or compared.")


def _upstream_row(datasets: list[str], values: list[dict | None], columns: dict[str, str]) -> dict:
    """One upstream method's cells: ``columns`` maps a column suffix to its score key; NaN where a
    dataset was not run."""
    row = {}
    for d, got in zip(datasets, values, strict=True):
        for suffix, key in columns.items():
            row[(d, suffix)] = np.nan if got is None else got[key]
    return row


def _complete_mean(values: list[dict | None], key: str) -> float:
    """The mean over a panel's datasets, only where every one of them has a value."""
    if any(v is None or pd.isna(v[key]) for v in values):
        return np.nan
    return float(np.mean([v[key] for v in values]))


def table_ditto_protocol(spec: dict, scores: dict, published: pd.DataFrame | None = None,
                         measured: pd.DataFrame | None = None) -> Table:
    """The canonical comparison with only the final frame observed (DITTO's protocol), NRMSE under
    DITTO's evaluation code (nrmse_ditto) beside the paper's convention.

    ``published``: DITTO's own single-snapshot rows (DITTO_PUBLISHED), shown where every dataset of a
    panel maps to one of them (``published:`` in the config); they are on DITTO's convention, so their
    paper-convention mean is converted (:func:`battus.score.paper_from_ditto`: SI divided by √2, SIR
    the same) and marked with :data:`CONVERTED_MARK`, which the caption explains.

    ``measured``: the upstream methods' measured rows (:func:`~battus.suite.report.scores.read_measured`),
    those of the final-frame protocol shown below the published ones, tagged, never ranked or bold.
    """
    # imported here: battus.score loads the scorers' Numba kernels (0.2 s), which no other table needs
    from ...score import paper_from_ditto

    exp = spec["experiments"]["ditto_protocol"]
    panels, tidy, n_published, records, upstream = [], [], 0, [], []
    for model, title in (("si", "SI datasets"), ("sir", "SIR datasets")):
        datasets = exp[model]
        if not datasets:
            continue
        rows, sources = [], []
        keys = [spec["datasets"][d].get("published") for d in datasets]
        for name, values in published_rows(published, keys).items():
            row = {"Method": f"{name} (published)"}
            for d, (f1, nrmse) in zip(datasets, values, strict=True):
                row[f"{dataset_label(spec, d)} F1"] = f1
                row[f"{dataset_label(spec, d)} NRMSE (DITTO)"] = nrmse
            row["Mean F1"] = float(np.nanmean([f1 for f1, _ in values]))
            row["Mean NRMSE (DITTO)"] = float(np.nanmean([nrmse for _, nrmse in values]))
            # DITTO prints only its own convention: the paper's is the stated conversion, marked
            row["Mean NRMSE (paper)"] = paper_from_ditto(row["Mean NRMSE (DITTO)"], model)
            rows.append(row)
            sources.append("published")
            ids = {"model": model, "method": name, "source": "published", "protocol": "final"}
            for d, (f1, nrmse) in zip(datasets, values, strict=True):
                tidy += long_rows({**ids, "dataset": d, "label": dataset_label(spec, d)},
                                  {"f1": f1, "nrmse_ditto_convention": nrmse})
            tidy += long_rows({**ids, "dataset": "all", "label": "Mean"},
                              {"mean_f1": row["Mean F1"], "mean_nrmse_ditto_convention": row["Mean NRMSE (DITTO)"],
                               "mean_nrmse_paper_convention_converted": row["Mean NRMSE (paper)"]})
        n_published += len(rows)
        for name, values in measured_rows(measured, spec, datasets, "final").items():
            cells = _upstream_row(datasets, values, {"F1": "f1", "NRMSE (DITTO)": "nrmse_ditto"})
            row = {"Method": name} | {f"{dataset_label(spec, d)} {suffix}": x for (d, suffix), x in cells.items()}
            row["Mean F1"] = _complete_mean(values, "f1")
            row["Mean NRMSE (DITTO)"] = _complete_mean(values, "nrmse_ditto")
            row["Mean NRMSE (paper)"] = _complete_mean(values, "nrmse")
            rows.append(row)
            sources.append("upstream")
            upstream.append(name)
            ids = {"model": model, "method": name, "source": "measured_upstream", "protocol": "final"}
            for d, got in zip(datasets, values, strict=True):
                if got is not None:
                    tidy += long_rows({**ids, "dataset": d, "label": dataset_label(spec, d)},
                                      {"f1": got["f1"], "nrmse_ditto_convention": got["nrmse_ditto"],
                                       "nrmse_paper_convention": got["nrmse"]})
            tidy += long_rows({**ids, "dataset": "all", "label": "Mean"},
                              {"mean_f1": row["Mean F1"], "mean_nrmse_ditto_convention": row["Mean NRMSE (DITTO)"],
                               "mean_nrmse_paper_convention": row["Mean NRMSE (paper)"]})
        for m, v in exp["methods"]:
            variant = spec["ditto_variants"][f"{m}/{v}"]
            row = {"Method": method_label(spec, m, variant)}
            got = {d: score_of(scores, d, m, variant)["hermes"] for d in datasets}
            for d, s in got.items():
                row[f"{dataset_label(spec, d)} F1"] = s["f1"]
                row[f"{dataset_label(spec, d)} NRMSE (DITTO)"] = s["nrmse_ditto"]
            # means over datasets, seed by seed where the datasets repeat over seeds (seed_mean)
            row["Mean F1"] = seed_mean([s["f1"] for s in got.values()])
            row["Mean NRMSE (DITTO)"] = seed_mean([s["nrmse_ditto"] for s in got.values()])
            row["Mean NRMSE (paper)"] = seed_mean([s["nrmse"] for s in got.values()])
            rows.append(row)
            sources.append("control" if is_control(spec, m, variant) else "measured")
            ids = {"model": model, "method": row["Method"], "source": sources[-1], "protocol": "final"}
            for d, s in got.items():
                tidy += long_rows({**ids, "dataset": d, "label": dataset_label(spec, d)},
                                  {"f1": s["f1"], "nrmse_ditto_convention": s["nrmse_ditto"],
                                   "nrmse_paper_convention": s["nrmse"]})
            tidy += long_rows({**ids, "dataset": "all", "label": "Mean"},
                              {"mean_f1": row["Mean F1"], "mean_nrmse_ditto_convention": row["Mean NRMSE (DITTO)"],
                               "mean_nrmse_paper_convention": row["Mean NRMSE (paper)"]})
        df = panel_frame(rows)
        paper_col = "Mean NRMSE (paper)"
        if len(datasets) == 1:  # a mean over one dataset would repeat its cells
            paper_col = f"{dataset_label(spec, datasets[0])} NRMSE (paper)"
            df = df.drop(columns=["Mean F1", "Mean NRMSE (DITTO)"]).rename(columns={"Mean NRMSE (paper)": paper_col})
        formats = {c: "metric" for c in df.columns if c != "Method"}
        best = {c: ("max" if "F1" in c else "min") for c in formats}
        # controls and the upstream rows measured elsewhere: shown for scale, never bold nor compared
        controls = [i for i, source in enumerate(sources) if source in ("control", "upstream")]
        n_pub = sources.count("published")
        n_ext = n_pub + sources.count("upstream")  # rows not measured by this run, above its own
        marks = {(i, paper_col): CONVERTED_MARK for i, source in enumerate(sources) if source == "published"}
        panels.append(Panel(title, df, formats, best, skip_best_rows=controls,
                            rules_before=[k for k in dict.fromkeys((n_pub, n_ext)) if 0 < k < len(rows)],
                            marks=marks,
                            mark_notes={CONVERTED_MARK: CONVERTED_NOTE} if marks else {}))
        records += [score_of(scores, d, m, spec["ditto_variants"][f"{m}/{v}"]) for d in datasets
                    for m, v in exp["methods"]]
    note = ("Only the final frame observed (DITTO's protocol, KDD'23). NRMSE (DITTO) is computed as DITTO's "
            "evaluation code does (q-rz/KDD23-DITTO inc/test.py: for SI \u221a(MSE of infection times)/(T+1), "
            "\u00d7\u221a2 the paper's convention, which keeps the 1/2 of a zero recovery term); SIR is the "
            "same under both.")
    if n_published:
        note += (f" Rows marked (published) are DITTO's own, not rerun ({DITTO_PUBLISHED}: Qiu et al., KDD'23, "
                 "Tables 4 and 5, same protocol and convention), above the rule; HERMES Table 2's DITTO row "
                 "equals them, so it was measured with the final frame alone.")
    else:
        note += (" DITTO's published rows are over the canonical exports (ref. qiu2023ditto); these datasets "
                 "are not those, so none is shown.")
    note += upstream_note(list(dict.fromkeys(upstream)), "final-frame (DITTO's)")
    if spec.get("controls"):
        note += CONTROLS_NOTE
    datasets = exp["si"] + exp["sir"]
    note += yardstick_note(spec, scores, datasets, exp["methods"], lambda m, v: spec["ditto_variants"][f"{m}/{v}"])
    title = canonical_title(spec, datasets, "Quality under DITTO's protocol (final frame only)")
    return Table("ditto_protocol", title, panels, tidy_frame(tidy), note,
                 protocol_text(records, conventions=("ditto", "paper"), schedule="final"))


def table_calibration(spec: dict, scores: dict) -> Table:
    """Brier score, log-loss, ECE and overconfidence of the posteriors, on the unobserved frames."""
    exp = spec["experiments"]["calibration"]
    rows, tidy = [], []
    for m, v in exp["methods"]:
        lab = method_label(spec, m, v)
        got = {d: score_of(scores, d, m, v).get("calibration") for d in exp["datasets"]}
        missing = [d for d, c in got.items() if c is None]
        if missing:
            raise ValueError(f"{lab}: no posteriors scored on {', '.join(missing)} (a method without probabilities)")
        row = {"Method": lab}
        for key, name in (("brier", "Brier"), ("log_loss", "Log-loss"), ("ece", "ECE"),
                          ("overconfidence", "Overconfidence")):
            row[name] = seed_mean([c[key] for c in got.values()])
        rows.append(row)
        for d, c in got.items():
            tidy += long_rows({"method": lab, "dataset": d, "label": dataset_label(spec, d)},
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
    records = [score_of(scores, d, m, v) for d in exp["datasets"] for m, v in exp["methods"]]
    protocol = protocol_text(records, scorer="unobserved", conventions=()) + " No NRMSE."
    return Table("calibration", "Calibration of the posterior marginals", [Panel("", df, formats, best)],
                 tidy_frame(tidy), note, protocol)


def table_unobserved_quality(spec: dict, scores: dict) -> Table:
    exp = spec["experiments"]["canonical"]
    datasets = exp["si"] + exp["sir"]
    rows, tidy, controls = [], [], []
    for m, v in exp["methods"]:
        got = {d: score_of(scores, d, m, v) for d in datasets}
        lab = method_label(spec, m, v)
        row = {"Method": lab}
        if is_control(spec, m, v):
            controls.append(len(rows))
        for scorer, name in (("hermes", "HERMES"), ("unobserved", "Unobserved")):
            f1 = seed_mean([s[scorer]["f1"] for s in got.values()])
            nr = seed_mean([s[scorer]["nrmse"] for s in got.values()])
            row |= {f"{name} F1": f1, f"{name} NRMSE": nr}
            ids = {"method": lab, "scorer": scorer}
            for d, s in got.items():
                tidy += long_rows({**ids, "dataset": d, "label": dataset_label(spec, d)},
                                  {"f1": s[scorer]["f1"], "nrmse": s[scorer]["nrmse"]})
            tidy += long_rows({**ids, "dataset": "all", "label": "Mean"}, {"mean_f1": f1, "mean_nrmse": nr})
        rows.append(row)
    df = panel_frame(rows)
    formats = {c: "metric" for c in df.columns if c != "Method"}
    best = {c: ("max" if c.endswith("F1") else "min") for c in formats}
    records = [score_of(scores, d, m, v) for d in datasets for m, v in exp["methods"]]
    return Table("unobserved_quality",
                 canonical_title(spec, datasets, "Mean quality with and without the observed frames"),
                 [Panel("", df, formats, best, skip_best_rows=controls)], tidy_frame(tidy),
                 f"Means over {len(datasets)} datasets; unobserved-only drops every observed frame."
                 + (CONTROLS_NOTE if controls else ""),
                 protocol_text(records, scorer="both"))
