"""Derivative-free rate fitting: maximise the segmented mean-field pseudo-likelihood (Eq. 4).

A uniform grid over [lo, hi] (24 points per rate) is followed by shrinking
rounds of 7 points per rate centred on the best point, each spanning one step
of the previous grid on either side. All candidates of a round are evaluated
together in one vertex x candidate pass (chunked to bound memory) by the
backend (:meth:`battus.backends.base.Backend.best_candidate`); the search
itself is this module's, the same for every backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .options import DEFAULT_FIT, FitSettings
from .problem import Problem

if TYPE_CHECKING:
    from .backends.base import Backend


def _axis(lo: float, hi: float, points: int) -> np.ndarray:
    return np.linspace(lo, hi, points)


def candidate_grid(axis_i: np.ndarray, axis_r: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Cartesian product, beta_i-major (SI: beta_r = 0)."""
    if axis_r is None:
        return axis_i.copy(), np.zeros_like(axis_i)
    bi, br = np.meshgrid(axis_i, axis_r, indexing="ij")
    return bi.ravel(), br.ravel()


def fit_rates(backend: Backend, prep, problem: Problem, settings: FitSettings = DEFAULT_FIT,
              progress=None) -> tuple[float, float, list]:
    """Return (beta_i, beta_r, trace); trace lists each round's best point and objective.

    The one search for every backend: the grid and its refinement are built
    here, on the host, and each round asks the backend for its best candidate.
    """
    say = progress or (lambda message: None)
    sir = problem.model == "sir"
    prior = problem.prior
    norm = float(problem.n * problem.observations.times.shape[0])
    lo, hi = settings.lower, settings.upper
    axis_i = _axis(lo, hi, settings.grid_points)
    axis_r = _axis(lo, hi, settings.grid_points) if sir else None
    trace = []
    best_i = best_r = 0.0
    scratch: dict = {}  # the backend's buffers, reused by every round and freed on return
    for round_no in range(settings.refine_rounds + 1):
        cand_i, cand_r = candidate_grid(axis_i, axis_r)
        k, objective = backend.best_candidate(prep, prior, cand_i, cand_r, norm, settings.chunk, scratch)
        best_i, best_r = float(cand_i[k]), float(cand_r[k])
        trace.append({"round": round_no, "candidates": int(cand_i.shape[0]), "beta_i": best_i,
                      "beta_r": best_r, "objective": objective})
        say(f"fit round {round_no}/{settings.refine_rounds}: {cand_i.shape[0]} candidates, "
            f"best beta_i={best_i:.5g} beta_r={best_r:.5g} objective={objective:.6g}")
        step_i = axis_i[1] - axis_i[0] if axis_i.shape[0] > 1 else 0.0
        axis_i = _axis(max(lo, best_i - step_i), min(hi, best_i + step_i), settings.refine_points)
        if sir:
            step_r = axis_r[1] - axis_r[0] if axis_r.shape[0] > 1 else 0.0
            axis_r = _axis(max(lo, best_r - step_r), min(hi, best_r + step_r), settings.refine_points)
    return best_i, best_r, trace
