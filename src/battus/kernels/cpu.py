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
def _pressure_and_update(indptr, indices, beta_i, beta_r, f_s, f_i, f_i_next, f_r, rho_out, update, observed):
    # Fused step: vertex u's pressure reads the neighbours' current infected
    # marginals (f_i), and u's own next state goes to a second buffer
    # (f_i_next), so no thread reads a value another thread already advanced.
    # With a reset snapshot (``observed`` non-empty) the frame's pressure is
    # still taken from the propagated marginals, and only the propagation
    # continues from the snapshot: "reset after it is scored".
    n = indptr.shape[0] - 1
    reset = observed.shape[0] > 0
    for u in prange(n):
        acc = 1.0
        for e in range(indptr[u], indptr[u + 1]):
            acc *= 1.0 - beta_i * f_i[indices[e]]
        rho_out[u] = acc
        if reset:
            y = observed[u]
            f_s[u] = 1.0 if y == 0 else 0.0
            own_i = 1.0 if y == 1 else 0.0
            f_r[u] = 1.0 if y == 2 else 0.0
        else:
            own_i = f_i[u]
        if update:
            k = own_i + f_s[u] * (1.0 - acc)
            f_s[u] = f_s[u] * acc
            f_i_next[u] = k * (1.0 - beta_r)
            f_r[u] = f_r[u] + k * beta_r
        else:
            f_i_next[u] = own_i


@numba.njit(cache=True)
def mean_field_pressures(indptr, indices, prior, beta_i, beta_r, T, obs_index, obs_states, reset, out_rho):
    """Run the mean-field recursion (Eq. 3) and store every frame's pressure.

    ``out_rho[t]`` is computed from the propagated marginals of frame t. With
    ``reset`` the marginals are then replaced by the observed snapshot at each
    observed frame before the propagation continues (the snapshot is scored
    first, then reset, as in the fitting objective); this reproduces the
    paper's fitted Battus rows and its Panel A column.
    """
    n = indptr.shape[0] - 1
    f_s = np.full(n, prior[0])
    f_i = np.full(n, prior[1])
    f_i_next = np.empty(n)
    f_r = np.full(n, prior[2])
    no_reset = np.empty(0, dtype=np.uint8)
    for t in range(T + 1):
        observed = obs_states[obs_index[t]] if (reset and obs_index[t] >= 0) else no_reset
        _pressure_and_update(indptr, indices, beta_i, beta_r, f_s, f_i, f_i_next, f_r, out_rho[t], t < T,
                             observed)
        f_i, f_i_next = f_i_next, f_i


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
    Later segments overwrite the shared boundary frame. The forward messages
    are stored in ``gamma`` itself and turned into posteriors during the
    backward sweep, so no per-vertex scratch memory is needed.
    """
    n = rho.shape[1]
    for u in prange(n):
        for s in range(seg_left.shape[0]):
            lo = seg_left[s]
            hi = seg_right[s]
            a_s, a_i, a_r = _segment_start(obs_index, obs_states, prior, lo, u)
            gamma[0, lo, u] = a_s
            gamma[1, lo, u] = a_i
            gamma[2, lo, u] = a_r
            for t in range(lo, hi):
                q = rho[t + 1, u]
                infected = a_s * (1.0 - q) + a_i
                a_s = a_s * q
                a_i = infected * (1.0 - beta_r)
                a_r = infected * beta_r + a_r
                z = a_s + a_i + a_r
                a_s /= z
                a_i /= z
                a_r /= z
                gamma[0, t + 1, u] = a_s
                gamma[1, t + 1, u] = a_i
                gamma[2, t + 1, u] = a_r
            if backward and obs_index[hi] >= 0:
                y = obs_states[obs_index[hi], u]
                d_s = 1.0 if y == 0 else 0.0
                d_i = 1.0 if y == 1 else 0.0
                d_r = 1.0 if y == 2 else 0.0
            else:
                d_s = 1.0
                d_i = 1.0
                d_r = 1.0
            for t in range(hi, lo - 1, -1):
                if t < hi and backward:
                    q = rho[t + 1, u]
                    d_from_i = (1.0 - beta_r) * d_i + beta_r * d_r
                    b_s = q * d_s + (1.0 - q) * d_from_i
                    z = b_s + d_from_i + d_r
                    d_s = b_s / z
                    d_i = d_from_i / z
                    d_r = d_r / z
                g_s = gamma[0, t, u] * d_s
                g_i = gamma[1, t, u] * d_i
                g_r = gamma[2, t, u] * d_r
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


def segment_start_py(obs_index, obs_states, prior, lo, u):
    """Forward message of ``u`` at a segment's left frame ``lo``: its observed state there (one-hot),
    or ``prior`` when that frame is unobserved. Compiled by both backends."""
    if obs_index[lo] >= 0:
        y = obs_states[obs_index[lo], u]
        return (1.0 if y == 0 else 0.0), (1.0 if y == 1 else 0.0), (1.0 if y == 2 else 0.0)
    return prior[0], prior[1], prior[2]


def project_vertex_py(obs_times, obs_states, u, ti, tr):
    """Vertex u's hitting times clipped to agree with every observed snapshot.

    A plain function compiled by both backends (``njit`` here, a CUDA device
    function in :mod:`battus.kernels.cuda`), so the rule exists once.
    """
    lo_i = 0
    lo_r = 0
    hi_i = 1 << 60
    hi_r = 1 << 60
    for k in range(obs_times.shape[0]):
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
    ti = min(max(ti, lo_i), hi_i)
    tr = min(max(tr, lo_r), hi_r)
    if tr < ti:
        tr = ti
    return ti, tr


_project_vertex = numba.njit(cache=True, inline="always")(project_vertex_py)
_segment_start = numba.njit(cache=True, inline="always")(segment_start_py)


@numba.njit(parallel=True, cache=True)
def project_hitting_times(obs_times, obs_states, t_inf, t_rec):
    """Clip hitting times so the decoded history equals every observed snapshot."""
    for u in prange(t_inf.shape[0]):
        t_inf[u], t_rec[u] = _project_vertex(obs_times, obs_states, u, t_inf[u], t_rec[u])


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
def _batch_step(indptr, indices, beta_i, beta_r, f_s, f_i, f_r, keep, keep_next):
    # Vertex x candidate layout. ``keep[v, c] = 1 - beta_i[c] * f_i[v, c]`` is
    # formed once per vertex and step, so the arc loop is a pure product over
    # contiguous rows (the same float64 operations as forming it per arc, so
    # the result is bit-identical). Neighbours read only ``keep``; each vertex
    # advances its own marginals in place and writes its next factor to a
    # second buffer, so no thread reads a value another already advanced.
    n = indptr.shape[0] - 1
    n_cand = beta_i.shape[0]
    for u in prange(n):
        acc = keep_next[u]  # reuse the output row as the product accumulator
        for c in range(n_cand):
            acc[c] = 1.0
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
