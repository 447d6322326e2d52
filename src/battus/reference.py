"""Plain-numpy reference of every kernel, for tests and benchmarks only.

Written for clarity, vectorised over vertices with numpy and looping over
time and candidates in Python. The engine never calls it; the tests compare
the Numba and CUDA kernels against it, and ``benchmarks/cpu.py`` measures
the kernels' speed-up over it.
"""

from __future__ import annotations

import numpy as np

from .graph import Graph
from .problem import Problem, segments


def naive_pressure(graph: Graph, f_inf: np.ndarray, beta_i: float) -> np.ndarray:
    src, dst = graph.arcs()
    log_keep = np.log1p(-beta_i * f_inf[src])
    return np.exp(np.bincount(dst, weights=log_keep, minlength=graph.n))


def naive_mean_field_pressures(problem: Problem, beta_i: float, beta_r: float, reset: bool) -> np.ndarray:
    n, T = problem.n, problem.T
    obs_index = problem.observations.index(T)
    f = np.repeat(problem.prior[:, None], n, axis=1)
    rho = np.empty((T + 1, n))
    for t in range(T + 1):
        rho[t] = naive_pressure(problem.graph, f[1], beta_i)
        if reset and obs_index[t] >= 0:  # scored (and pressured) first, then reset
            f = np.eye(3)[problem.observations.states[obs_index[t]]].T
        if t < T:
            k = f[1] + f[0] * (1.0 - rho[t])
            f = np.stack([f[0] * rho[t], k * (1.0 - beta_r), f[2] + k * beta_r])
    return rho


def naive_transition(q: np.ndarray, beta_r: float) -> np.ndarray:
    """(n, 3, 3) row-stochastic matrices P[u, x, x'] for avoidance probabilities q."""
    P = np.zeros((q.shape[0], 3, 3))
    P[:, 0, 0] = q
    P[:, 0, 1] = (1.0 - q) * (1.0 - beta_r)
    P[:, 0, 2] = (1.0 - q) * beta_r
    P[:, 1, 1] = 1.0 - beta_r
    P[:, 1, 2] = beta_r
    P[:, 2, 2] = 1.0
    return P


def naive_forward_backward(problem: Problem, rho: np.ndarray, beta_r: float, backward: bool = True) -> np.ndarray:
    n, T = problem.n, problem.T
    obs = problem.observations
    obs_index = obs.index(T)
    gamma = np.empty((3, T + 1, n))
    left, right = segments(obs.times, T)
    for lo, hi in zip(left, right, strict=True):
        alpha = np.empty((hi - lo + 1, n, 3))
        delta = np.ones((hi - lo + 1, n, 3))
        alpha[0] = np.eye(3)[obs.states[obs_index[lo]]] if obs_index[lo] >= 0 else problem.prior
        for j in range(hi - lo):
            a = np.einsum("ux,uxy->uy", alpha[j], naive_transition(rho[lo + j + 1], beta_r))
            alpha[j + 1] = a / a.sum(axis=1, keepdims=True)
        if backward:
            if obs_index[hi] >= 0:
                delta[-1] = np.eye(3)[obs.states[obs_index[hi]]]
            for j in range(hi - lo - 1, -1, -1):
                d = np.einsum("uxy,uy->ux", naive_transition(rho[lo + j + 1], beta_r), delta[j + 1])
                delta[j] = d / d.sum(axis=1, keepdims=True)
        g = alpha * delta
        g /= g.sum(axis=2, keepdims=True)
        gamma[:, lo:hi + 1, :] = np.transpose(g, (2, 0, 1))
    return gamma


def naive_threshold(gamma: np.ndarray, tau: float, with_recovery: bool) -> tuple[np.ndarray, np.ndarray]:
    frames = gamma.shape[1]

    def first(mask):
        return np.where(mask.any(axis=0), np.argmax(mask, axis=0), frames).astype(np.int64)

    t_inf = first(1.0 - gamma[0] >= tau)
    t_rec = first(gamma[2] >= tau) if with_recovery else np.full(gamma.shape[2], frames, dtype=np.int64)
    return t_inf, t_rec


def naive_map(gamma: np.ndarray, with_recovery: bool) -> tuple[np.ndarray, np.ndarray]:
    g = gamma if with_recovery else gamma[:2]
    states = np.maximum.accumulate(np.argmax(g, axis=0), axis=0)
    frames = gamma.shape[1]

    def first(mask):
        return np.where(mask.any(axis=0), np.argmax(mask, axis=0), frames).astype(np.int64)

    return first(states >= 1), first(states >= 2)


def naive_project(problem: Problem, t_inf: np.ndarray, t_rec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t_inf, t_rec = t_inf.copy(), t_rec.copy()
    big = np.iinfo(np.int64).max
    lo_i = np.zeros_like(t_inf)
    lo_r = np.zeros_like(t_inf)
    hi_i = np.full_like(t_inf, big)
    hi_r = np.full_like(t_inf, big)
    for t, s in zip(problem.observations.times, problem.observations.states, strict=True):
        lo_i = np.where(s == 0, np.maximum(lo_i, t + 1), lo_i)
        lo_r = np.where(s <= 1, np.maximum(lo_r, t + 1), lo_r)
        hi_i = np.where(s >= 1, np.minimum(hi_i, t), hi_i)
        hi_r = np.where(s == 2, np.minimum(hi_r, t), hi_r)
    t_inf = np.minimum(np.maximum(t_inf, lo_i), hi_i)
    t_rec = np.maximum(np.minimum(np.maximum(t_rec, lo_r), hi_r), t_inf)
    return t_inf, t_rec


def naive_segmented_loglik(problem: Problem, beta_i: np.ndarray, beta_r: np.ndarray) -> np.ndarray:
    """Eq. 4 (unnormalised) for each candidate, one candidate at a time."""
    T = problem.T
    obs = problem.observations
    obs_index = obs.index(T)
    out = np.zeros(beta_i.shape[0])
    last = int(obs.times.max())
    for c in range(beta_i.shape[0]):
        f = np.repeat(problem.prior[:, None], problem.n, axis=1)
        for t in range(last + 1):
            if obs_index[t] >= 0:
                y = obs.states[obs_index[t]]
                p = f[y, np.arange(problem.n)]
                out[c] += np.sum(np.log(np.maximum(p, 1e-300)))
                f = np.eye(3)[y].T
            if t == last:
                break
            rho = naive_pressure(problem.graph, f[1], beta_i[c])
            k = f[1] + f[0] * (1.0 - rho)
            f = np.stack([f[0] * rho, k * (1.0 - beta_r[c]), f[2] + k * beta_r[c]])
    return out


def naive_reconstruct(problem: Problem, beta_i: float, beta_r: float, *, reset: bool = False,
                      backward: bool = True, decoder: str = "threshold", tau: float = 0.65,
                      projection: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fixed-rate pipeline; returns (gamma, t_inf, t_rec)."""
    sir = problem.model == "sir"
    if not sir:
        beta_r = 0.0
    rho = naive_mean_field_pressures(problem, beta_i, beta_r, reset)
    gamma = naive_forward_backward(problem, rho, beta_r, backward)
    t_inf, t_rec = naive_threshold(gamma, tau, sir) if decoder == "threshold" else naive_map(gamma, sir)
    if projection:
        t_inf, t_rec = naive_project(problem, t_inf, t_rec)
    return gamma, t_inf, t_rec
