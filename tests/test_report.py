"""Table assembly and figures of battus.suite.report, on scores built from the paper's own numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from battus.suite import report

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "data/published/hermes_table2.csv"
PAPER = ROOT / "data/published/battus_paper.csv"
SI = ["BA-SI", "ER-SI", "Oregon2-SI", "Prost-SI", "BrFarmers-SI", "Pol-SI"]
SIR = ["BA-SIR", "ER-SIR", "Oregon2-SIR", "Prost-SIR", "Covid-SIR", "Hebrew-SIR"]


def _score(f1, nrmse, model="sir", ms=1.0, pv=1, pe=10, tv=0, te=10, uf1=None, unr=None):
    return {
        "hermes": {"f1": f1, "nrmse": nrmse},
        "unobserved": {"f1": f1 - 0.03 if uf1 is None else uf1, "nrmse": nrmse + 0.01 if unr is None else unr},
        "causal": {"prediction": {"violations": pv, "events": pe, "rate": pv / pe},
                   "truth": {"violations": tv, "events": te, "rate": tv / te}},
        "algorithm_seconds": ms / 1e3, "model": model, "n": 1000, "backend": "cpu", "device": "test",
    }


@pytest.fixture(scope="module")
def canonical():
    """Spec and scores reproducing the paper's canonical table from its published rows."""
    paper = report.read_published(PAPER)
    datasets = {k.lower(): {"label": k.replace("-", "--"), "published": k} for k in SI + SIR}
    spec = {
        "experiments": {"canonical": {"si": [k.lower() for k in SI], "sir": [k.lower() for k in SIR],
                                      "methods": [["battus", "default"], ["battus-z", "default"]]}},
        "datasets": datasets,
        "labels": {"battus/default": "Battus", "battus-z/default": "Battus-Z"},
    }
    scores = {}
    for _, row in paper.iterrows():
        method = "battus" if row["method"] == "Battus" else "battus-z"
        model = "si" if row["dataset"].endswith("-SI") else "sir"
        scores[f"{row['dataset'].lower()}|{method}|default"] = _score(row["f1"], row["nrmse"], model)
    return spec, scores


def test_canonical_table_reproduces_paper_ranks_and_means(canonical):
    spec, scores = canonical
    table = report.build_table("canonical_quality", spec, scores, published=report.read_published(PUBLISHED))
    si, sir = (p.frame.assign(Method=p.frame["Method"].str.removesuffix(" (published)")).set_index("Method")
               for p in table.panels)
    # the paper's summary columns (tab:canonical-quality), rank over 12 metric columns incl. SPIN's OOM
    expected_si = {"GCN": (7.42, .8063, .2549), "SPIN": (6.00, .8596, .1812), "HERMES": (2.88, .8918, .1426),
                   "Battus": (1.79, .8957, .0935), "Battus-Z": (1.92, .8963, .0957)}
    expected_sir = {"GRIN": (4.75, .7544, .1510), "HERMES": (2.92, .8467, .1540),
                    "Battus": (3.25, .8503, .1749), "Battus-Z": (1.58, .8488, .1063)}
    for frame, expected in ((si, expected_si), (sir, expected_sir)):
        for method, (rank, f1, nrmse) in expected.items():
            assert round(frame.at[method, "Rank"], 2) == pytest.approx(rank, abs=0.006), method
            assert round(frame.at[method, "Mean F1"], 4) == pytest.approx(f1, abs=1e-4), method
            assert round(frame.at[method, "Mean NRMSE"], 4) == pytest.approx(nrmse, abs=1e-4), method
    assert len(si) == 11 and np.isnan(si.at["SPIN", "Pol--SI F1"])


def test_write_table_formats(tmp_path, canonical):
    spec, scores = canonical
    table = report.build_table("canonical_quality", spec, scores, published=report.read_published(PUBLISHED))
    paths = [tmp_path / f"t.{ext}" for ext in ("csv", "md", "tex")]
    report.write_table(table, *paths)
    csv = pd.read_csv(paths[0], keep_default_na=False)
    # tidy: one row per number, every cell filled, labels with an en dash
    assert list(csv.columns) == ["model", "method", "source", "dataset", "label", "metric", "value"]
    assert (csv != "").all().all()
    z = csv[(csv["method"] == "Battus-Z") & (csv["dataset"] == "ba-si")].set_index("metric")["value"]
    assert z["f1"] == pytest.approx(0.9014) and set(csv.loc[csv["dataset"] == "ba-si", "label"]) == {"BA\u2013SI"}
    # SPIN's OOM on Pol-SI is a missing row, not a blank cell
    spin = csv[(csv["method"] == "SPIN") & (csv["dataset"] == "pol-si")]
    assert spin.empty and len(csv[(csv["method"] == "SPIN") & (csv["model"] == "SI")]) == 5 * 2 + 3
    assert len(csv) == 22 * 6 * 2 - 2 + 22 * 3  # 22 rows x (six f1/nrmse pairs, less SPIN's) + 3 aggregates
    md = paths[1].read_text()
    assert "| Battus-Z" in md and "**.9014**" in md  # best BA-SI F1 in bold, paper number style
    text = [line for line in md.splitlines() if not set(line) <= set("|:- ")]  # not the header rule
    assert "BA\u2013SI F1" in md and not [line for line in text if "--" in line]
    tex = paths[2].read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"\textbf{1.79}" in tex
    assert r"\label{tab:canonical-quality}" in tex and r"\multicolumn{2}{c}{BA--SI}" in tex and "\u2013" not in tex
    assert r"\begin{table*}" in tex and r"\resizebox" in tex and tex.isascii()
    # published rows tagged and above a rule, the run's rows below
    assert "GCN (published)" in tex and tex.index("HERMES (published)") < tex.index(r"\midrule", tex.index(
        "HERMES (published)")) < tex.index("Battus &")


def test_feasibility_csv_stores_fractions_and_counts_under_their_names(canonical, tmp_path):
    spec, scores = canonical
    scores = dict(scores)
    scores["ba-si|battus-z|default"] = _score(0.9, 0.1, "si", pv=3, pe=40, tv=0, te=40)
    table = report.build_table("feasibility_sensitivity", spec, scores)
    report.write_table(table, tmp_path / "f.csv", tmp_path / "f.md", tmp_path / "f.tex")
    csv = pd.read_csv(tmp_path / "f.csv", keep_default_na=False)
    assert (csv != "").all().all()
    row = csv[(csv["dataset"] == "ba-si") & (csv["method"] == "Battus-Z")].set_index("metric")["value"]
    assert row["violation_fraction"] == pytest.approx(0.075) and row["violations"] == 3 and row["events"] == 40
    fractions = csv.loc[csv["metric"] == "violation_fraction", "value"]
    assert not any("%" in c for c in csv.columns) and fractions.between(0, 1).all()
    md = (tmp_path / "f.md").read_text()
    assert "Battus-Z (%)" in md and "7.50" in md  # the Markdown says percent and prints percent


def test_fmt_value():
    assert report.fmt_value(0.87264, "metric") == ".8726"
    assert report.fmt_value(1.0, "metric") == "1.0000"
    assert report.fmt_value(0.075, "pct") == "7.50"
    assert report.fmt_value(float("nan"), "metric") == "--"
    assert report.fmt_value(1234567, "int") == "1,234,567"
    assert report.fmt_value(0.05, "rate") == ".05"


def test_bold_marks_ties():
    df = pd.DataFrame({"M": ["a", "b", "c"], "F1": [0.9, 0.9, 0.8], "NRMSE": [0.2, 0.1, 0.3]})
    panel = report.Panel("", df, {"F1": "metric", "NRMSE": "metric"}, {"F1": "max", "NRMSE": "min"})
    mask = report.bold_mask(panel)
    assert mask["F1"].tolist() == [True, True, False]
    assert mask["NRMSE"].tolist() == [False, True, False]


def test_ablation_gate_and_unobserved(canonical):
    spec, scores = canonical
    datasets = spec["experiments"]["canonical"]["si"] + spec["experiments"]["canonical"]["sir"]
    spec = {**spec, "experiments": {**spec["experiments"], "ablation": {
        "datasets": datasets, "gate": {"f1": 0.8692, "nrmse": 0.1483},
        "rows": [{"label": "Battus", "method": "battus", "variant": "default", "group": 0},
                 {"label": "Battus-Z", "method": "battus-z", "variant": "default", "group": 0}]}}}
    frame = report.build_table("ablation", spec, scores).panels[0].frame.set_index("Configuration")
    assert round(frame.at["Battus", "F1"], 4) == 0.8730 and round(frame.at["Battus", "NRMSE"], 4) == 0.1342
    assert round(frame.at["Battus-Z", "F1"], 4) == 0.8726 and round(frame.at["Battus-Z", "NRMSE"], 4) == 0.1010
    assert "Gate" not in frame  # no published rows given: no gate
    gated = report.build_table("ablation", spec, scores, published=report.read_published(PUBLISHED))
    assert set(gated.panels[0].frame["Gate"]) == {"Pass"} and "same datasets" in gated.note
    # four of the twelve: HERMES's published means are over other data, so no gate
    four = {**spec["experiments"]["ablation"], "datasets": datasets[:2] + datasets[6:8]}
    partial = report.build_table("ablation", {**spec, "experiments": {**spec["experiments"], "ablation": four}},
                                 scores, published=report.read_published(PUBLISHED))
    assert "Gate" not in partial.panels[0].frame and "No gate" in partial.note
    assert "passes_gate" not in set(partial.tidy["metric"])
    unobs = report.build_table("unobserved_quality", spec, scores).panels[0].frame
    assert unobs["Unobserved F1"].iloc[1] == pytest.approx(unobs["HERMES F1"].iloc[1] - 0.03)


def test_paper_gate_is_hermes_published_mean_over_its_datasets():
    """The gate shown on the paper's ablation is HERMES's mean over the very datasets it averages."""
    import yaml

    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    ablation = config["experiments"]["ablation"]
    keys = [config["datasets"][d]["published"] for d in ablation["datasets"]]
    hermes = report.read_published(PUBLISHED).query("method == 'HERMES'").set_index("dataset")
    assert sorted(keys) == sorted(hermes.index)
    assert hermes.loc[keys, "f1"].mean() == pytest.approx(ablation["gate"]["f1"], abs=1e-4)
    assert hermes.loc[keys, "nrmse"].mean() == pytest.approx(ablation["gate"]["nrmse"], abs=1e-4)


def test_causal_panel_is_event_weighted(canonical):
    spec, scores = canonical
    scores = dict(scores)
    scores["ba-si|battus-z|default"] = _score(0.9, 0.1, "si", pv=1, pe=100, tv=0, te=100)
    scores["er-si|battus-z|default"] = _score(0.9, 0.1, "si", pv=30, pe=100, tv=0, te=100)
    table = report.build_table("feasibility_sensitivity", spec, scores)
    frame = table.panels[0].frame.set_index("Dataset")
    assert len(table.panels) == 2  # SI and SIR panels, no rate grid
    assert frame.at["BA--SI", "Battus-Z (%)"] == pytest.approx(0.01)


def _grid_spec(tmp_path):
    spec = {
        "experiments": {
            "tau": {"method": "battus-z", "datasets": ["a", "b"], "taus": [0.5, 0.65]},
            "rate_grid": {"method": "battus-z", "datasets": ["a"], "beta_i": [0.1, 0.2], "beta_r": [0.1]},
            "rate_robustness": {"method": ["battus-z", "default"]},
            "large": {"datasets": ["a", "b"], "methods": [["battus", "default"], ["battus-z", "default"]]},
            "canonical": {"si": ["a"], "sir": ["b"], "methods": [["battus", "default"], ["battus-z", "default"]]},
        },
        "datasets": {"a": {"label": "A"}, "b": {"label": "B"}, "rr1": {}, "rr2": {}},
        "labels": {"battus/default": "Battus", "battus-z/default": "Battus-Z"},
        "tau_variants": {"0.50": "tau-0.50", "0.65": "default"},
        "rate_variants": [[0.1, 0.1, "default"], [0.2, 0.1, "rates-0.20-0.10"]],
        "rate_runs": [["rr1", "ba", "sir", 0.1, 0.1], ["rr2", "ba", "sir", 0.2, 0.05]],
    }
    rng = np.random.default_rng(0)
    scores = {}
    for d in ("a", "b", "rr1", "rr2"):
        for m, v in (("battus", "default"), ("battus-z", "default"), ("battus-z", "tau-0.50"),
                     ("battus-z", "rates-0.20-0.10")):
            scores[f"{d}|{m}|{v}"] = _score(0.8 + 0.1 * rng.random(), 0.1 + 0.05 * rng.random(),
                                            ms=10 ** rng.uniform(0, 3))
    return spec, scores


def test_sweep_tables(tmp_path):
    spec, scores = _grid_spec(tmp_path)
    tau = report.build_table("tau_sensitivity", spec, scores)
    assert [p.title for p in tau.panels] == ["Panel A: macro-F1", "Panel B: NRMSE"]
    assert list(tau.panels[0].frame["Dataset"]) == ["A", "B", "Mean"]
    rr = report.build_table("rate_robustness", spec, scores).panels[0].frame
    assert rr.iloc[0, 0] == ".10/.10 (ref)" and "BA--SIR F1" in rr.columns
    large = report.build_table("large_results", spec, scores).panels[0].frame
    means = large[large["Graph"] == "Mean"]
    assert len(means) == 2  # one model (SIR) x two methods
    sub = large[(large["Graph"] != "Mean") & (large["Method"] == "Battus")]
    geo = float(np.exp(np.log(sub["Time (ms)"]).mean()))
    assert means[means["Method"] == "Battus"]["Time (ms)"].iloc[0] == pytest.approx(geo)
    for name in ("tau_sensitivity", "rate_robustness", "large_results", "feasibility_sensitivity"):
        t = report.build_table(name, spec, scores)
        report.write_table(t, tmp_path / f"{name}.csv", tmp_path / f"{name}.md", tmp_path / f"{name}.tex")
        assert (tmp_path / f"{name}.tex").read_text().count(r"\toprule") == len(t.panels)
        csv = pd.read_csv(tmp_path / f"{name}.csv", keep_default_na=False)
        assert list(csv.columns[-2:]) == ["metric", "value"] and (csv != "").all().all(), name
    tidy = pd.read_csv(tmp_path / "large_results.csv")
    geo_row = tidy[(tidy["dataset"] == "all") & (tidy["method"] == "Battus") & (tidy["metric"] == "geomean_time_ms")]
    assert geo_row["value"].iloc[0] == pytest.approx(geo)
    tau_csv = pd.read_csv(tmp_path / "tau_sensitivity.csv")
    assert sorted(set(tau_csv["tau"])) == [0.5, 0.65] and set(tau_csv["metric"]) == {"f1", "nrmse", "mean_f1",
                                                                                     "mean_nrmse"}


def test_generators_are_seeded_and_simple():
    from battus.generators import barabasi_albert, erdos_renyi, generate, power_law

    ba = barabasi_albert(1000, 4, seed=1)
    assert ba.n == 1000 and ba.num_edges == 3984 and not ba.directed  # the canonical BA size
    er = erdos_renyi(1000, 3987, seed=2)
    assert er.num_edges == 3987
    pl = power_law(5000, 20000, seed=3)
    assert pl.num_edges == 20000 and pl.in_degree().max() > 10 * pl.in_degree().mean()
    again = generate("ba", 1, n=1000, m=4)
    assert np.array_equal(again.indices, ba.indices) and np.array_equal(again.indptr, ba.indptr)
    src, dst = ba.arcs()
    assert not np.any(src == dst)


def test_latex_midrules_separate_groups_and_means(canonical):
    spec, scores = canonical
    datasets = spec["experiments"]["canonical"]["si"]
    rows = [{"label": "Battus", "method": "battus", "variant": "default", "group": 0},
            {"label": "Battus-Z", "method": "battus-z", "variant": "default", "group": 0},
            {"label": "Battus-Z again", "method": "battus-z", "variant": "default", "group": 1}]
    spec = {**spec, "experiments": {**spec["experiments"], "ablation": {
        "datasets": datasets, "gate": {"f1": 0.8692, "nrmse": 0.1483}, "rows": rows}}}
    tex = report.table_latex(report.build_table("ablation", spec, scores))
    body = tex[tex.index(r"\midrule"):tex.index(r"\bottomrule")].splitlines()
    assert body[0] == r"\midrule" and body[3] == r"\midrule" and body[4].startswith("Battus-Z again")
    feas = report.table_latex(report.build_table("feasibility_sensitivity", spec, scores))
    assert feas.count(r"\midrule") == 4  # header rule + one before "Event-weighted", per panel


def test_make_writes_a_table_and_a_figure_from_score_files(tmp_path):
    """report.make, the one entry point of the workflow's table and figure rules."""
    import json

    spec, scores = _grid_spec(tmp_path)
    runs = [tuple(key.split("|")) for key in scores]
    paths = []
    for i, record in enumerate(scores.values()):
        paths.append(tmp_path / f"score{i}.json")
        paths[-1].write_text(json.dumps(record))
    outputs = [tmp_path / f"tau.{ext}" for ext in ("csv", "md", "tex")]
    summary = report.make("tau_sensitivity", spec, runs, {"scores": paths}, outputs)
    assert "2 panels" in summary and all(p.stat().st_size > 0 for p in outputs)
    report.make("timing", spec, runs, {"scores": paths}, [tmp_path / "timing.png"])
    report.make("tau_curves", spec, runs, {"scores": paths}, [tmp_path / "tau.png"])
    assert (tmp_path / "timing.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="2 score files"):
        report.make("tau_sensitivity", spec, runs, {"scores": paths[:2]}, outputs)


def test_check_paper_tables_reads_the_tidy_csv(tmp_path, canonical, capsys):
    """workflow_scripts/check_paper_tables.py: every Battus-Z cell of the paper, missing ones fail."""
    import sys

    import yaml

    sys.path.insert(0, str(ROOT / "workflow_scripts"))
    from check_paper_tables import main

    spec, scores = canonical
    table = report.build_table("canonical_quality", spec, scores, published=report.read_published(PUBLISHED))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"datasets": {d: {"published": info["published"]}
                                                   for d, info in spec["datasets"].items()}}))
    csv = tmp_path / "canonical_quality.csv"
    csv.write_text(report.table_csv(table))
    assert main([str(csv), "--config", str(config)]) == 0
    assert "24/24 Battus-Z cells" in capsys.readouterr().out
    tidy = pd.read_csv(csv)
    cell = (tidy["method"] == "Battus-Z") & (tidy["dataset"] == "covid-sir") & (tidy["metric"] == "nrmse")
    tidy.loc[cell, "value"] += 0.0002
    tidy.to_csv(csv, index=False)
    assert main([str(csv), "--config", str(config)]) == 1
    assert "MISMATCH Battus-Z Covid-SIR NRMSE" in capsys.readouterr().out
    tidy[~cell].to_csv(csv, index=False)
    assert main([str(csv), "--config", str(config)]) == 1
    assert "MISSING Battus-Z Covid-SIR nrmse" in capsys.readouterr().out


def test_controls_are_shown_but_never_ranked_or_bold(canonical):
    """The positive control beats everything by construction: it must not take rank 1 or the bold."""
    spec, scores = canonical
    spec = {**spec, "experiments": {"canonical": {**spec["experiments"]["canonical"],
                                                  "methods": [["battus", "default"], ["battus-z", "default"],
                                                              ["truth", "default"]]}},
            "labels": {**spec["labels"], "truth/default": "Truth (positive control)"},
            "controls": ["truth/default"]}
    scores = dict(scores)
    for key in list(scores):
        dataset, method, _ = key.split("|")
        if method == "battus":
            scores[f"{dataset}|truth|default"] = _score(1.0, 0.0, scores[key]["model"])
    without = report.build_table("canonical_quality", {**spec, "controls": []}, scores)
    table = report.build_table("canonical_quality", spec, scores)
    panel = table.panels[0]
    frame = panel.frame.set_index("Method")
    # a control's rank is the place it would take; the others keep the ranks they have without it
    assert frame.at["Truth (positive control)", "Rank"] == 1.0
    assert frame.at["Battus", "Rank"] < without.panels[0].frame.set_index("Method").at["Battus", "Rank"]
    alone = report.build_table("canonical_quality", {**spec, "experiments": {"canonical": {
        **spec["experiments"]["canonical"], "methods": [["battus", "default"], ["battus-z", "default"]]}}}, scores)
    assert frame.at["Battus", "Rank"] == alone.panels[0].frame.set_index("Method").at["Battus", "Rank"]
    bold = report.bold_mask(panel)
    truth_row = list(frame.index).index("Truth (positive control)")
    assert not bold.iloc[truth_row].any() and bold.drop(index=truth_row).any().any()
    assert "never bold" in table.note and "the place it would take" in table.note
    assert set(table.tidy.loc[table.tidy["method"] == "Truth (positive control)", "source"]) == {"control"}


def test_scores_long_has_one_row_per_number_with_protocol_and_convention(tmp_path):
    import json

    def record(observed, f1, calibration=None):
        s = _score(f1, 0.1, "si")
        s["hermes"]["nrmse_ditto"] = s["unobserved"]["nrmse_ditto"] = 0.1 * 2**0.5
        s |= {"observed_times": observed, "T": 10}
        if calibration:
            s["calibration"] = calibration
        return s

    runs = [("ba-si", "battus-z", "default"), ("ba-si", "battus-z", "final"), ("pol-si", "truth", "default")]
    records = [record([5, 10], 0.9, {"brier": 0.2, "log_loss": 0.3, "ece": 0.01, "overconfidence": 0.02}),
               record([10], 0.8), record([3, 10], 1.0)]
    paths = []
    for i, r in enumerate(records):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(r))
    frame = report.scores_long(runs, paths, {"ba-si": 7})
    assert list(frame.columns) == report.SCORES_COLUMNS and not frame.isna().any().any()
    assert frame.groupby("variant")["protocol"].first().to_dict() == {"default": "benchmark", "final": "final"}
    assert set(frame.loc[frame["dataset"] == "pol-si", "protocol"]) == {"custom"}
    assert set(frame.loc[frame["dataset"] == "ba-si", "seed"]) == {7} and set(frame.loc[frame["dataset"] == "pol-si",
                                                                                       "seed"]) == {""}
    nrmse = frame[(frame["metric"] == "hermes_nrmse") & (frame["variant"] == "default")]
    assert dict(zip(nrmse["convention"], nrmse["value"], strict=True)) == pytest.approx({"paper": 0.1,
                                                                                        "ditto": 0.1 * 2**0.5})
    assert (frame["metric"] == "calibration_brier").sum() == 1  # only the run with posteriors
    assert not frame.duplicated(["dataset", "protocol", "method", "variant", "seed", "metric", "convention"]).any()


def test_canonical_note_says_which_comparison_flips_under_dittos_convention(canonical):
    """From the paper's own rows: Battus-Z's mean NRMSE .1010 becomes .1209 (still below HERMES's .1483),
    fitted Battus's .1342 becomes .1535 (above it)."""
    spec, scores = canonical
    scores = {k: {**s, "hermes": {**s["hermes"], "nrmse_ditto": s["hermes"]["nrmse"] * (2**0.5 if s["model"] == "si"
                                                                                         else 1.0)}}
              for k, s in scores.items()}
    table = report.build_table("canonical_quality", spec, scores, published=report.read_published(PUBLISHED))
    assert "Battus-Z (.1010 \u2192 .1209)" in table.note and "Battus (.1342 \u2192 .1535)" in table.note
    assert "Only Battus (.1342 \u2192 .1535) would no longer beat HERMES's published mean" in table.note
    assert "Battus-Z beats it under both" in table.note and "Battus-Z (.1010 \u2192 .1209) would" not in table.note


def test_bold_needs_a_difference_beyond_the_intervals():
    """A mean over seeds is bold only where its 95% interval clears the runner-up's; exact ties of
    single runs are all bold; controls and single timings never."""
    stat = report.SeedStat
    df = pd.DataFrame({"M": ["a", "b", "c"]})
    df["F1"] = pd.Series([stat([0.8691, 0.8672, 0.8710]), stat([0.8688, 0.8649, 0.8727]), 0.5], dtype=object)
    df["Far"] = pd.Series([stat([0.90, 0.91, 0.92]), stat([0.70, 0.71, 0.72]), 0.5], dtype=object)
    df["Time"] = [1.0, 2.0, 3.0]
    df["Tie"] = [0.9, 0.9, 0.95]
    panel = report.Panel("", df, {"F1": "metric", "Far": "metric", "Time": "ms", "Tie": "metric"},
                         {"F1": "max", "Far": "max", "Time": "min", "Tie": "max"}, skip_best_rows=[2])
    mask = report.bold_mask(panel)
    assert not mask["F1"].any()  # .8691 +- .0019 against .8688 +- .0039: no difference shown
    assert mask["Far"].tolist() == [True, False, False]
    assert not mask["Time"].any()  # a single timing on a shared machine
    assert mask["Tie"].tolist() == [True, True, False]  # the control's .95 is not compared


def _with_random(canonical):
    spec, scores = canonical
    spec = {**spec, "experiments": {"canonical": {**spec["experiments"]["canonical"], "methods": [
        ["battus", "default"], ["battus-z", "default"], ["truth", "default"], ["random", "default"]]}},
            "labels": {**spec["labels"], "truth/default": "Truth (positive control)",
                       "random/default": "Random (negative control)"},
            "controls": ["random/default", "truth/default"]}
    scores = dict(scores)
    for key in list(scores):
        dataset, method, _ = key.split("|")
        if method == "battus":
            s = scores[key]
            scores[f"{dataset}|truth|default"] = _score(1.0, 0.0, s["model"], pv=0)
            scores[f"{dataset}|random|default"] = _score(s["hermes"]["f1"] - 0.05, 0.13, s["model"], pv=5)
    return spec, scores


def test_canonical_ranks_the_random_control_and_gives_margins_over_it(canonical):
    spec, scores = _with_random(canonical)
    table = report.build_table("canonical_quality", spec, scores, published=report.read_published(PUBLISHED))
    si = table.panels[0].frame.set_index("Method")
    # NRMSE .13 beats every published SI method's (HERMES .1426): the control places high, marked as such
    assert 1 < si.at["Random (negative control)", "Rank"] < si.at["GRIN (published)", "Rank"]
    assert np.isnan(si.at["Random (negative control)", "\u0394 vs random F1"])
    assert si.at["Battus", "\u0394 vs random F1"] == pytest.approx(0.05)
    assert si.at["Battus-Z", "\u0394 vs random NRMSE"] == pytest.approx(si.at["Battus-Z", "Mean NRMSE"] - 0.13)
    tidy = table.tidy
    margin = tidy[(tidy["method"] == "HERMES") & (tidy["metric"] == "mean_nrmse_minus_random_control")]
    assert margin["value"].tolist() == pytest.approx([0.1426 - 0.13, 0.1540 - 0.13], abs=1e-4)
    assert "lower mean NRMSE than 9 of the 9 published methods" in table.note and "not a floor" in table.note
    assert "Protocol: observed frames" in table.caption_text() and "NRMSE: the paper's convention" in table.protocol
    assert table.caption == "Reconstruction quality on the canonical HERMES suite"


def test_feasibility_lists_the_truth_once_and_bolds_only_the_methods_under_test(canonical):
    spec, scores = _with_random(canonical)
    table = report.build_table("feasibility_sensitivity", spec, scores)
    panel = table.panels[0]
    assert [c for c in panel.frame.columns if "Truth" in c] == ["Truth (%)"]
    mask = report.bold_mask(panel)
    assert not mask["Truth (%)"].any() and not mask["Random (negative control) (%)"].any()
    assert mask[["Battus (%)", "Battus-Z (%)"]].any(axis=1).all()
    assert table.caption == "Causal feasibility" and not panel.title.startswith("Panel A")


def test_paper_comparison_puts_the_papers_numbers_beside_ours(canonical):
    spec, scores = _with_random(canonical)
    scores = dict(scores)
    farmers = scores["brfarmers-si|battus|default"]
    scores["brfarmers-si|battus|default"] = {**farmers, "hermes": {"f1": 0.9035, "nrmse": 0.0853}}
    paper = report.read_published(ROOT / "data/published/battus_paper_tables.csv")
    from battus.suite.report.paper_comparison import table_paper_comparison

    table = table_paper_comparison(spec, scores, paper)
    cells = table.panels[0].frame
    row = cells[(cells["Method"] == "Battus") & (cells["Dataset"] == "BrFarmers--SI")].iloc[0]
    assert row["F1 paper"] == 0.9071 and row["\u0394F1"] == pytest.approx(0.9035 - 0.9071)
    assert "Battus BrFarmers\u2013SI F1 .9035 (paper .9071)" in table.note
    ranks = table.panels[1].frame.set_index(["Method", "Panel"])
    # this run ranks the random control apart: published ranks stay the paper's, means too
    assert ranks.at[("HERMES (published)", "SI"), "Rank paper"] == 2.88
    assert ranks.at[("BRITS (published)", "SI"), "Mean F1 here"] == pytest.approx(0.5668, abs=1e-4)
    tidy = table.tidy
    assert {"paper_f1", "f1", "f1_minus_paper", "paper_mean_rank", "mean_rank"} <= set(tidy["metric"])


def test_no_mean_row_over_a_single_dataset(tmp_path):
    spec, scores = _grid_spec(tmp_path)
    tau = {**spec["experiments"]["tau"], "datasets": ["a"]}
    one = {**spec, "experiments": {**spec["experiments"], "tau": tau}}
    table = report.build_table("tau_sensitivity", one, scores)
    assert all("Mean" not in list(p.frame["Dataset"]) for p in table.panels)


def test_paper_comparison_covers_the_rate_grid_panel(canonical):
    """Panel B of tab:feasibility-sensitivity: every cell of the paper's 3 x 3 grid, equal when ours is."""
    from paper_tables import RATE_GRID

    from battus.suite.report.paper_comparison import table_paper_comparison

    spec, scores = canonical
    scores = dict(scores)
    variants = []
    for (bi, br), cells in RATE_GRID.items():
        variant = "default" if (bi, br) == (0.10, 0.10) else f"rates-{bi:.2f}-{br:.2f}"
        variants.append([bi, br, variant])
        for d, (f1, nrmse) in cells.items():
            scores[f"{d}|battus-z|{variant}"] = _score(f1, nrmse, "sir")
    spec = {**spec, "experiments": {**spec["experiments"], "rate_grid": {
        "method": "battus-z", "datasets": ["ba-sir", "prost-sir", "covid-sir"]}}, "rate_variants": variants}
    paper = report.read_published(ROOT / "data/published/battus_paper_tables.csv")
    table = table_paper_comparison(spec, scores, paper)
    grid = next(p for p in table.panels if "Panel B" in p.title).frame
    assert len(grid) == 27 and (grid["\u0394F1"].abs() < 1e-9).all() and (grid["\u0394NRMSE"].abs() < 1e-9).all()
    assert "Battus-Z rates" not in table.note  # no grid cell differs
