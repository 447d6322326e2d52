"""Fair comparison tables: no bold beside an empty competitor, converted cells marked, wins, ties and
losses decided by the stated uncertainty."""

from __future__ import annotations

from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from battus.suite import report
from battus.suite.report.comparison_tables import CONVERTED_MARK
from battus.suite.report.html import table_html

ROOT = Path(__file__).resolve().parent.parent
DITTO = ROOT / report.DITTO_PUBLISHED
SI = ["BA-SI", "ER-SI", "Oregon2-SI", "Prost-SI", "BrFarmers-SI", "Pol-SI"]
SIR = ["BA-SIR", "ER-SIR", "Oregon2-SIR", "Prost-SIR", "Covid-SIR", "Hebrew-SIR"]


def _ditto_spec(si=SI, sir=SIR) -> dict:
    datasets = {k.lower(): {"label": k, "published": k} for k in [*si, *sir]}
    methods = [["battus-z", "default"], ["battus", "default"], ["random", "default"]]
    return {
        "experiments": {"ditto_protocol": {"si": [k.lower() for k in si], "sir": [k.lower() for k in sir],
                                           "methods": methods}},
        "datasets": datasets,
        "labels": {"battus-z/final": "Battus-Z", "battus/final": "Battus", "random/final": "Random"},
        "controls": ["random/final"],
        "ditto_variants": {"battus-z/default": "final", "battus/default": "final", "random/default": "final"},
    }


def _ditto_scores(spec: dict, f1: dict, nrmse_paper: dict) -> dict:
    """Every dataset scored alike per method: F1 and the paper's NRMSE (DITTO's is √2 times it on SI)."""
    scores = {}
    for d in spec["datasets"]:
        factor = np.sqrt(2) if d.endswith("-si") else 1.0
        for m in ("battus-z", "battus", "random"):
            scores[f"{d}|{m}|final"] = {"hermes": {"f1": f1[m], "nrmse": nrmse_paper[m],
                                                   "nrmse_ditto": nrmse_paper[m] * factor}}
    return scores


def _written(table, tmp_path) -> tuple[str, str, str]:
    paths = [tmp_path / f"t.{ext}" for ext in ("csv", "md", "tex")]
    report.write_table(table, *paths)
    return paths[1].read_text(), paths[2].read_text(), table_html(table)


# ---------------------------------------------------------------------------
# bold beside an empty cell


def test_no_bold_in_a_column_where_a_ranked_row_is_empty():
    df = pd.DataFrame({"M": ["a", "b", "c", "control"], "F1": [0.9, np.nan, 0.8, 0.99],
                       "NRMSE": [0.2, 0.1, 0.3, np.nan], "Both": [0.5, 0.6, np.nan, 0.7]})
    panel = report.Panel("", df, {c: "metric" for c in ("F1", "NRMSE", "Both")},
                         {"F1": "max", "NRMSE": "min", "Both": "max"}, skip_best_rows=[3])
    mask = report.bold_mask(panel)
    assert not mask["F1"].any()  # b has no F1: it might be the best
    assert mask["NRMSE"].tolist() == [False, True, False, False]  # only the control is empty: not a competitor
    assert not mask["Both"].any()
    rows = report.Panel("", df.iloc[:3], {c: "metric" for c in ("F1", "NRMSE")}, row_best=(["F1", "NRMSE"], "max"))
    assert report.bold_mask(rows)["F1"].tolist() == [True, False, True]  # row b has an empty cell: no bold


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=3, max_size=3), min_size=2, max_size=6),
       st.lists(st.booleans(), min_size=6, max_size=6))
def test_a_bold_cell_never_shares_a_column_with_an_empty_competitor(values, control):
    df = pd.DataFrame({"M": [f"m{i}" for i in range(len(values))]})
    for j in range(3):
        df[f"c{j}"] = [np.nan if row[j] is None else row[j] for row in values]
    skip = [i for i in range(len(values)) if control[i]]
    panel = report.Panel("", df, {f"c{j}": "metric" for j in range(3)}, {"c0": "max", "c1": "min", "c2": "max"},
                         skip_best_rows=skip)
    mask = report.bold_mask(panel)
    for j in range(3):
        ranked = df.loc[~df.index.isin(skip), f"c{j}"]
        if mask[f"c{j}"].any():
            assert ranked.notna().all(), (values, skip, j)
            assert not mask.loc[skip, f"c{j}"].any()


def test_the_built_tables_never_bold_beside_an_empty_competitor(tmp_path):
    spec = _ditto_spec()
    scores = _ditto_scores(spec, {"battus-z": 0.8, "battus": 0.79, "random": 0.7},
                           {"battus-z": 0.1685, "battus": 0.17, "random": 0.2})
    table = report.build_table("ditto_protocol", spec, scores, published=report.read_published(DITTO))
    for panel in table.panels:
        mask = report.bold_mask(panel)
        ranked = ~panel.frame.index.isin(panel.frame.index[panel.skip_best_rows])
        for col in panel.best:
            if mask[col].any():
                assert panel.frame.loc[ranked, col].notna().all(), (panel.title, col)


# ---------------------------------------------------------------------------
# converted cells


def test_dittos_paper_convention_mean_is_converted_marked_and_compared(tmp_path):
    """DITTO prints only its own convention: the SI mean under the paper's is .2336/√2 = .1652, marked †,
    explained in the caption of every format, and bold beats Battus-Z's .1685 with it."""
    spec = _ditto_spec()
    scores = _ditto_scores(spec, {"battus-z": 0.8144, "battus": 0.8074, "random": 0.72},
                           {"battus-z": 0.1685, "battus": 0.1737, "random": 0.25})
    table = report.build_table("ditto_protocol", spec, scores, published=report.read_published(DITTO))
    si = table.panels[0]
    frame = si.frame.set_index("Method")
    assert frame.at["DITTO (published)", "Mean NRMSE (DITTO)"] == pytest.approx(0.2336, abs=5e-5)
    assert frame.at["DITTO (published)", "Mean NRMSE (paper)"] == pytest.approx(0.2336 / np.sqrt(2), abs=5e-5)
    published = [i for i, m in enumerate(si.frame["Method"]) if m.endswith("(published)")]
    assert {k for k in si.marks} == {(i, "Mean NRMSE (paper)") for i in published}
    assert set(si.marks.values()) == {CONVERTED_MARK}
    mask = report.bold_mask(si)
    bold = si.frame.loc[mask["Mean NRMSE (paper)"], "Method"].tolist()
    assert bold == ["DITTO (published)"]
    # SIR: the same value under both conventions, still marked (DITTO did not print it)
    sir = table.panels[1].frame.set_index("Method")
    assert sir.at["DITTO (published)", "Mean NRMSE (paper)"] == sir.at["DITTO (published)", "Mean NRMSE (DITTO)"]
    assert table.panels[1].marks
    md, tex, html = _written(table, tmp_path)
    assert "**.1652\u2020**" in md and "| .1685 " in md.replace("|.1685", "| .1685")
    assert "\u2020 converted" in md  # the footnote, in the caption's line
    assert r"\textbf{.1652$^{\dagger}$}" in tex and r"$^{\dagger}$ converted" in tex and tex.isascii()
    assert "<strong>.1652\u2020</strong>" in unescape(html) and "\u2020 converted" in unescape(html)
    assert "\u2020 converted" in table.caption_text()
    tidy = table.tidy
    row = tidy[(tidy["method"] == "DITTO") & (tidy["metric"] == "mean_nrmse_paper_convention_converted")
               & (tidy["model"] == "si")]
    assert row["value"].tolist() == pytest.approx([0.2336 / np.sqrt(2)], abs=5e-5)


def test_a_table_without_marks_has_no_footnote():
    spec = _ditto_spec()
    for d in spec["datasets"].values():
        d.pop("published")
    scores = _ditto_scores(spec, {"battus-z": 0.8, "battus": 0.79, "random": 0.7},
                           {"battus-z": 0.1, "battus": 0.11, "random": 0.2})
    table = report.build_table("ditto_protocol", spec, scores, published=report.read_published(DITTO))
    assert not any(p.marks for p in table.panels) and "\u2020" not in table.caption_text()


# ---------------------------------------------------------------------------
# wins, ties and losses


def _wtl_scores(spec: dict, rows: dict) -> dict:
    """rows: method -> dataset -> (F1, NRMSE under DITTO's convention)."""
    scores = {}
    for m, per in rows.items():
        for d, (f1, nrmse) in per.items():
            paper = nrmse / np.sqrt(2) if d.endswith("-si") else nrmse
            scores[f"{d}|{m}|final"] = {"hermes": {"f1": f1, "nrmse": paper, "nrmse_ditto": nrmse}}
    return scores


def test_win_tie_loss_counts_a_tie_within_the_published_tolerance(tmp_path):
    """DITTO published .8384/.8269/.8280 F1 on BA-, ER-, Oregon2-SI: Battus-Z's .8420 is .0036 above it,
    within the stated .006, a tie; .8400 against .8269 a win; .8100 against .8280 a loss."""
    from battus.suite.report.win_loss_tables import PUBLISHED_TOLERANCE

    assert PUBLISHED_TOLERANCE == {"f1": 0.006, "nrmse": 0.0047}
    spec = _ditto_spec(si=SI[:3], sir=[])
    rows = {"battus-z": {"ba-si": (0.8420, 0.2100), "er-si": (0.8400, 0.2300), "oregon2-si": (0.8100, 0.2000)},
            "battus": {"ba-si": (0.8420, 0.2100), "er-si": (0.8401, 0.2300), "oregon2-si": (0.8100, 0.2000)},
            "random": {"ba-si": (0.7, 0.3), "er-si": (0.7, 0.3), "oregon2-si": (0.7, 0.3)}}
    table = report.build_table("ditto_win_loss", spec, _wtl_scores(spec, rows),
                               published=report.read_published(DITTO))
    frame = table.panels[0].frame.set_index(["Method", "Against"])
    ditto = frame.loc[("Battus-Z", "DITTO (published)")]
    assert (ditto["F1 W"], ditto["F1 T"], ditto["F1 L"]) == (1, 1, 1)
    # NRMSE (DITTO's convention; lower is better): .2100 vs .2139 within .0047 -> tie; .2300 vs .2225 -> loss;
    # .2000 vs .2289 -> win
    assert (ditto["NRMSE W"], ditto["NRMSE T"], ditto["NRMSE L"]) == (1, 1, 1)
    assert ditto["Mean \u0394F1"] == pytest.approx(((0.8420 - 0.8384) + (0.8400 - 0.8269) + (0.8100 - 0.8280)) / 3)
    # two runs of this run are exact: .8401 against .8400 is a loss of Battus-Z, not a tie
    mutual = frame.loc[("Battus-Z", "Battus")]
    assert (mutual["F1 W"], mutual["F1 T"], mutual["F1 L"]) == (0, 2, 1)
    assert (mutual["NRMSE W"], mutual["NRMSE T"], mutual["NRMSE L"]) == (0, 3, 0)
    # the control is never compared; the published DHREC and CRI are
    against = {a for _, a in frame.index}
    assert "Random" not in against and {"DHREC (published)", "CRI (published)"} <= against
    assert {m for m, _ in frame.index} == {"Battus-Z", "Battus"}
    md, tex, html = _written(table, tmp_path)
    assert "no published standard deviation" in table.note and "\u00b1.0060 F1" in table.note
    assert tex.isascii() and "ditto_win_loss" in tex
    tidy = table.tidy
    cell = tidy[(tidy["method"] == "Battus-Z") & (tidy["against"] == "DITTO") & (tidy["dataset"] == "ba-si")
                & (tidy["metric"] == "f1_outcome")]
    assert cell["value"].tolist() == [0]


def test_a_mean_lead_resting_on_one_dataset_is_shown():
    """Battus-Z leads DITTO's mean F1 only through BA-SI: without it the mean difference is negative."""
    spec = _ditto_spec(si=SI[:3], sir=[])
    rows = {"battus-z": {"ba-si": (0.9384, 0.2139), "er-si": (0.8169, 0.2225), "oregon2-si": (0.8180, 0.2289)},
            "battus": {"ba-si": (0.8, 0.3), "er-si": (0.8, 0.3), "oregon2-si": (0.8, 0.3)},
            "random": {"ba-si": (0.7, 0.3), "er-si": (0.7, 0.3), "oregon2-si": (0.7, 0.3)}}
    table = report.build_table("ditto_win_loss", spec, _wtl_scores(spec, rows),
                               published=report.read_published(DITTO))
    row = table.panels[0].frame.set_index(["Method", "Against"]).loc[("Battus-Z", "DITTO (published)")]
    assert row["Mean \u0394F1"] > 0 and (row["F1 W"], row["F1 T"], row["F1 L"]) == (1, 0, 2)
    assert row["\u0394F1 w/o one dataset"] == "-.0100 \u2026 .0450"
    assert "Battus-Z against DITTO on F1, SI (mean \u0394 .0267, -.0100 without BA-SI)" in table.note


def test_ties_between_means_over_seeds_use_their_intervals():
    from battus.suite.report.win_loss_tables import outcome, win_tie_loss

    stat = report.SeedStat
    close_a, close_b = stat([0.80, 0.82, 0.81]), stat([0.815, 0.825, 0.805])
    assert outcome(close_a, close_b, "max") == 0
    assert outcome(stat([0.90, 0.91, 0.92]), close_b, "max") == 1
    assert outcome(0.2, 0.2046, "min", tol_b=0.0047) == 0 and outcome(0.2, 0.2048, "min", tol_b=0.0047) == 1
    assert win_tie_loss([0.9, np.nan, 0.5], [0.8, 0.7, 0.5], "max") == (1, 1, 0)


def test_the_ditto_win_loss_table_is_made_beside_the_ditto_protocol_table():
    item = report.REPORT_ITEMS["ditto_win_loss"]
    assert item.kind == "table" and item.shows == ("ditto_protocol",) and item.published == "ditto_kdd23"
    names = list(report.REPORT_ITEMS)
    assert names.index("ditto_win_loss") == names.index("ditto_protocol") + 1
    assert (ROOT / "reports/ditto_win_loss.rst").is_file()


# ---------------------------------------------------------------------------
# what the yardsticks are for, from how they scored


def test_the_ditto_protocol_note_states_the_baselines_role_from_their_scores():
    spec = _ditto_spec(si=SI[:2], sir=SIR[:2])
    exp = spec["experiments"]["ditto_protocol"]
    exp["methods"] = [*exp["methods"], ["observed-copy", "default"], ["graph-distance", "default"]]
    spec["labels"] |= {"observed-copy/final": "Observed copy", "graph-distance/final": "Graph distance"}
    spec["ditto_variants"] |= {"observed-copy/default": "final", "graph-distance/default": "final"}
    f1 = {"battus-z": 0.8, "battus": 0.79, "random": 0.7, "observed-copy": 0.5, "graph-distance": 0.6}
    rows = {m: {d: (x, 0.2) for d in spec["datasets"]} for m, x in f1.items()}
    scores = _wtl_scores(spec, rows)
    table = report.build_table("ditto_protocol", spec, scores)
    assert "the random control's F1 is above Observed copy on 4 and Graph distance on 4 of the 4 datasets" in table.note
    assert "below the floor on every dataset" in table.note and "no evidence of quality" in table.note
    scores["ba-si|graph-distance|final"]["hermes"]["f1"] = 0.75  # above the control on one dataset
    table = report.build_table("ditto_protocol", spec, scores)
    assert "Graph distance on 3 of the 4 datasets" in table.note and "below the floor on every" not in table.note
    # the baselines are opponents in the win/loss table, never methods under test
    wtl = report.build_table("ditto_win_loss", spec, scores)
    assert {m for m in wtl.panels[0].frame["Method"]} == {"Battus-Z", "Battus"}
    assert "Observed copy" in set(wtl.panels[0].frame["Against"])


def test_the_reading_guide_says_the_baselines_are_no_floor_above_the_random_control():
    from battus.suite.report.summary import reading_guide

    spec = {"runs": [["ba-si", "battus-z", "default"]],
            "methods": {"random": {"label": "Random (negative control)", "kind": "control", "variants": ["default"]},
                        "observed-copy": {"label": "Observed copy (naive baseline)", "kind": "baseline",
                                          "variants": ["default"]}}}
    facts = {"histories": {"simulate": 1}, "random": {"SI": {"f1": 0.7, "nrmse": 0.25}},
             "baselines": {"Observed copy (naive baseline)": {"SI": {"f1": 0.6, "nrmse": 0.3}}}}
    guide = reading_guide(spec, facts)
    assert "not a floor above the random control" in guide and "no evidence of quality" in guide
    assert "Observed copy (naive baseline) SI mean F1 .6000 against the random control's .7000" in guide
