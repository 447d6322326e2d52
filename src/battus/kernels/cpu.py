"""Numba CPU kernels (``njit(parallel=True, cache=True)``), float64 throughout.

Every kernel is vertex-parallel inside a time step; time steps are
sequential because frame t+1 depends on frame t. ``fastmath`` stays off: the
likelihood and the threshold crossings must not depend on reassociation.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

_LOG_FLOOR = 1e-300


@numba.njit(parallel=True, cache=True)
def pressure(indptr, indices, f_inf, beta_i, out):
    """out[u] = prod over in-neighbours v of (1 - beta_i * f_inf[v])."""
    n = indptr.shape[0] - 1
    for u in prange(n):
        acc = 1.0
        for e in range(indptr[u], indptr[u + 1]):
            acc *= 1.0 - beta_i * f_inf[indices[e]]
        out[u] = acc


@numba.njit(parallel=True, cache=True)
def _reset_to_observation(states, f_s, f_i, f_r):
    for u in prange(states.shape[0]):
        s = states[u]
        f_s[u] = 1.0 if s == 0 else 0.0
        f_i[u] = 1.0 if s == 1 else 0.0
        f_r[u] = 1.0 if s == 2 else 0.0


@numba.njit(parallel=True, cache=True)
def _mean_field_update(rho, beta_r, f_s, f_i, f_r):
    for u in prange(f_s.shape[0]):
        k = f_i[u] + f_s[u] * (1.0 - rho[u])
        f_s[u] = f_s[u] * rho[u]
        f_i[u] = k * (1.0 - beta_r)
        f_r[u] = f_r[u] + k * beta_r


def mean_field_pressures(
    indptr, indices, prior, beta_i, beta_r, T, obs_index, obs_states, reset, out_rho
):
    """Run the mean-field recursion (Eq. 3) and store every frame's pressure.

    ``out_rho[t]`` is computed from the marginals of frame t. With ``reset`` the
    marginals are replaced by the observed snapshot at each observed frame
    before that frame's pressure is taken.
    """
    n = indptr.shape[0] - 1
    f_s = np.full(n, prior[0])
    f_i = np.full(n, prior[1])
    f_r = np.full(n, prior[2])
    for t in range(T + 1):
        if reset and obs_index[t] >= 0:
            _reset_to_observation(obs_states[obs_index[t]], f_s, f_i, f_r)
        pressure(indptr, indices, f_i, beta_i, out_rho[t])
        if t < T:
            _mean_field_update(out_rho[t], beta_r, f_s, f_i, f_r)


@numba.njit(cache=True)
def _onehot(state, vec):
    vec[0] = 1.0 if state == 0 else 0.0
    vec[1] = 1.0 if state == 1 else 0.0
    vec[2] = 1.0 if state == 2 else 0.0


@numba.njit(parallel=True, cache=True)
def forward_backward(rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward, gamma):
    """Segment-wise dual-anchor forward-backward over frozen pressures.

    The transition t -> t+1 of vertex u uses q = rho[t+1, u], the pressure of
    the mean-field marginals at frame t+1 (the convention that reproduces the
    paper). Segment s spans frames seg_left[s]..seg_right[s]; its forward
    message starts from the observation at seg_left[s] (or ``prior`` when that
    frame is unobserved) and its backward message from the observation at
    seg_right[s] (or all-ones when unobserved or ``backward`` is off).
    Later segments overwrite the shared boundary frame.
    """
    n = rho.shape[1]
    n_seg = seg_left.shape[0]
    n_frames = rho.shape[0]
    for u in prange(n):
        alpha = np.empty((n_frames, 3))
        delta = np.empty((n_frames, 3))
        for s in range(n_seg):
            lo = seg_left[s]
            hi = seg_right[s]
            if obs_index[lo] >= 0:
                _onehot(obs_states[obs_index[lo], u], alpha[lo])
            else:
                alpha[lo, 0] = prior[0]
                alpha[lo, 1] = prior[1]
                alpha[lo, 2] = prior[2]
            for t in range(lo, hi):
                q = rho[t + 1, u]
                a_s = alpha[t, 0]
                a_i = alpha[t, 1]
                a_r = alpha[t, 2]
                nxt_s = a_s * q
                infected = a_s * (1.0 - q) + a_i
                nxt_i = infected * (1.0 - beta_r)
                nxt_r = infected * beta_r + a_r
                z = nxt_s + nxt_i + nxt_r
                alpha[t + 1, 0] = nxt_s / z
                alpha[t + 1, 1] = nxt_i / z
                alpha[t + 1, 2] = nxt_r / z
            if backward and obs_index[hi] >= 0:
                _onehot(obs_states[obs_index[hi], u], delta[hi])
            else:
                delta[hi, 0] = 1.0
                delta[hi, 1] = 1.0
                delta[hi, 2] = 1.0
            for t in range(hi - 1, lo - 1, -1):
                if backward:
                    q = rho[t + 1, u]
                    d_s = delta[t + 1, 0]
                    d_i = delta[t + 1, 1]
                    d_r = delta[t + 1, 2]
                    d_from_i = (1.0 - beta_r) * d_i + beta_r * d_r
                    b_s = q * d_s + (1.0 - q) * d_from_i
                    b_i = d_from_i
                    b_r = d_r
                    z = b_s + b_i + b_r
                    delta[t, 0] = b_s / z
                    delta[t, 1] = b_i / z
                    delta[t, 2] = b_r / z
                else:
                    delta[t, 0] = 1.0
                    delta[t, 1] = 1.0
                    delta[t, 2] = 1.0
            for t in range(lo, hi + 1):
                g_s = alpha[t, 0] * delta[t, 0]
                g_i = alpha[t, 1] * delta[t, 1]
                g_r = alpha[t, 2] * delta[t, 2]
                z = g_s + g_i + g_r
                gamma[0, t, u] = g_s / z
                gamma[1, t, u] = g_i / z
                gamma[2, t, u] = g_r / z


@numba.njit(parallel=True, cache=True)
def threshold_hitting_times(gamma, tau, with_recovery, t_inf, t_rec):
    """First t with 1 - gamma_S >= tau (infection) and gamma_R >= tau (recovery)."""
    n_frames = gamma.shape[1]
    n = gamma.shape[2]
    for u in prange(n):
        ti = n_frames
        tr = n_frames
        for t in range(n_frames):
            if 1.0 - gamma[0, t, u] >= tau:
                ti = t
                break
        if with_recovery:
            for t in range(n_frames):
                if gamma[2, t, u] >= tau:
                    tr = t
                    break
        t_inf[u] = ti
        t_rec[u] = tr


@numba.njit(parallel=True, cache=True)
def map_hitting_times(gamma, with_recovery, t_inf, t_rec):
    """Per-frame argmax (ties to the lower state), then cumulative max in S < I < R."""
    n_frames = gamma.shape[1]
    n = gamma.shape[2]
    for u in prange(n):
        ti = n_frames
        tr = n_frames
        level = 0
        for t in range(n_frames):
            best = 0
            if gamma[1, t, u] > gamma[best, t, u]:
                best = 1
            if with_recovery and gamma[2, t, u] > gamma[best, t, u]:
                best = 2
            if best > level:
                level = best
            if level >= 1 and ti == n_frames:
                ti = t
            if level == 2 and tr == n_frames:
                tr = t
        t_inf[u] = ti
        t_rec[u] = tr


@numba.njit(parallel=True, cache=True)
def project_hitting_times(obs_times, obs_states, t_inf, t_rec):
    """Clip hitting times so the decoded history equals every observed snapshot."""
    n = t_inf.shape[0]
    n_obs = obs_times.shape[0]
    for u in prange(n):
        lo_i = 0
        lo_r = 0
        hi_i = 1 << 60
        hi_r = 1 << 60
        for k in range(n_obs):
            t = obs_times[k]
            s = obs_states[k, u]
            if s == 0:
                lo_i = max(lo_i, t + 1)
                lo_r = max(lo_r, t + 1)
            elif s == 1:
                hi_i = min(hi_i, t)
                lo_r = max(lo_r, t + 1)
            else:
                hi_i = min(hi_i, t)
                hi_r = min(hi_r, t)
        ti = min(max(t_inf[u], lo_i), hi_i)
        tr = min(max(t_rec[u], lo_r), hi_r)
        if tr < ti:
            tr = ti
        t_inf[u] = ti
        t_rec[u] = tr


@numba.njit(parallel=True, cache=True)
def states_from_hitting_times(t_inf, t_rec, out):
    n_frames = out.shape[0]
    for u in prange(t_inf.shape[0]):
        for t in range(n_frames):
            if t >= t_rec[u]:
                out[t, u] = 2
            elif t >= t_inf[u]:
                out[t, u] = 1
            else:
                out[t, u] = 0


@numba.njit(parallel=True, cache=True)
def _batch_pressure(indptr, indices, f_inf, beta_i, out):
    n = indptr.shape[0] - 1
    n_cand = beta_i.shape[0]
    for u in prange(n):
        acc = np.ones(n_cand)
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            for c in range(n_cand):
                acc[c] *= 1.0 - beta_i[c] * f_inf[v, c]
        for c in range(n_cand):
            out[u, c] = acc[c]


@numba.njit(parallel=True, cache=True)
def _batch_update(rho, beta_r, f_s, f_i, f_r):
    n, n_cand = f_s.shape
    for u in prange(n):
        for c in range(n_cand):
            k = f_i[u, c] + f_s[u, c] * (1.0 - rho[u, c])
            f_s[u, c] = f_s[u, c] * rho[u, c]
            f_i[u, c] = k * (1.0 - beta_r[c])
            f_r[u, c] = f_r[u, c] + k * beta_r[c]


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


def segmented_loglik(indptr, indices, prior, beta_i, beta_r, T, obs_index, obs_states):
    """Eq. 4 for a batch of candidates (vertex x candidate layout), unnormalised.

    Returns the sum over observed frames and vertices of log f^{y}_{t,u};
    after each observed frame is scored the marginals are reset to it.
    """
    n = indptr.shape[0] - 1
    n_cand = beta_i.shape[0]
    f_s = np.full((n, n_cand), prior[0])
    f_i = np.full((n, n_cand), prior[1])
    f_r = np.full((n, n_cand), prior[2])
    rho = np.empty((n, n_cand))
    ll = np.zeros(n_cand)
    last_obs = int(np.max(np.nonzero(obs_index >= 0)[0])) if np.any(obs_index >= 0) else -1
    for t in range(last_obs + 1):
        if obs_index[t] >= 0:
            _batch_score_and_reset(obs_states[obs_index[t]], f_s, f_i, f_r, ll)
        if t == last_obs:
            break
        _batch_pressure(indptr, indices, f_i, beta_i, rho)
        _batch_update(rho, beta_r, f_s, f_i, f_r)
    return ll
