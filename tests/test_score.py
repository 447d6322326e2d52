"""The scorers' two NRMSE conventions: the paper's and DITTO's evaluation code."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_ditto_nrmse

from battus.score import hermes_score, nrmse, unobserved_score


def monotone_history(rng: np.random.Generator, T: int, n: int, model: str) -> np.ndarray:
    """A random monotone history: S, then I from a random frame, then (SIR) R from a later one."""
    t_inf = rng.integers(0, T + 2, size=n)
    t_rec = t_inf + rng.integers(1, T + 2, size=n) if model == "sir" else np.full(n, T + 1)
    t = np.arange(T + 1)[:, None]
    return ((t >= t_inf).astype(np.uint8) + (t >= t_rec)).astype(np.uint8)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(1, 12), n=st.integers(1, 30), model=st.sampled_from(["si", "sir"]))
def test_ditto_convention_matches_dittos_formula(seed, T, n, model):
    rng = np.random.default_rng(seed)
    truth, pred = monotone_history(rng, T, n, model), monotone_history(rng, T, n, model)
    score = hermes_score(truth, pred, model)
    assert score["nrmse_ditto"] == pytest.approx(naive_ditto_nrmse(truth, pred, model), rel=1e-12, abs=1e-15)
    if model == "si":  # the paper keeps the 1/2 of a zero recovery term
        assert score["nrmse_ditto"] == pytest.approx(np.sqrt(2) * score["nrmse"], rel=1e-12, abs=1e-15)
    else:
        assert score["nrmse_ditto"] == score["nrmse"]


def test_unobserved_scores_carry_both_conventions():
    rng = np.random.default_rng(5)
    truth, pred = monotone_history(rng, 10, 50, "si"), monotone_history(rng, 10, 50, "si")
    score = unobserved_score(truth, pred, "si", np.array([5, 10]))
    assert score["nrmse"] > 0 and score["nrmse_ditto"] == pytest.approx(np.sqrt(2) * score["nrmse"])
    assert unobserved_score(truth, pred, "si", np.arange(11)) == {"f1": None, "nrmse": None, "nrmse_ditto": None}


def test_unknown_convention_is_refused():
    truth = np.zeros((3, 4), dtype=np.uint8)
    with pytest.raises(ValueError, match="convention"):
        nrmse(truth, truth, "si", convention="hermes")
