"""Numba CPU kernels of inference and decoding (``njit(parallel=True, cache=True)``), float64 throughout.

Every kernel is vertex-parallel inside a time step; time steps are
sequential because frame t+1 depends on frame t. ``fastmath`` stays off: the
likelihood and the threshold crossings must not depend on reassociation.
The per-vertex arithmetic is the plain rules of :mod:`battus.kernels.vertex_rules`,
compiled here and, for the GPU, in :mod:`battus.kernels.infer_cuda`; a vertex whose
posteriors are not numbers decodes to ``vertex_rules.UNDEFINED``. Numba's cache does not
see a change to those rules (it keys on this file alone): a change there must come with
one here, or a warm cache keeps the old rules.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from . import vertex_rules


def _inline(rule):
    return numba.njit(cache=True, inline="always")(rule)




@numba.njit(cache=True, inline="always")
def _avoidance(rho, t, u):
    q = rho[t, u]
    return q, 1.0 - q


_one_hot = _inline(vertex_rules.one_hot_py)
_forward_step = _inline(vertex_rules.forward_step_py)
_backward_step = _inline(vertex_rules.backward_step_py)
_posterior = _inline(vertex_rules.posterior_py)
_threshold_vertex = _inline(vertex_rules.threshold_vertex_py)
_map_vertex = _inline(vertex_rules.map_vertex_py)
_project_vertex = _inline(vertex_rules.project_vertex_py)


@numba.njit(parallel=True, cache=True)
def _pressure_and_update(indptr, indices, beta_i, beta_r, f_s, f_i, keep, f_i_next, keep_next, f_r, rho_out, update,
                         observed, pinned):
    # Fused step: vertex u's pressure reads the neighbours' current factors
    # keep[v] = 1 - beta_i * f_i[v] (computed once per vertex, not once per
    # arc: the same float64 value the arc would compute), and u's own next
    # state goes to second buffers (f_i_next, keep_next), so no thread reads a
    # value another thread already advanced. With a reset snapshot
    # (``observed`` non-empty) the frame's pressure is still taken from the
    # propagated marginals, and only the propagation continues from the
    # snapshot: "reset after it is scored". A vertex ``pinned`` (non-empty: the
    # snapshot of the last reset before this frame) to I or R takes the neutral
    # pressure 1 without gathering (see :func:`mean_field_pressures`).
    n = indptr.shape[0] - 1
    reset = observed.shape[0] > 0
    pinning = pinned.shape[0] > 0
    for u in prange(n):
        acc = 1.0
        if not (pinning and pinned[u] != 0):
            # unsigned arc and vertex indices (both are validated non-negative): Numba then skips the
            # negative-index wraparound, two extra instructions per index in the innermost loop
            for e in range(np.uint64(indptr[u]), np.uint64(indptr[u + 1])):
                acc *= keep[np.uint64(indices[e])]
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
            nxt_i = k * (1.0 - beta_r)
            f_r[u] = f_r[u] + k * beta_r
        else:
            nxt_i = own_i
        f_i_next[u] = nxt_i
        keep_next[u] = 1.0 - beta_i * nxt_i


@numba.njit(cache=True)
def mean_field_pressures(indptr, indices, prior, beta_i, beta_r, T, obs_index, obs_states, reset, settled,
                         out_rho):
    """Run the mean-field recursion (Eq. 3) and store every frame's pressure.

    ``out_rho[t]`` is computed from the propagated marginals of frame t. With
    ``reset`` the marginals are then replaced by the observed snapshot at each
    observed frame before the propagation continues (the snapshot is scored
    first, then reset, as in the fitting objective); this reproduces the
    paper's fitted Battus rows and its Panel A column.

    Pinned vertices. With ``reset``, a vertex whose last reset before frame t
    put it in I or R has f_S = 0 from then to the next observed frame, and
    its posteriors there have no S mass: the forward message keeps
    alpha_S = 0 and the backward message's S entry only enters a common
    normaliser. So its pressure in those frames changes no marginal and no
    posterior (up to that normaliser's rounding), and it is not gathered:
    ``out_rho[t, u] = 1``, the neutral pressure, in both backends
    (:func:`battus.backends.cuda.CUDABackend.pressures`). Without ``reset``
    every pressure is gathered, since the marginals then keep their S mass.
    After the frame ``settled`` (:func:`battus.problem.settled_frame`) every
    vertex is pinned, reset or not, and nothing reads the marginals any more:
    those frames are neutral throughout and the recursion stops.
    """
    n = indptr.shape[0] - 1
    f_s = np.full(n, prior[0])
    f_i = np.full(n, prior[1])
    f_i_next = np.empty(n)
    keep = np.full(n, 1.0 - beta_i * prior[1])
    keep_next = np.empty(n)
    f_r = np.full(n, prior[2])
    no_reset = np.empty(0, dtype=np.uint8)
    pinned = no_reset
    for t in range(T + 1):
        if t > settled:
            out_rho[t:] = 1.0
            break
        observed = obs_states[obs_index[t]] if (reset and obs_index[t] >= 0) else no_reset
        _pressure_and_update(indptr, indices, beta_i, beta_r, f_s, f_i, keep, f_i_next, keep_next, f_r, out_rho[t],
                             t < T, observed, pinned)
        if observed.shape[0] > 0:
            pinned = observed
        f_i, f_i_next = f_i_next, f_i
        keep, keep_next = keep_next, keep


# vertices per block of the forward-backward: each step of a block runs over BLOCK consecutive vertices
FB_BLOCK = 64


@numba.njit(cache=True, inline="always")
def _block_span(block, n):
    """First vertex and width of vertex block ``block``, unsigned (see :func:`_forward_backward_block`)."""
    return np.uint64(block * FB_BLOCK), np.uint64(min(FB_BLOCK, n - block * FB_BLOCK))


@numba.njit(cache=True, inline="always")
def _forward_backward_block(rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward, u0, width,
                            msg, gamma, c0):
    """Posteriors of the ``width`` vertices from ``u0`` into columns ``c0`` on of ``gamma``.

    The steps of :func:`vertex_rules.forward_backward_rule` (the GPU's thread per
    vertex), in the same order for each vertex, with the loops turned: the
    block's vertices go through the frames together, so each frame's
    innermost loop runs over contiguous vertices (independent divisions in
    flight, contiguous rows of ``rho`` and ``gamma``) instead of one vertex's
    chain of dependent divisions over strided frames. ``msg`` holds one
    message (forward, then backward) per vertex of the block. Vertex and
    column indices are unsigned: Numba then skips the negative-index
    wraparound, so the frame loops compile to vector code.
    """
    for s in range(seg_left.shape[0]):
        lo = seg_left[s]
        hi = seg_right[s]
        for j in range(width):
            u = u0 + j
            if obs_index[lo] >= 0:
                a_s, a_i, a_r = _one_hot(obs_states[obs_index[lo], u])
            else:
                a_s, a_i, a_r = prior[0], prior[1], prior[2]
            msg[0, j] = a_s
            msg[1, j] = a_i
            msg[2, j] = a_r
            gamma[0, lo, c0 + j] = a_s
            gamma[1, lo, c0 + j] = a_i
            gamma[2, lo, c0 + j] = a_r
        for t in range(lo, hi):
            for j in range(width):
                u = u0 + j
                q, p_inf = _avoidance(rho, t + 1, u)
                a_s, a_i, a_r = _forward_step(msg[0, j], msg[1, j], msg[2, j], q, p_inf, beta_r)
                msg[0, j] = a_s
                msg[1, j] = a_i
                msg[2, j] = a_r
                gamma[0, t + 1, c0 + j] = a_s
                gamma[1, t + 1, c0 + j] = a_i
                gamma[2, t + 1, c0 + j] = a_r
        for j in range(width):
            if backward and obs_index[hi] >= 0:
                d_s, d_i, d_r = _one_hot(obs_states[obs_index[hi], u0 + j])
            else:
                d_s, d_i, d_r = 1.0, 1.0, 1.0
            msg[0, j] = d_s
            msg[1, j] = d_i
            msg[2, j] = d_r
        t = hi
        while t >= lo:
            for j in range(width):
                u = u0 + j
                c = c0 + j
                d_s, d_i, d_r = msg[0, j], msg[1, j], msg[2, j]
                if t < hi and backward:
                    q, p_inf = _avoidance(rho, t + 1, u)
                    d_s, d_i, d_r = _backward_step(d_s, d_i, d_r, q, p_inf, beta_r)
                    msg[0, j] = d_s
                    msg[1, j] = d_i
                    msg[2, j] = d_r
                g_s, g_i, g_r = _posterior(gamma[0, t, c], gamma[1, t, c], gamma[2, t, c], d_s, d_i, d_r)
                gamma[0, t, c] = g_s
                gamma[1, t, c] = g_i
                gamma[2, t, c] = g_r
            t -= 1


@numba.njit(parallel=True, cache=True)
def forward_backward(rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward, gamma):
    """Posteriors (3, T+1, n) over frozen pressures, in blocks of ``FB_BLOCK`` consecutive vertices
    (:func:`_forward_backward_block`)."""
    n = rho.shape[1]
    for block in prange((n + FB_BLOCK - 1) // FB_BLOCK):
        u0, width = _block_span(block, n)
        msg = np.empty((3, FB_BLOCK))
        _forward_backward_block(rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward, u0,
                                width, msg, gamma, u0)


@numba.njit(parallel=True, cache=True)
def forward_backward_hitting_times(rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward,
                                   use_map, tau, with_recovery, t_inf, t_rec):
    """:func:`forward_backward` then :func:`map_hitting_times` (``use_map``) or
    :func:`threshold_hitting_times`, a block at a time: each block's posteriors go to a buffer of
    ``3 (T+1) FB_BLOCK`` floats (63 KB at T = 40) and are decoded there, so the (3, T+1, n) array
    is never written, read back, or even allocated, which on a 200,000-vertex graph is 197 MB of
    fresh pages for every run. The same values are decoded, so the hitting times are the same."""
    n = rho.shape[1]
    for block in prange((n + FB_BLOCK - 1) // FB_BLOCK):
        u0, width = _block_span(block, n)
        msg = np.empty((3, FB_BLOCK))
        gamma = np.empty((3, rho.shape[0], FB_BLOCK))
        _forward_backward_block(rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward, u0,
                                width, msg, gamma, np.uint64(0))
        for j in range(width):
            if use_map:
                t_inf[u0 + j], t_rec[u0 + j] = _map_vertex(gamma, j, with_recovery)
            else:
                t_inf[u0 + j], t_rec[u0 + j] = _threshold_vertex(gamma, j, tau, with_recovery)


@numba.njit(parallel=True, cache=True)
def threshold_hitting_times(gamma, tau, with_recovery, t_inf, t_rec):
    for u in prange(gamma.shape[2]):
        t_inf[u], t_rec[u] = _threshold_vertex(gamma, u, tau, with_recovery)


@numba.njit(parallel=True, cache=True)
def map_hitting_times(gamma, with_recovery, t_inf, t_rec):
    for u in prange(gamma.shape[2]):
        t_inf[u], t_rec[u] = _map_vertex(gamma, u, with_recovery)


@numba.njit(parallel=True, cache=True)
def project_hitting_times(obs_times, obs_states, t_inf, t_rec):
    """Clip hitting times so the decoded history equals every observed snapshot."""
    for u in prange(t_inf.shape[0]):
        t_inf[u], t_rec[u] = _project_vertex(obs_times, obs_states, u, t_inf[u], t_rec[u])
