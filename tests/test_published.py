"""Published rows under the DITTO protocol: DITTO's own single-snapshot numbers beside our runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from battus.suite import report

ROOT = Path(__file__).resolve().parent.parent
DITTO = ROOT / report.DITTO_PUBLISHED
HERMES = ROOT / "data/published/hermes_table2.csv"
SI = ["BA-SI", "ER-SI", "Oregon2-SI", "Prost-SI", "BrFarmers-SI", "Pol-SI"]
SIR = ["BA-SIR", "ER-SIR", "Oregon2-SIR", "Prost-SIR", "Covid-SIR", "Hebrew-SIR"]


def test_dittos_published_file_covers_the_canonical_datasets_once():
    df = report.read_published(DITTO)
    assert set(df["method"]) == {"DITTO", "CRI", "DHREC"}
    for _, grp in df.groupby("method"):
        assert sorted(grp["dataset"]) == sorted(SI + SIR)
    assert df[["f1", "nrmse"]].notna().all().all()
    assert ((df["f1"] > 0) & (df["f1"] < 1) & (df["nrmse"] > 0) & (df["nrmse"] < 1)).all()


def test_hermes_table2_dittos_row_is_dittos_own_single_snapshot_row():
    """The finding the ditto_protocol note states: HERMES's DITTO row is DITTO's final-frame-only result."""
    ditto = report.read_published(DITTO).query("method == 'DITTO'").set_index("dataset")[["f1", "nrmse"]]
    hermes = report.read_published(HERMES).query("method == 'DITTO'").set_index("dataset")[["f1", "nrmse"]]
    pd.testing.assert_frame_equal(ditto.sort_index(), hermes.sort_index())
    # and HERMES reran CRI and DHREC: their rows differ from DITTO's implementations
    ours, hermes_rows = report.read_published(DITTO), report.read_published(HERMES)
    for name in ("CRI", "DHREC"):
        a = ours[ours["method"] == name].set_index("dataset")["f1"].sort_index()
        b = hermes_rows[hermes_rows["method"] == name].set_index("dataset")["f1"].sort_index()
        assert not np.allclose(a, b), name


def _spec(keys: bool) -> dict:
    names = SI[:2] + SIR[:2]
    datasets = {k.lower(): {"label": k, **({"published": k} if keys else {})} for k in names}
    methods = [["battus-z", "default"], ["truth", "default"]]
    return {
        "experiments": {"ditto_protocol": {"si": [k.lower() for k in SI[:2]], "sir": [k.lower() for k in SIR[:2]],
                                           "methods": methods}},
        "datasets": datasets,
        "labels": {"battus-z/final": "Battus-Z", "truth/final": "Truth"},
        "controls": ["truth/final"],
        "ditto_variants": {"battus-z/default": "final", "truth/default": "final"},
    }


def _scores(spec: dict) -> dict:
    scores = {}
    for d in spec["datasets"]:
        scores[f"{d}|battus-z|final"] = {"hermes": {"f1": 0.8, "nrmse": 0.1, "nrmse_ditto": 0.1 * np.sqrt(2)}}
        scores[f"{d}|truth|final"] = {"hermes": {"f1": 1.0, "nrmse": 0.0, "nrmse_ditto": 0.0}}
    return scores


def test_ditto_protocol_table_shows_dittos_published_rows_on_their_datasets(tmp_path):
    spec = _spec(keys=True)
    table = report.build_table("ditto_protocol", spec, _scores(spec), published=report.read_published(DITTO))
    si = table.panels[0].frame.set_index("Method")
    assert list(si.index) == ["DHREC (published)", "CRI (published)", "DITTO (published)", "Battus-Z", "Truth"]
    assert si.at["DITTO (published)", "BA-SI F1"] == pytest.approx(0.8384)
    assert si.at["DITTO (published)", "ER-SI NRMSE (DITTO)"] == pytest.approx(0.2225)
    assert si.at["DITTO (published)", "Mean NRMSE (DITTO)"] == pytest.approx((0.2139 + 0.2225) / 2)
    # a published row is on DITTO's convention only: its paper-convention mean is the stated conversion
    # (SI divided by sqrt(2), SIR the same), marked as converted
    assert si.at["DITTO (published)", "Mean NRMSE (paper)"] == pytest.approx((0.2139 + 0.2225) / 2 / np.sqrt(2))
    sir = table.panels[1].frame.set_index("Method")
    assert sir.at["DITTO (published)", "BA-SIR NRMSE (DITTO)"] == pytest.approx(0.1633)
    assert sir.at["DITTO (published)", "Mean NRMSE (paper)"] == pytest.approx((0.1633 + 0.1679) / 2)
    assert "ditto_kdd23.csv" in table.note and "HERMES Table 2's DITTO row equals them" in table.note
    tidy = table.tidy
    published = tidy[tidy["source"] == "published"]
    assert set(published["metric"]) == {"f1", "nrmse_ditto_convention", "mean_f1", "mean_nrmse_ditto_convention",
                                         "mean_nrmse_paper_convention_converted"}
    # the best F1 is the control's, never bold; Battus-Z's 0.8 beats every published F1 but DITTO's
    paths = [tmp_path / f"t.{ext}" for ext in ("csv", "md", "tex")]
    report.write_table(table, *paths)
    md = paths[1].read_text()
    assert "**.8384**" in md and "**1.0000**" not in md


def test_ditto_protocol_table_shows_no_published_row_on_other_data():
    spec = _spec(keys=False)
    table = report.build_table("ditto_protocol", spec, _scores(spec), published=report.read_published(DITTO))
    assert [list(p.frame["Method"]) for p in table.panels] == [["Battus-Z", "Truth"]] * 2
    assert "none is shown" in table.note


def test_ditto_protocol_table_prints_mean_and_sd_over_seeds(tmp_path):
    spec = _spec(keys=False)
    scores = _scores(spec)
    for d in spec["datasets"]:
        scores[f"{d}|battus-z|final"]["hermes"] = {"f1": report.SeedStat([0.80, 0.84]),
                                                   "nrmse": report.SeedStat([0.10, 0.12]),
                                                   "nrmse_ditto": report.SeedStat([0.14, 0.17])}
    table = report.build_table("ditto_protocol", spec, scores)
    paths = [tmp_path / f"t.{ext}" for ext in ("csv", "md", "tex")]
    report.write_table(table, *paths)
    assert "±" in paths[1].read_text()
    tidy = pd.read_csv(paths[0])
    mean = tidy[(tidy["method"] == "Battus-Z") & (tidy["model"] == "si") & (tidy["dataset"] == "all")]
    assert set(mean["metric"]) >= {"mean_f1", "mean_f1_sd", "mean_f1_ci95_low", "mean_f1_n_seeds"}
    assert mean.set_index("metric").at["mean_f1", "value"] == pytest.approx(0.82)


def test_paper_tables_transcription_agrees_with_the_other_published_files():
    """battus_paper_tables.csv (the paper's tables, one row per number) holds the same canonical cells as
    hermes_table2.csv (baselines) and battus_paper.csv (Battus, Battus-Z), and six-dataset means that are
    the means of its own cells (SPIN's OOM left out)."""
    tables = report.read_published(ROOT / "data/published/battus_paper_tables.csv")
    cells = tables[(tables["table"] == "canonical-quality") & tables["metric"].isin(["f1", "nrmse"])]
    wide = cells.pivot_table(index=["method", "dataset"], columns="metric", values="value")
    for path in (HERMES, ROOT / "data/published/battus_paper.csv"):
        for row in report.read_published(path).itertuples():
            for metric in ("f1", "nrmse"):
                expected = getattr(row, metric)
                if np.isnan(expected):
                    assert (row.method, row.dataset) not in wide.index or np.isnan(wide.at[(row.method, row.dataset),
                                                                                          metric])
                else:
                    assert wide.at[(row.method, row.dataset), metric] == expected, (row.method, row.dataset)
    means = tables[tables["metric"].isin(["mean_f1", "mean_nrmse"])]
    for row in means.itertuples():
        own = cells[(cells["method"] == row.method) & (cells["metric"] == row.metric.removeprefix("mean_"))
                    & cells["dataset"].str.endswith(f"-{row.dataset}")]["value"]
        assert len(own) == 6 and abs(own.mean() - row.value) <= 0.00051, (row.method, row.dataset, row.metric)
