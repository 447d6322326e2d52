"""The scorers: equal to their naive definitions, and the two NRMSE conventions (the paper's and
DITTO's evaluation code)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import naive_causal_violations, naive_ditto_nrmse, naive_frame_scores

from battus.graph import from_arcs
from battus.kernels import score_cpu
from battus.score import causal_violations, hermes_score, nrmse, unobserved_score


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


def any_history(rng: np.random.Generator, T: int, n: int, model: str) -> np.ndarray:
    """States drawn cell by cell (a plug-in's prediction need not be monotone)."""
    return rng.integers(0, 3 if model == "sir" else 2, size=(T + 1, n), dtype=np.uint8)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(0, 12), n=st.integers(1, 40), model=st.sampled_from(["si", "sir"]),
       monotone=st.booleans(), observed=st.sets(st.integers(0, 12), max_size=4))
def test_scores_equal_their_naive_definitions(seed, T, n, model, monotone, observed):
    """The same floats as the plain numpy definitions: F1, both NRMSEs, HERMES and unobserved-only."""
    rng = np.random.default_rng(seed)
    draw = monotone_history if monotone else any_history
    truth, pred = draw(rng, T, n, model), draw(rng, T, n, model)
    assert hermes_score(truth, pred, model) == naive_frame_scores(truth, pred, model, np.arange(T + 1), True)
    times = np.array(sorted(t for t in observed if t <= T), dtype=np.int64)
    keep = np.setdiff1d(np.arange(T + 1), times)
    got = unobserved_score(truth, pred, model, times)
    assert got == (naive_frame_scores(truth, pred, model, keep, False) if keep.size else
                   {"f1": None, "nrmse": None, "nrmse_ditto": None})


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(0, 8), n=st.integers(1, 30), arcs=st.integers(0, 120),
       monotone=st.booleans())
def test_causal_violations_equal_the_naive_count(seed, T, n, arcs, monotone):
    rng = np.random.default_rng(seed)
    graph = from_arcs(rng.integers(0, n, arcs), rng.integers(0, n, arcs), directed=True, n=n)
    states = (monotone_history if monotone else any_history)(rng, T, n, "sir")
    assert causal_violations(graph, states) == naive_causal_violations(graph, states)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), T=st.integers(0, 10), n=st.integers(1, 40), monotone=st.booleans())
def test_hitting_frames_equal_hitting_times(seed, T, n, monotone):
    """The one-pass kernel the causal census uses: each vertex's first frame at state >= 1 and
    >= 2 (T+1 when never), as :func:`battus.decode.hitting_times` defines them, any history."""
    from battus.decode import hitting_times

    rng = np.random.default_rng(seed)
    states = (monotone_history if monotone else any_history)(rng, T, n, "sir")
    t_inf, t_rec = score_cpu.hitting_frames(states)
    assert t_inf.tolist() == hitting_times(states, 1).tolist() and t_rec.tolist() == hitting_times(states, 2).tolist()


@pytest.mark.parametrize("T, n", [(0, 1), (3, 5), (40, 110_000)])  # the last one frame a thread
def test_states_from_hitting_times_round_trip(T, n):
    """A monotone history and its hitting times give each other back: the decoders' states are
    S before t_inf, I until t_rec, R from then on, frame by frame."""
    from battus.decode import hitting_times, states_from_hitting_times

    states = monotone_history(np.random.default_rng(n), T, n, "sir")
    t_inf, t_rec = hitting_times(states, 1), hitting_times(states, 2)
    got = states_from_hitting_times(t_inf, t_rec, T)
    assert got.dtype == np.uint8 and got.shape == states.shape
    np.testing.assert_array_equal(got, states)


def test_kernels_span_several_vertex_blocks():
    """Histories wider than one block of the kernels (counts summed over blocks and threads)."""
    rng = np.random.default_rng(11)
    n = 2 * score_cpu._BLOCK + 77
    truth, pred = monotone_history(rng, 6, n, "sir"), any_history(rng, 6, n, "sir")
    assert hermes_score(truth, pred, "sir") == naive_frame_scores(truth, pred, "sir", np.arange(7), True)
    graph = from_arcs(rng.integers(0, n, 5 * n), rng.integers(0, n, 5 * n), directed=True, n=n)
    assert causal_violations(graph, truth) == naive_causal_violations(graph, truth)
    from battus.decode import hitting_times

    assert [x.tolist() for x in score_cpu.hitting_frames(pred)] == [hitting_times(pred, k).tolist() for k in (1, 2)]


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


def test_calibration_of_perfect_uniform_and_overconfident_posteriors():
    from battus.score import calibration_score

    rng = np.random.default_rng(2)
    truth = monotone_history(rng, 8, 200, "sir")
    obs = np.array([4, 8])
    perfect = np.stack([truth == x for x in range(3)]).astype(np.float32)
    c = calibration_score(truth, perfect, obs)
    assert c["brier"] == 0 and c["log_loss"] == pytest.approx(0, abs=1e-12) and c["ece"] == 0
    assert c["overconfidence"] == 0
    uniform = np.full((3, *truth.shape), 1 / 3, dtype=np.float64)
    c = calibration_score(truth, uniform, obs)
    assert c["brier"] == pytest.approx(2 / 3) and c["log_loss"] == pytest.approx(np.log(3))
    assert c["overconfidence"] < 0  # 1/3 confidence, right more often than that in a 3-state history
    # certain and wrong: overconfident, and the log-loss is capped by the floor, not infinite
    wrong = np.roll(perfect, 1, axis=0)
    c = calibration_score(truth, wrong, obs)
    assert c["overconfidence"] == pytest.approx(1.0) and c["brier"] == pytest.approx(2.0)
    assert np.isfinite(c["log_loss"]) and c["log_loss"] > 30
    # reliability: the bins partition the unobserved cells
    assert sum(c["reliability"]["count"]) == (truth.shape[0] - len(obs)) * truth.shape[1]
    assert calibration_score(truth, perfect, np.arange(9)) is None


def test_reliability_bins_match_a_direct_count():
    from battus.score import calibration_score

    rng = np.random.default_rng(3)
    truth = monotone_history(rng, 6, 300, "si")
    p_inf = rng.random(truth.shape)
    posteriors = np.stack([1 - p_inf, p_inf, np.zeros_like(p_inf)])
    c = calibration_score(truth, posteriors, np.array([6]))
    keep = slice(0, 6)
    q, y = p_inf[keep].ravel(), truth[keep].ravel() > 0
    for b in range(10):
        inside = (q >= b / 10) & (q < (b + 1) / 10)
        assert c["reliability"]["count"][b] == inside.sum()
        assert c["reliability"]["observed_frequency"][b] == pytest.approx(y[inside].mean())
