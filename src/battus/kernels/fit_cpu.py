"""Numba CPU kernels of rate fitting: Eq. 4 for a batch of rate candidates, float64.

Layout vertex x candidate (``(n, C)``): every candidate advances through the
same arc loop, so a gathered neighbour row is contiguous. The objective is
summed serially over vertices so its float64 value, and hence the arg-max the
search in :mod:`battus.fit` takes, is the same run to run.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

_LOG_FLOOR = 1e-300


@numba.njit(parallel=True, cache=True)
def _batch_step(indptr, indices, beta_i, beta_r, f_s, f_i, f_r, keep, keep_next):
    # Vertex x candidate layout. ``keep[v, c] = 1 - beta_i[c] * f_i[v, c]`` is
    # formed once per vertex and step, so the arc loop is a pure product over
    # contiguous rows (the same float64 operations as forming it per arc, so
    # the result is bit-identical). Neighbours read only ``keep``; each vertex
    # advances its own marginals in place and writes its next factor to a
    # second buffer, so no thread reads a value another already advanced.
    # A vertex with f_S = 0 for every candidate (reset to an observed I or R, or underflowed)
    # skips its arcs: its product rho in [0, 1] only meets f_S in f_S * (1 - rho) and f_S * rho,
    # both +0.0 for any such rho, so rho = 1 gives the same bits.
    n = indptr.shape[0] - 1
    n_cand = beta_i.shape[0]
    for u in prange(n):
        acc = keep_next[u]  # reuse the output row as the product accumulator
        susceptible = False
        for c in range(n_cand):
            acc[c] = 1.0
            susceptible = susceptible or f_s[u, c] != 0.0
        if susceptible:
            for e in range(indptr[u], indptr[u + 1]):
                row = keep[indices[e]]
                for c in range(n_cand):
                    acc[c] *= row[c]
        for c in range(n_cand):
            rho = acc[c]
            k = f_i[u, c] + f_s[u, c] * (1.0 - rho)
            f_s[u, c] = f_s[u, c] * rho
            f_i[u, c] = k * (1.0 - beta_r[c])
            f_r[u, c] = f_r[u, c] + k * beta_r[c]
            acc[c] = 1.0 - beta_i[c] * f_i[u, c]


@numba.njit(parallel=True, cache=True)
def _batch_keep(beta_i, f_i, keep):
    for u in prange(f_i.shape[0]):
        for c in range(beta_i.shape[0]):
            keep[u, c] = 1.0 - beta_i[c] * f_i[u, c]


@numba.njit(cache=True)
def _batch_score_and_reset(states, f_s, f_i, f_r, out_ll):
    # Serial over vertices on purpose: the float64 sum order is fixed, so the
    # objective (and hence the arg-max) is bit-identical run to run.
    n, n_cand = f_s.shape
    for u in range(n):
        s = states[u]
        for c in range(n_cand):
            if s == 0:
                p = f_s[u, c]
            elif s == 1:
                p = f_i[u, c]
            else:
                p = f_r[u, c]
            out_ll[c] += np.log(max(p, _LOG_FLOOR))
            f_s[u, c] = 1.0 if s == 0 else 0.0
            f_i[u, c] = 1.0 if s == 1 else 0.0
            f_r[u, c] = 1.0 if s == 2 else 0.0


@numba.njit(cache=True)
def segmented_loglik(indptr, indices, prior, beta_i, beta_r, T, obs_index, obs_states):
    """Eq. 4 for a batch of candidates (vertex x candidate layout), unnormalised.

    Returns the sum over observed frames and vertices of log f^{y}_{t,u};
    after each observed frame is scored the marginals are reset to it.
    Vertices without susceptible mass skip their arcs (:func:`_batch_step`;
    the same values bit for bit).
    """
    n = indptr.shape[0] - 1
    n_cand = beta_i.shape[0]
    f_s = np.full((n, n_cand), prior[0])
    f_i = np.full((n, n_cand), prior[1])
    f_r = np.full((n, n_cand), prior[2])
    keep = np.empty((n, n_cand))
    keep_next = np.empty((n, n_cand))
    ll = np.zeros(n_cand)
    last_obs = -1
    for t in range(T + 1):
        if obs_index[t] >= 0:
            last_obs = t
    for t in range(last_obs + 1):
        if obs_index[t] >= 0:
            _batch_score_and_reset(obs_states[obs_index[t]], f_s, f_i, f_r, ll)
        if t == last_obs:
            break
        if t == 0 or obs_index[t] >= 0:  # marginals were (re)set: rebuild the factors
            _batch_keep(beta_i, f_i, keep)
        _batch_step(indptr, indices, beta_i, beta_r, f_s, f_i, f_r, keep, keep_next)
        keep, keep_next = keep_next, keep
    return ll
