"""Fitted Battus: every dataset within .01 of the paper's row, and the quality gate."""

from __future__ import annotations

import numpy as np
import paper_tables as P
import pytest

from battus.infer import method_options, reconstruct
from battus.score import hermes_score


@pytest.fixture(scope="module")
def battus_scores(canonical):
    out = {}
    for name, canon in canonical.items():
        recon = reconstruct(canon.to_problem(), method_options("battus"), backend="cpu")
        out[name] = (hermes_score(canon.truth, recon.states, canon.model), recon)
    return out


def test_every_dataset_within_a_hundredth(battus_scores):
    for name, (score, _) in battus_scores.items():
        f1, err = P.BATTUS[name]
        assert abs(score["f1"] - f1) <= 0.01, (name, score)
        assert abs(score["nrmse"] - err) <= 0.01, (name, score)


def test_quality_gate(battus_scores):
    f1 = np.mean([s["f1"] for s, _ in battus_scores.values()])
    err = np.mean([s["nrmse"] for s, _ in battus_scores.values()])
    assert f1 >= P.HERMES_GATE[0] and err <= P.HERMES_GATE[1]
    assert abs(f1 - P.BATTUS_MEAN[0]) <= 0.005 and abs(err - P.BATTUS_MEAN[1]) <= 0.005


def test_fit_records_search(battus_scores):
    for name, (_, recon) in battus_scores.items():
        rounds = recon.fit_trace
        assert [r["round"] for r in rounds] == [0, 1, 2, 3, 4], name
        si = name.endswith("-si")
        assert rounds[0]["candidates"] == (24 if si else 576)
        assert all(r["candidates"] == (7 if si else 49) for r in rounds[1:])
        objectives = [r["objective"] for r in rounds]
        assert all(b >= a - 1e-12 for a, b in zip(objectives, objectives[1:], strict=False)), name
        assert 1e-4 <= recon.beta_i <= 0.5


def test_unobserved_and_causal_columns_close(canonical, battus_scores):
    from battus.score import causal_violations, event_weighted, unobserved_score

    unobserved = []
    events = {"si": [], "sir": []}
    for name, (_, recon) in battus_scores.items():
        canon = canonical[name]
        problem = canon.to_problem()
        unobserved.append(unobserved_score(canon.truth, recon.states, canon.model, problem.observations.times))
        events[canon.model].append(causal_violations(canon.graph, recon.states))
    f1, err = P.UNOBSERVED_MEAN["battus"]
    assert abs(np.mean([s["f1"] for s in unobserved]) - f1) <= 0.002
    assert abs(np.mean([s["nrmse"] for s in unobserved]) - err) <= 0.002
    for model in ("si", "sir"):
        assert abs(100 * event_weighted(events[model]) - P.CAUSAL_EVENT_WEIGHTED[model][1]) <= 0.1


@pytest.mark.parametrize("row,overrides", [
    ("battus-threshold", {"decoder": "threshold"}),
    ("battus-threshold-noreset", {"decoder": "threshold", "reset": False}),
])
def test_ablation_rows_of_the_fitted_method(canonical, row, overrides):
    scores = [hermes_score(c.truth, reconstruct(c.to_problem(), method_options("battus", **overrides),
                                                backend="cpu").states, c.model) for c in canonical.values()]
    f1, err = P.ABLATION[row]
    assert abs(np.mean([s["f1"] for s in scores]) - f1) <= 0.002
    assert abs(np.mean([s["nrmse"] for s in scores]) - err) <= 0.002
    assert np.mean([s["f1"] for s in scores]) >= P.HERMES_GATE[0]
