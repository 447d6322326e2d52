"""Experiments repeated over seeds: the per-seed histories, the aggregation (mean, sd, 95% interval)
against a naive restatement, the tables' ``mean ± sd``, scores.csv's seed column, and the workflow
making one history per seed (config/test/tiny.yaml repeats the tau sweep and rate robustness)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from battus.suite import report

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------
# the aggregation, against a naive restatement


def naive_summary(values: list[float]) -> dict:
    """Mean, sample sd (n - 1) and the 95% Student-t interval of the mean, written out plainly."""
    from scipy import stats

    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "sd": sd, "low": mean - half, "high": mean + half}


def test_t_quantile_matches_scipy():
    from scipy import stats

    for dof in [*range(1, 61), 100, 1000, 10**6]:
        assert report.t975(dof) == pytest.approx(stats.t.ppf(0.975, dof), abs=2e-6), dof
    with pytest.raises(ValueError):
        report.t975(0)


@pytest.mark.parametrize("values", [[0.8, 0.9], [0.81, 0.83, 0.86], [0.1, 0.4, 0.2, 0.25, 0.3],
                                    list(np.linspace(0.5, 0.9, 37))])
def test_seed_stat_is_mean_sd_and_t_interval(values):
    stat = report.SeedStat(values)
    naive = naive_summary(values)
    assert float(stat) == pytest.approx(naive["mean"]) and stat.n == len(values)
    assert stat.sd == pytest.approx(naive["sd"]) == pytest.approx(statistics.stdev(values))
    low, high = stat.ci95()
    assert low == pytest.approx(naive["low"]) and high == pytest.approx(naive["high"])
    one = report.SeedStat([0.7])
    assert not report.seeded(one) and math.isnan(one.sd) and all(math.isnan(x) for x in one.ci95())


def test_merge_seeds_keeps_structure_and_averages_numbers():
    records = [{"hermes": {"f1": 0.8, "nrmse": 0.1}, "n": 1000, "model": "si", "violations": 3,
                "observed_times": [5, 10], "calibration": None},
               {"hermes": {"f1": 0.9, "nrmse": 0.2}, "n": 1000, "model": "si", "violations": 5,
                "observed_times": [5, 10], "calibration": None}]
    merged = report.merge_seeds(records)
    assert merged["n"] == 1000 and type(merged["n"]) is int  # equal integers stay as they are
    assert merged["model"] == "si" and merged["observed_times"] == [5, 10] and merged["calibration"] is None
    assert isinstance(merged["hermes"]["f1"], report.SeedStat)
    assert float(merged["hermes"]["f1"]) == pytest.approx(0.85) and merged["hermes"]["f1"].n == 2
    assert float(merged["violations"]) == 4.0


def test_mean_over_datasets_is_taken_seed_by_seed():
    a, b = report.SeedStat([0.8, 0.9, 0.7]), report.SeedStat([0.6, 0.5, 0.9])
    fixed = 0.75  # an imported dataset, run once: the same in every seed
    mean = report.seed_mean([a, b, fixed])
    per_seed = [(0.8 + 0.6 + 0.75) / 3, (0.9 + 0.5 + 0.75) / 3, (0.7 + 0.9 + 0.75) / 3]
    assert float(mean) == pytest.approx(statistics.mean(per_seed))
    assert mean.sd == pytest.approx(statistics.stdev(per_seed))
    assert report.seed_mean([0.2, 0.4]) == pytest.approx(0.3) and type(report.seed_mean([0.2, 0.4])) is float
    geo = report.seed_mean([report.SeedStat([1.0, 4.0]), 4.0], lambda x, axis=None: np.exp(np.log(x).mean(axis=axis)))
    assert list(geo.values) == pytest.approx([2.0, 4.0])


def test_long_rows_add_sd_interval_and_count_only_for_several_seeds():
    stat = report.SeedStat([0.8, 0.9, 0.85])
    rows = report.long_rows({"dataset": "ba-si"}, {"f1": stat, "nrmse": 0.1})
    got = {r["metric"]: r["value"] for r in rows}
    naive = naive_summary([0.8, 0.9, 0.85])
    assert got == pytest.approx({"f1": naive["mean"], "f1_sd": naive["sd"], "f1_ci95_low": naive["low"],
                                 "f1_ci95_high": naive["high"], "f1_n_seeds": 3, "nrmse": 0.1})
    assert all(type(r["value"]) in (float, int) for r in rows)  # plain numbers in the CSV
    assert report.fmt_value(stat, "metric") == ".8500 \u00b1 .0500"
    assert report.fmt_value(stat, "pct") == "85.00 \u00b1 5.00"
    assert report.fmt_value(report.SeedStat([0.8]), "metric") == ".8000"


# ---------------------------------------------------------------------------
# tables from score files of several seeds


def _score(f1: float, nrmse: float) -> dict:
    return {"hermes": {"f1": f1, "nrmse": nrmse}, "unobserved": {"f1": f1, "nrmse": nrmse},
            "causal": {"prediction": {"violations": 1, "events": 10, "rate": 0.1},
                       "truth": {"violations": 0, "events": 10, "rate": 0.0}},
            "algorithm_seconds": 0.001, "model": "sir", "n": 300, "T": 8, "observed_times": [4, 8]}


def test_rate_robustness_table_shows_mean_and_sd_over_seeds(tmp_path):
    runs = [("rr-a", "battus-z", "default"), ("rr-a.seed7", "battus-z", "default"),
            ("rr-b", "battus-z", "default"), ("rr-b.seed7", "battus-z", "default")]
    values = {"rr-a": (0.80, 0.10), "rr-a.seed7": (0.90, 0.12), "rr-b": (0.84, 0.20), "rr-b.seed7": (0.85, 0.22)}
    paths = []
    for d, _, _ in runs:
        paths.append(tmp_path / f"{d}.json")
        paths[-1].write_text(json.dumps(_score(*values[d])))
    spec = {"experiments": {"rate_robustness": {"method": ["battus-z", "default"]}},
            "datasets": {"rr-a": {"label": "A"}, "rr-b": {"label": "B"}}, "labels": {"battus-z/default": "Battus-Z"},
            "rate_runs": [["rr-a", "ba", "sir", 0.1, 0.1], ["rr-b", "ba", "sir", 0.2, 0.05]],
            "replicates": {"rr-a.seed7": "rr-a", "rr-b.seed7": "rr-b"}}
    outputs = [tmp_path / f"rr.{ext}" for ext in ("csv", "md", "tex")]
    report.make("rate_robustness", spec, runs, {"scores": paths}, outputs)
    md, tex = outputs[1].read_text(), outputs[2].read_text()
    # F1 .85 +- .0707 against .845 +- .0071: their 95% intervals overlap, so neither is bold
    assert ".8500 \u00b1 .0707" in md and ".8450 \u00b1 .0071" in md and "**.8500" not in md and "**.8450" not in md
    assert r".8500 $\pm$ .0707" in tex and r"\textbf{.8500" not in tex and "\u00b1" not in tex
    assert "2 seeds" in md and "Student-t" in md
    tidy = pd.read_csv(outputs[0])
    f1 = tidy[(tidy["dataset"] == "rr-a")].set_index("metric")["value"]
    naive = naive_summary([0.80, 0.90])
    assert f1["f1"] == pytest.approx(naive["mean"]) and f1["f1_sd"] == pytest.approx(naive["sd"])
    assert (f1["f1_ci95_low"], f1["f1_ci95_high"]) == pytest.approx((naive["low"], naive["high"]))
    assert f1["f1_n_seeds"] == 2 and set(tidy["dataset"]) == {"rr-a", "rr-b"}  # never a replicate's name
    # one seed: exactly as before, no sd
    report.make("rate_robustness", {**spec, "replicates": {}}, runs[::2], {"scores": paths[::2]}, outputs)
    assert "\u00b1" not in outputs[1].read_text() and "_sd" not in outputs[0].read_text()


def test_scores_long_names_the_dataset_and_each_seed(tmp_path):
    runs = [("ba-si", "battus-z", "default"), ("ba-si.seed7", "battus-z", "default"), ("pol-si", "truth", "default")]
    paths = []
    for i, _ in enumerate(runs):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(_score(0.8 + i / 100, 0.1)))
    frame = report.scores_long(runs, paths, {"ba-si": 123456789, "ba-si.seed7": 7}, {"ba-si.seed7": "ba-si"})
    f1 = frame[frame["metric"] == "hermes_f1"]
    assert list(zip(f1["dataset"], f1["seed"], strict=True)) == [("ba-si", 123456789), ("ba-si", 7), ("pol-si", "")]
    assert not frame.duplicated(["dataset", "protocol", "method", "variant", "seed", "metric", "convention"]).any()


# ---------------------------------------------------------------------------
# the plan: which datasets repeat, under which names and seeds


def _plan(path: str, **experiments):
    from snakemake.utils import validate

    from battus.suite.experiments import Plan

    cfg = yaml.safe_load((ROOT / path).read_text())
    for name, changes in experiments.items():
        cfg["experiments"][name].update(changes)
    validate(cfg, str(ROOT / "config/schemas/config.schema.yaml"))
    return Plan(cfg)


def test_plan_repeats_simulated_datasets_over_the_experiments_seeds():
    pytest.importorskip("snakemake")
    plan = _plan("config/test/tiny.yaml")
    assert plan.runs("tau") == [("ba-sir", "battus-z", "tau-0.60"), ("ba-sir.seed7", "battus-z", "tau-0.60"),
                                ("ba-sir", "battus-z", "default"), ("ba-sir.seed7", "battus-z", "default")]
    assert plan.seed_of("ba-sir") == 123456789 and plan.seed_of("ba-sir.seed7") == 7
    assert plan.base_dataset("ba-sir.seed7") == "ba-sir" and plan.base_dataset("ba-sir") == "ba-sir"
    replica = {k: v for k, v in plan.datasets["ba-sir.seed7"].items() if k not in ("seed", "replicate_of")}
    assert replica == {k: v for k, v in plan.datasets["ba-sir"].items() if k != "seed"}
    # experiments without seeds run each dataset once, at its own seed
    assert all("." not in d for d, _, _ in plan.runs("canonical") + plan.runs("ablation"))
    spec = report.report_spec("tau_sensitivity", plan)
    assert spec["replicates"] == {"ba-sir.seed7": "ba-sir"} and list(spec["datasets"]) == ["ba-sir"]
    # a seed list without the dataset's own seed: every history is a replicate, the table keys stay
    other = _plan("config/test/tiny.yaml", tau={"seeds": [1, 2]})
    assert [d for d, _, v in other.runs("tau") if v == "default"] == ["ba-sir.seed1", "ba-sir.seed2"]
    assert list(report.report_spec("tau_sensitivity", other)["datasets"]) == ["ba-sir"]


def test_imported_histories_run_once_whatever_the_seeds():
    pytest.importorskip("snakemake")
    plan = _plan("config/test/ci.yaml", canonical={"seeds": [1, 2, 3]})
    runs = plan.runs("canonical")
    assert runs and len(runs) == len(set(runs)) and all(plan.seed_of(d) is None for d, _, _ in runs)
    assert all("." not in d for d, _, _ in runs)


def test_paper_canonical_numbers_stay_single_runs():
    """The paper's reproduction (canonical DITTO exports) is fixed data: no replicate anywhere in it."""
    pytest.importorskip("snakemake")
    plan = _plan("config/paper.yaml")
    for experiment in ("canonical", "ablation", "tau", "rate_grid", "calibration", "ditto_protocol"):
        assert all(plan.base_dataset(d) == d for d, _, _ in plan.runs(experiment)), experiment
    assert len(plan.replicates["rate_robustness"]["rr-ba-si-0.10-0.10"]) == 5
    assert len(plan.replicates["large"]["orkut-si"]) == 5


# ---------------------------------------------------------------------------
# per-seed simulation: deterministic, different per seed


def test_simulation_is_deterministic_per_seed_and_differs_between_seeds():
    from battus.generators import barabasi_albert
    from battus.simulate import simulate

    graph = barabasi_albert(300, 3, seed=1)
    runs = {seed: simulate(graph, "sir", 8, 15, 0.1, 0.1, seed=seed) for seed in (123456789, 7)}
    assert np.array_equal(runs[7], simulate(graph, "sir", 8, 15, 0.1, 0.1, seed=7))
    assert not np.array_equal(runs[7], runs[123456789])


# ---------------------------------------------------------------------------
# the workflow: two seeds, two histories, one table of mean ± sd


@pytest.mark.slow
def test_workflow_simulates_each_seed_and_tables_show_mean_and_sd(tmp_path):
    pytest.importorskip("snakemake")
    from test_workflow import snakemake, tiny_config

    from battus.io import read_history

    work = tmp_path / "run"
    work.mkdir()
    # a plug-in asking for more threads than the run has: its {threads} is the job's (capped) number
    config = tiny_config(tmp_path, **{"methods.forward-fill.threads": 8})
    plugin_log = "results/logs/reconstruct/ba-si/forward-fill/default.log"
    # a switch after --configfile (which takes several files) ends its list: the targets follow
    snakemake(work, "--printshellcmds", "results/report/tables/rate_robustness.md",
              "results/ba-si/forward-fill/default/prediction.h5", configfile=config)
    first, second = (read_history(work / f"results/{d}/history.h5", truth="required")
                     for d in ("rr-ba-sir-0.10-0.10", "rr-ba-sir-0.10-0.10.seed7"))
    assert (first.provenance["seed"], second.provenance["seed"]) == (123456789, 7)
    assert first.graph.n == second.graph.n and not np.array_equal(first.truth, second.truth)
    md = (work / "results/report/tables/rate_robustness.md").read_text()
    cells = [line for line in md.splitlines() if line.startswith("| .")]
    assert len(cells) == 2 and all(line.count("\u00b1") == 2 for line in cells)  # 2 rate pairs x (F1, NRMSE)
    assert "2 seeds" in md
    tidy = pd.read_csv(work / "results/report/tables/rate_robustness.csv")
    assert set(tidy.loc[tidy["metric"] == "f1_n_seeds", "value"]) == {2}
    assert set(tidy["dataset"]) == {"rr-ba-sir-0.10-0.10", "rr-ba-sir-0.20-0.05"}
    command = (work / plugin_log).read_text().splitlines()[0]
    assert "--threads 2" in command and "--threads 8" not in command, command


def test_every_table_and_figure_with_every_experiment_seeded(tmp_path):
    """The tiny plan with two seeds on every experiment: each table and figure is made from made-up
    scores (different per seed), merges the seeds under the dataset's own name and prints ±."""
    pytest.importorskip("snakemake")
    pytest.importorskip("matplotlib")
    from test_figures import _history_inputs, _score

    seeds = {"seeds": [123456789, 7]}
    plan = _plan("config/test/tiny.yaml", **{e: seeds for e in ("canonical", "ditto_protocol", "calibration",
                                                               "ablation", "tau", "rate_grid", "large")})
    assert ("ba-si.seed7", "battus", "default") in plan.runs("canonical")
    seeded = 0
    for name, item in report.REPORT_ITEMS.items():
        runs = report.report_runs(name, plan)
        if runs is None or item.inputs == "histories":
            continue
        spec = report.report_spec(name, plan)
        folder = tmp_path / name
        folder.mkdir()
        if item.inputs == "history+predictions":
            inputs = _history_inputs(folder, runs)
        else:
            paths = []
            for i, (d, m, v) in enumerate(runs):
                record = _score(f"{d}|{m}|{v}") | {"T": 8, "observed_times": [4, 8]}
                record["hermes"]["nrmse_ditto"] = record["hermes"]["nrmse"]
                paths.append(folder / f"{i}.json")
                paths[-1].write_text(json.dumps(record))
            inputs = {"scores": paths}
        if item.published:
            inputs["published"] = ROOT / f"data/published/{item.published}.csv"
        outputs = [folder / f"{name}.png"] if item.kind == "figure" else [folder / f"{name}.{x}"
                                                                           for x in ("csv", "md", "tex")]
        report.make(name, spec, runs, inputs, outputs)
        if item.kind == "table":
            tidy = pd.read_csv(outputs[0])
            if "dataset" in tidy:
                assert not tidy["dataset"].astype(str).str.contains(r"\.seed").any(), name
            seeded += "\u00b1" in outputs[1].read_text()
    assert seeded >= 7  # every table of scores shows mean ± sd somewhere


def test_table_numbers_are_the_seed_means_of_scores_csv(tmp_path):
    """scores.csv (one row per seed) and a table's tidy CSV (mean, sd over seeds) tell the same numbers."""
    pytest.importorskip("snakemake")
    plan = _plan("config/test/tiny.yaml")
    runs = plan.runs("rate_robustness")
    paths = []
    rng = np.random.default_rng(0)
    for i, _ in enumerate(runs):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(_score(float(rng.uniform(0.7, 0.9)), float(rng.uniform(0.1, 0.2)))))
    long = report.scores_long(runs, paths, {d: plan.seed_of(d) for d, _, _ in runs},
                              {d: plan.base_dataset(d) for d, _, _ in runs if plan.base_dataset(d) != d})
    outputs = [tmp_path / f"rr.{x}" for x in ("csv", "md", "tex")]
    report.make("rate_robustness", report.report_spec("rate_robustness", plan), runs, {"scores": paths}, outputs)
    tidy = pd.read_csv(outputs[0]).pivot_table(index="dataset", columns="metric", values="value")
    f1 = long[long["metric"] == "hermes_f1"].groupby("dataset")["value"]
    assert set(tidy.index) == set(f1.groups)
    for dataset, values in f1:
        values = values.astype(float).tolist()
        assert len(values) == 2 == tidy.at[dataset, "f1_n_seeds"]
        assert tidy.at[dataset, "f1"] == pytest.approx(statistics.mean(values))
        assert tidy.at[dataset, "f1_sd"] == pytest.approx(statistics.stdev(values))


def test_figures_draw_sd_error_bars_only_where_seeds_exist(tmp_path):
    pytest.importorskip("snakemake")
    pytest.importorskip("matplotlib")
    from matplotlib.container import ErrorbarContainer
    from test_figures import _inputs

    def errorbars(plan, name):
        runs = report.report_runs(name, plan)
        folder = tmp_path / f"{name}-{len(runs)}"
        folder.mkdir()
        fig = report.render_figure(name, report.report_spec(name, plan), runs, _inputs(name, runs, folder))
        # bars with yerr and errorbar() lines both add one ErrorbarContainer; count those with error bars
        return sum(isinstance(c, ErrorbarContainer) and c.has_yerr for ax in fig.axes for c in ax.containers)

    tiny = _plan("config/test/tiny.yaml")  # the tau sweep over two seeds, the canonical experiment once
    assert errorbars(tiny, "tau_curves") == 2  # the mean curve of each panel (F1, NRMSE)
    assert errorbars(tiny, "canonical_bars") == 0
    seeded = _plan("config/test/tiny.yaml", canonical={"seeds": [123456789, 7]})
    methods = len(seeded.experiments["canonical"]["methods"])
    assert errorbars(seeded, "canonical_bars") == 2 * methods  # one bar series per method and metric
