"""The upstream methods' measured rows (CRI, DHREC, GCN, GIN from q-rz/KDD23-DITTO) beside the published
rows of the DITTO-protocol and canonical quality tables: tagged, never ranked or bold, no mean over a
panel they did not complete."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from battus.suite import report
from battus.suite.report.tables import bold_mask, fmt_value, label_text, table_markdown

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / report.UPSTREAM_MEASURED
DITTO = ROOT / report.DITTO_PUBLISHED
HERMES = ROOT / "data/published/hermes_table2.csv"
# the canonical configuration's names and their published keys; GCN and GIN ran on the
# real-diffusion datasets only (farmers-si, covid-sir, heb-sir here; not ba-si, er-si, ba-sir)
SI = {"ba-si": "BA-SI", "er-si": "ER-SI", "farmers-si": "BrFarmers-SI"}
SIR = {"ba-sir": "BA-SIR", "covid-sir": "Covid-SIR", "heb-sir": "Hebrew-SIR"}
TAG = "(measured, upstream code)"
METHODS = [["battus", "default"], ["truth", "default"]]


def _datasets() -> dict:
    return {d: {"label": k.replace("-", "--"), "published": k} for d, k in (SI | SIR).items()}


def _score(f1: float, nrmse: float) -> dict:
    return {"hermes": {"f1": f1, "nrmse": nrmse, "nrmse_ditto": nrmse * np.sqrt(2)},
            "unobserved": {"f1": f1, "nrmse": nrmse},
            "causal": {"prediction": {"violations": 0, "events": 10, "rate": 0.0}},
            "algorithm_seconds": 1.0, "T": 10, "observed_times": [10]}


def _scores(variant: str) -> dict:
    # this run's method above every measured row, so that it is the one bold where bold applies
    scores = {}
    for d in SI | SIR:
        scores[f"{d}|battus|{variant}"] = _score(0.97, 0.01)
        scores[f"{d}|truth|{variant}"] = _score(1.0, 0.0)
    return scores


@pytest.fixture(scope="module")
def measured() -> pd.DataFrame:
    return report.read_measured(MEASURED)


def _ditto_table(measured: pd.DataFrame, datasets: dict | None = None) -> report.Table:
    spec = {
        "experiments": {"ditto_protocol": {"si": list(SI), "sir": list(SIR), "methods": METHODS}},
        "datasets": datasets or _datasets(),
        "labels": {"battus/final": "Battus", "truth/final": "Truth"},
        "controls": ["truth/final"],
        "ditto_variants": {"battus/default": "final", "truth/default": "final"},
    }
    return report.build_table("ditto_protocol", spec, _scores("final"), published=report.read_published(DITTO),
                              measured=measured)


def _canonical_table(measured: pd.DataFrame) -> report.Table:
    spec = {
        "experiments": {"canonical": {"si": list(SI), "sir": list(SIR), "methods": METHODS}},
        "datasets": _datasets(),
        "labels": {"battus/default": "Battus", "truth/default": "Truth"},
        "controls": ["truth/default"],
    }
    return report.build_table("canonical_quality", spec, _scores("default"), published=report.read_published(HERMES),
                              measured=measured)


def _upstream(frame: pd.DataFrame) -> list[int]:
    return [i for i, m in enumerate(frame["Method"]) if m.endswith(TAG)]


def test_measured_file_keeps_only_finished_runs(measured):
    assert (measured["status"] == "ok").all()
    assert set(measured["protocol"]) == {"final", "benchmark"}
    # CRI's Oregon2-SI run ran out of memory and its Prost-SI run stopped at its time limit: no rows
    assert measured.query("method == 'cri' and dataset in ('oregon2-si', 'prost-si')").empty
    assert len(measured.query("method == 'gcn' and dataset == 'heb-sir'")) == 2  # both protocols
    assert measured[["f1", "nrmse", "nrmse_ditto"]].notna().all().all()


def test_ditto_protocol_shows_the_measured_rows_below_the_published_ones(measured):
    table = _ditto_table(measured)
    si, sir = (p.frame.set_index("Method") for p in table.panels)
    assert list(si.index) == ["DHREC (published)", "CRI (published)", "DITTO (published)",
                              f"CRI {TAG}", f"DHREC {TAG}", f"GCN {TAG}", f"GIN {TAG}", "Battus", "Truth"]
    # the final-frame rows: F1 and NRMSE under DITTO's convention per dataset
    assert si.at[f"CRI {TAG}", "BA--SI F1"] == pytest.approx(0.7502)
    assert si.at[f"CRI {TAG}", "BA--SI NRMSE (DITTO)"] == pytest.approx(0.3012)
    assert si.at[f"GIN {TAG}", "BrFarmers--SI F1"] == pytest.approx(0.4848)
    # a complete panel has its means, the paper's convention beside DITTO's
    assert si.at[f"CRI {TAG}", "Mean F1"] == pytest.approx((0.7502 + 0.7797 + 0.5893) / 3)
    assert si.at[f"CRI {TAG}", "Mean NRMSE (DITTO)"] == pytest.approx((0.3012 + 0.2744 + 0.4639) / 3)
    assert si.at[f"CRI {TAG}", "Mean NRMSE (paper)"] == pytest.approx((0.213 + 0.194 + 0.328) / 3)
    # GCN was not run on BA-SI or ER-SI: empty cells and no mean over the incomplete panel
    assert np.isnan(si.at[f"GCN {TAG}", "BA--SI F1"]) and np.isnan(si.at[f"GCN {TAG}", "ER--SI NRMSE (DITTO)"])
    for col in ("Mean F1", "Mean NRMSE (DITTO)", "Mean NRMSE (paper)"):
        assert pd.isna(si.at[f"GCN {TAG}", col]), col
    # GCN runs on the real-diffusion datasets only: its SIR row has Covid-SIR and Hebrew-SIR, no mean
    assert sir.at[f"GCN {TAG}", "Covid--SIR F1"] == pytest.approx(0.3429)
    assert sir.at[f"GCN {TAG}", "Hebrew--SIR F1"] == pytest.approx(0.3350)
    assert np.isnan(sir.at[f"GCN {TAG}", "BA--SIR F1"]) and pd.isna(sir.at[f"GCN {TAG}", "Mean F1"])
    assert TAG in table.note and report.UPSTREAM_MEASURED in table.note


def test_ditto_protocol_measured_rows_print_empty_cells_and_never_bold(measured):
    table = _ditto_table(measured)
    for panel in table.panels:
        rows = _upstream(panel.frame)
        assert rows and set(rows) <= set(panel.skip_best_rows)
        assert not bold_mask(panel).iloc[rows].any().any()
        # below the published rows and above this run's, each block behind a rule
        assert panel.rules_before == [3, 3 + len(rows)]
    md = table_markdown(table)
    gcn = next(line for line in md.splitlines() if line.startswith(f"| GCN {TAG}"))
    cells = [c.strip() for c in gcn.strip("|").split("|")]
    # BA-SI, ER-SI (F1, NRMSE) not run, BrFarmers-SI measured, no means: the table's empty cell
    empty = label_text(fmt_value(np.nan, "metric"))
    assert cells[1:] == [empty] * 4 + [".4472", ".6660"] + [empty] * 3
    assert "**" not in gcn
    # the measured rows' tidy CSV rows carry their source; a mean only where the panel is complete
    tidy = table.tidy[table.tidy["source"] == "measured_upstream"]
    means = tidy[(tidy["dataset"] == "all") & (tidy["metric"] == "mean_f1")]
    assert sorted(means["method"]) == [f"CRI {TAG}", f"CRI {TAG}", f"DHREC {TAG}", f"DHREC {TAG}"]


def test_ditto_protocol_bold_still_goes_to_the_ranked_rows(measured):
    """A measured row is left out of the comparison: the best ranked row stays bold beside it."""
    panel = _ditto_table(measured).panels[0]
    battus = list(panel.frame["Method"]).index("Battus")
    assert bold_mask(panel).at[panel.frame.index[battus], "BA--SI F1"]


def test_measured_rows_only_on_the_canonical_exports(measured):
    # the default configuration's ba-si is a small synthetic dataset of its own, not the canonical export
    datasets = {d: {"label": k.replace("-", "--")} for d, k in (SI | SIR).items()}
    table = _ditto_table(measured, datasets)
    assert not any(_upstream(p.frame) for p in table.panels)
    assert TAG not in table.note


def test_canonical_quality_shows_the_benchmark_protocol_rows_unranked(measured):
    table = _canonical_table(measured)
    si, sir = (p.frame.set_index("Method") for p in table.panels)
    upstream = [m for m in si.index if m.endswith(TAG)]
    assert upstream == [f"CRI {TAG}", f"DHREC {TAG}", f"GCN {TAG}", f"GIN {TAG}"]
    published = [m for m in si.index if m.endswith("(published)")]
    assert list(si.index[:len(published)]) == published and list(si.index[len(published):][:4]) == upstream
    assert si.at[f"DHREC {TAG}", "ER--SI F1"] == pytest.approx(0.6277)
    assert si.at[f"DHREC {TAG}", "ER--SI NRMSE"] == pytest.approx(0.3193)
    assert si.at[f"DHREC {TAG}", "Mean F1"] == pytest.approx((0.6078 + 0.6277 + 0.6079) / 3)
    # never ranked; no mean nor margin over an incomplete panel
    assert si.loc[upstream, "Rank"].isna().all()
    assert np.isnan(si.at[f"GIN {TAG}", "BA--SI F1"])
    assert pd.isna(si.at[f"GIN {TAG}", "Mean F1"]) and pd.isna(si.at[f"GIN {TAG}", "Mean NRMSE"])
    assert pd.isna(sir.at[f"GCN {TAG}", "Mean F1"]) and np.isnan(sir.at[f"GCN {TAG}", "BA--SIR NRMSE"])
    assert sir.at[f"GCN {TAG}", "Hebrew--SIR NRMSE"] == pytest.approx(0.6070)
    # the ranked rows keep their ranks: HERMES's published rows and this run's method, as without them
    alone = _canonical_table(None).panels[0].frame.set_index("Method")
    pd.testing.assert_series_equal(si["Rank"].drop(upstream), alone["Rank"])
    for panel in table.panels:
        rows = _upstream(panel.frame)
        assert set(rows) <= set(panel.skip_best_rows)
        assert not bold_mask(panel).iloc[rows].any().any()
    assert "not a reproduction of HERMES's rows" in table.note and "reads only the final frame" in table.note
    tidy = table.tidy[table.tidy["source"] == "measured_upstream"]
    assert not tidy.empty and "mean_rank" not in set(tidy["metric"])


def test_tables_read_the_measured_file_as_an_input():
    for name in ("ditto_protocol", "canonical_quality"):
        assert report.REPORT_ITEMS[name].measured == "upstream_measured"
    assert report.REPORT_ITEMS["ditto_win_loss"].measured is None
