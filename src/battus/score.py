"""Scorers: HERMES-compatible, unobserved-only, and causal violation (Eq. 8)."""

from __future__ import annotations

import json
import math

import numpy as np

from .causal import certify_violations
from .errors import InputError
from .graph import Graph
from .kernels import score_cpu
from .problem import check_posteriors


def observed_frames(values, T: int, source: str, field: str) -> np.ndarray:
    """The frames a reconstruction saw (recorded in its provenance), checked: integers, increasing, in 0..T."""
    if not isinstance(values, list) or not values:
        raise InputError(source, field, "expected a non-empty list of frames")
    if any(isinstance(t, bool) or not isinstance(t, int) for t in values):
        raise InputError(source, field, "frames must be integers")
    if min(values) < 0 or max(values) > T:
        raise InputError(source, field, f"frame outside the history's 0..{T}")
    times = np.asarray(values, dtype=np.int64)
    if np.any(np.diff(times) <= 0):
        raise InputError(source, field, "frames must be strictly increasing")
    return times


def _macro_f1(confusion: np.ndarray) -> float:
    """Macro-F1 over the classes present in truth or prediction, from the confusion counts
    ``[truth state, predicted state]`` (zero division -> 0)."""
    rows, cols = confusion.sum(axis=1), confusion.sum(axis=0)
    scores = []
    for c in range(confusion.shape[0]):
        if not (rows[c] or cols[c]):
            continue  # class absent from both
        tp = int(confusion[c, c])
        fp, fn = int(cols[c]) - tp, int(rows[c]) - tp
        denom = 2 * tp + fp + fn
        scores.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(scores)) if scores else 0.0


NRMSE_CONVENTIONS = ("paper", "ditto")


def nrmse(truth: np.ndarray, pred: np.ndarray, model: str, frames: np.ndarray | None = None,
          convention: str = "paper") -> float:
    """NRMSE of the hitting times of I and R, over ``T + 1``.

    SIR: sqrt((MSE(h_I) + MSE(h_R)) / 2) / (T + 1) under both conventions. SI:
    the paper keeps the 1/2 with a zero R term, sqrt(MSE(h_I) / 2) / (T + 1);
    DITTO's evaluation code (q-rz/KDD23-DITTO, inc/test.py, test_nrmse)
    averages only when the data has recovery times, sqrt(MSE(h_I)) / (T + 1),
    which is sqrt(2) times the paper's value for the same prediction. A hitting
    time is the first frame among ``frames`` (default: all) at that state, T + 1
    when there is none.
    """
    if convention not in NRMSE_CONVENTIONS:
        raise ValueError(f"unknown NRMSE convention {convention!r}")
    T = truth.shape[0] - 1
    frames = np.arange(T + 1) if frames is None else frames
    _, sq_i, sq_r = score_cpu.frame_counts(truth, pred, frames, final_from_truth=False)
    return _nrmse(sq_i, sq_r, truth.shape[1], T, model, convention)


def _nrmse(sq_i: int, sq_r: int, n: int, T: int, model: str, convention: str) -> float:
    """:func:`nrmse` from the summed squared hitting-time gaps of ``n`` vertices."""
    mse_i = np.float64(sq_i) / n  # the mean of exact integer squares: the same float in any order
    if model != "sir":
        return float(np.sqrt(mse_i / (2.0 if convention == "paper" else 1.0)) / (T + 1))
    mse_r = np.float64(sq_r) / n
    return float(np.sqrt((mse_i + mse_r) / 2.0) / (T + 1))


def _frame_scores(truth: np.ndarray, pred: np.ndarray, model: str, frames: np.ndarray,
                  final_from_truth: bool) -> dict:
    """F1 and NRMSE (both conventions) over ``frames``, from one pass over both histories."""
    confusion, sq_i, sq_r = score_cpu.frame_counts(truth, pred, frames, final_from_truth)
    T, n = truth.shape[0] - 1, truth.shape[1]
    return {"f1": _macro_f1(confusion), "nrmse": _nrmse(sq_i, sq_r, n, T, model, "paper"),
            "nrmse_ditto": _nrmse(sq_i, sq_r, n, T, model, "ditto")}


def paper_from_ditto(value: float, model: str) -> float:
    """An NRMSE (or a mean of NRMSEs) under DITTO's convention restated under the paper's
    (:func:`nrmse`): divided by sqrt(2) on SI, the same on SIR. Exact for every prediction, so for
    published rows that give only DITTO's convention too."""
    return float(value) / math.sqrt(2.0) if model != "sir" else float(value)


def hermes_score(truth: np.ndarray, pred: np.ndarray, model: str) -> dict:
    """HERMES-compatible F1/NRMSE: the predicted final frame is replaced by the truth."""
    return _frame_scores(truth, pred, model, np.arange(truth.shape[0]), final_from_truth=True)


def unobserved_score(truth: np.ndarray, pred: np.ndarray, model: str, obs_times: np.ndarray) -> dict:
    """Scores with every observed frame dropped from truth and prediction."""
    T = truth.shape[0] - 1
    keep = np.setdiff1d(np.arange(T + 1), np.asarray(obs_times))
    if keep.size == 0:  # every frame was observed: nothing is left to score (JSON null)
        return {"f1": None, "nrmse": None, "nrmse_ditto": None}
    return _frame_scores(truth, pred, model, keep, final_from_truth=False)


def history_defects(states: np.ndarray, obs_times: np.ndarray | None = None,
                    obs_states: np.ndarray | None = None) -> dict:
    """What makes ``states`` ((T+1, n), 0/1/2) no valid SI/SIR history, vertex by vertex.

    ``backwards``: vertices whose state ever decreases. ``skipped_infection``: vertices that go
    from S to R with no frame as I (the NRMSE counts them as never infected: their h^I is T+1).
    ``forced_skips``: those of them the observations force, S observed at ``t`` and R at ``t + 1``
    (an SIR step never does that; a simulation with same-step recovery does). ``disagreeing``:
    vertices that differ from an observed frame (with ``obs_times``/``obs_states``). ``valid``:
    none of these but the forced skips.
    """
    states = np.asarray(states).astype(np.int8)
    T1, n = states.shape
    backwards = np.any(np.diff(states, axis=0) < 0, axis=0)
    infected = (states == 1).any(axis=0)
    skipped = (states == 2).any(axis=0) & ~infected & ~backwards
    forced = np.zeros(n, dtype=bool)
    disagreeing = np.zeros(n, dtype=bool)
    if obs_times is not None and obs_states is not None:
        times, seen = np.asarray(obs_times), np.asarray(obs_states)
        disagreeing = np.any(states[times] != seen, axis=0)
        last_s = np.where(seen == 0, times[:, None], -2).max(axis=0)
        first_r = np.where(seen == 2, times[:, None], T1 + 1).min(axis=0)
        forced = skipped & (first_r == last_s + 1)
    counts = {"backwards": int(backwards.sum()), "skipped_infection": int(skipped.sum()),
              "forced_skips": int(forced.sum()), "disagreeing": int(disagreeing.sum())}
    counts["valid"] = not (counts["backwards"] or counts["disagreeing"]
                           or counts["skipped_infection"] > counts["forced_skips"])
    return counts


def causal_violations(graph: Graph, states: np.ndarray) -> tuple[int, int]:
    """(violations, events) of Eq. 8: onsets a_v > 0 with no in-neighbour infected at a_v - 1."""
    return score_cpu.unsupported_onsets(graph.indptr, graph.indices, states)


def event_weighted(rows: list[tuple[int, int]]) -> float:
    """Aggregate CV over datasets weighted by their event counts."""
    v = sum(r[0] for r in rows)
    e = sum(r[1] for r in rows)
    return v / e if e else 0.0


def score_all(problem, states: np.ndarray) -> dict:
    """All three scorers for one prediction against ``problem.truth``."""
    truth = problem.truth
    times = problem.observations.times
    pv, pe = causal_violations(problem.graph, states)
    tv, te = causal_violations(problem.graph, truth)
    obs = problem.observations
    p_forced = certify_violations(problem.graph, states, obs.times, obs.states)["forced"]
    t_forced = certify_violations(problem.graph, truth, obs.times, obs.states)["forced"]
    return {
        "hermes": hermes_score(truth, states, problem.model),
        "unobserved": unobserved_score(truth, states, problem.model, times),
        "causal": {
            "prediction": {"violations": pv, "events": pe, "rate": pv / pe if pe else 0.0,
                           "forced": p_forced},
            "truth": {"violations": tv, "events": te, "rate": tv / te if te else 0.0, "forced": t_forced},
        },
    }


RELIABILITY_BINS = 10
LOG_LOSS_FLOOR = 1e-15  # a probability of 0 on the true state costs -log(1e-15), not infinity


def calibration_score(truth: np.ndarray, posteriors: np.ndarray, obs_times: np.ndarray) -> dict | None:
    """How well a method's probabilities match the truth, on the frames it did not observe.

    ``posteriors[x, t, u]`` is the probability that vertex ``u`` is in state
    ``x`` (S, I, R) at frame ``t``. Returns the multi-class Brier score (mean
    over cells of the squared distance to the one-hot truth), the log-loss,
    and a reliability diagram of P(not S) = P(I) + P(R) in equal-width bins
    (mean predicted probability and observed frequency of I or R per bin),
    with its expected calibration error and the overconfidence (mean
    probability of the most likely state minus how often it is the truth:
    positive = overconfident). None when every frame was observed.
    """
    T = truth.shape[0] - 1
    keep = np.setdiff1d(np.arange(T + 1), np.asarray(obs_times))
    if keep.size == 0:
        return None
    p = posteriors[:, keep, :].astype(np.float64)  # (3, frames, n)
    y = truth[keep].astype(np.int64)  # (frames, n)
    onehot = np.stack([y == x for x in range(3)]).astype(np.float64)
    brier = float(np.mean(np.sum((p - onehot) ** 2, axis=0)))
    p_true = np.take_along_axis(p, y[None], axis=0)[0]
    log_loss = float(-np.mean(np.log(np.maximum(p_true, LOG_LOSS_FLOOR))))
    infected = (p[1] + p[2]).ravel()
    outcome = (y > 0).ravel().astype(np.float64)
    bins = np.minimum((infected * RELIABILITY_BINS).astype(np.int64), RELIABILITY_BINS - 1)
    count = np.bincount(bins, minlength=RELIABILITY_BINS)
    predicted = np.bincount(bins, weights=infected, minlength=RELIABILITY_BINS)
    observed = np.bincount(bins, weights=outcome, minlength=RELIABILITY_BINS)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_predicted = np.where(count > 0, predicted / count, np.nan)
        frequency = np.where(count > 0, observed / count, np.nan)
    ece = float(np.sum(np.abs(predicted - observed)) / count.sum())
    confidence = p.max(axis=0)
    accuracy = (p.argmax(axis=0) == y).astype(np.float64)
    return {
        "frames": "unobserved",
        "brier": brier,
        "log_loss": log_loss,
        "ece": ece,
        "overconfidence": float(np.mean(confidence) - np.mean(accuracy)),
        "reliability": {
            "bins": RELIABILITY_BINS,
            "count": count.tolist(),
            "mean_predicted": [None if np.isnan(x) else float(x) for x in mean_predicted],
            "observed_frequency": [None if np.isnan(x) else float(x) for x in frequency],
        },
    }


def _timing(prediction: dict, source: str) -> dict:
    """The warm-up and every timed run of a prediction, when it records them (a prediction may
    come from any method, so both are optional; they are checked like any input)."""
    timing = {}
    warmup = prediction.get("warmup_seconds")
    if warmup is not None:
        if isinstance(warmup, bool) or not isinstance(warmup, int | float) or not 0 <= warmup < math.inf:
            raise InputError(source, "@warmup_seconds", "expected a finite number of seconds >= 0")
        timing["warmup_seconds"] = float(warmup)
    runs = prediction.get("algorithm_seconds_runs")
    if runs is not None:
        try:
            runs = json.loads(runs) if isinstance(runs, str) else runs
        except ValueError:
            runs = None
        if (not isinstance(runs, list) or not 0 < len(runs) <= 100 or not all(
                isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x < math.inf for x in runs)):
            raise InputError(source, "@algorithm_seconds_runs", "expected a list of 1 to 100 finite times >= 0")
        timing["algorithm_seconds_runs"] = [float(x) for x in runs]
    return timing


def score_prediction(problem, prediction: dict, source: str) -> dict:
    """Score a prediction record (from :func:`battus.io.read_prediction`) against ``problem``'s truth.

    The unobserved-only scores drop the frames the reconstruction actually saw:
    those recorded in the prediction's provenance (``observed_times``) when
    present, else the history's own observations.
    """
    from dataclasses import replace

    from .problem import observe

    states = prediction["states"]
    if states.shape != problem.truth.shape:
        raise InputError(source, "states", f"shape {states.shape} differs from the truth's {problem.truth.shape}")
    observed = prediction["provenance"].get("observed_times")
    if observed is not None:
        times = observed_frames(observed, problem.T, source, "@provenance/observed_times")
        problem = replace(problem, observations=observe(problem.truth, times))
    return {
        "dataset": problem.name,
        "model": problem.model,
        "T": problem.T,
        "n": problem.n,
        "observed_times": problem.observations.times.tolist(),
        "method": prediction.get("method"),
        "backend": prediction.get("backend"),
        "device": prediction.get("device"),
        "algorithm_seconds": prediction["algorithm_seconds"],
        **_timing(prediction, source),
        # methods without rates (controls, baselines, plug-ins) record NaN: JSON null here
        "beta_i": prediction["beta_i"] if math.isfinite(prediction["beta_i"]) else None,
        "beta_r": prediction["beta_r"] if math.isfinite(prediction["beta_r"]) else None,
        "params": prediction["params"],
        **score_all(problem, states),
        **_calibration(problem, prediction, source),
    }


def _calibration(problem, prediction: dict, source: str) -> dict:
    posteriors = prediction.get("posteriors")
    if posteriors is None:  # a method without probabilities
        return {}
    check_posteriors(posteriors, problem.T, problem.n, source)
    return {"calibration": calibration_score(problem.truth, posteriors, problem.observations.times)}
