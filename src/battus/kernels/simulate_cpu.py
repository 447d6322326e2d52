"""Numba CPU kernel of the SI/SIR simulator: the step rule of :mod:`battus.kernels.vertex_rules` over ``prange``."""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from .rng import uniform
from .vertex_rules import sir_step_rule

_sir_step_vertex = numba.njit(cache=True, inline="always")(sir_step_rule(uniform))


@numba.njit(parallel=True, cache=True)
def _sir_step(indptr, indices, current, nxt, beta_i, beta_r, seed, step, same_step_recovery):
    for u in prange(indptr.shape[0] - 1):
        nxt[u] = _sir_step_vertex(indptr, indices, current, u, beta_i, beta_r, seed, step, same_step_recovery)


def simulate(indptr: np.ndarray, indices: np.ndarray, states: np.ndarray, beta_i: float, beta_r: float, seed: int,
             same_step_recovery: bool) -> np.ndarray:
    """Fill rows 1..T of the (T+1, n) uint8 history ``states`` from its row 0, in place."""
    for t in range(states.shape[0] - 1):
        _sir_step(indptr, indices, states[t], states[t + 1], float(beta_i), float(beta_r), np.uint64(seed),
                  np.uint64(t), bool(same_step_recovery))
    return states
