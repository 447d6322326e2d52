"""Numba-CUDA kernels of inference and decoding; the CPU twin is :mod:`battus.kernels.infer_cpu`.

Numerics. Device state is float32, time-major, double-buffered where a step
reads what it writes. Mean-field pressures are kept as log-pressures
``L = sum_v log1p(-beta_i * fI_v)``: each term is computed in float32 and
summed in a float64 accumulator; the update then takes ``rho = exp(L)`` and
the infection probability ``1 - rho = -expm1(L)``, which keeps the
small-probability cases a float32 running product loses (relative error up
to 1 for d=50, beta*fI <= 1e-9). ``fastmath`` stays off everywhere (NVVM still
contracts a*b+c into FMA, a rounding-level difference to the CPU).

The pressure kernel is degree-binned (bins built once per problem by
:func:`battus.backends.cuda.layout.build_bins`, outside the timed interval;
:class:`battus.backends.cuda.settings.CUDASettings` holds the thresholds):
in-degree below ``warp_min_degree`` one thread per vertex, up to
``hub_min_degree`` one warp per vertex, larger vertices split into chunks of
``hub_chunk`` arcs per block whose float64 partial sums are added in a fixed
order by :func:`finish_hubs`, so results are deterministic run to run.

Forward-backward, decoding and projection are the rules of
:mod:`battus.kernels.vertex_rules` compiled as device functions, one thread per vertex;
a vertex whose posteriors are not numbers decodes to ``vertex_rules.UNDEFINED``.
Numba's cache does not see a change to those rules (it keys on this file alone):
a change there must come with one here, or a warm cache keeps the old rules.
"""

from __future__ import annotations

import math

import numpy as np

from . import vertex_rules
from .cuda_common import BLOCK, SHUFFLE, WARP, cuda, kernel, tree_sum, warp_sum


@cuda.jit(device=True)
def _avoidance(log_rho, t, u):
    lg = np.float64(log_rho[t, u])
    return math.exp(lg), -math.expm1(lg)


_forward_backward_vertex = cuda.jit(device=True)(vertex_rules.forward_backward_rule(
    _avoidance, cuda.jit(device=True)(vertex_rules.one_hot_py), cuda.jit(device=True)(vertex_rules.forward_step_py),
    cuda.jit(device=True)(vertex_rules.backward_step_py), cuda.jit(device=True)(vertex_rules.posterior_py)))
_threshold_vertex = cuda.jit(device=True)(vertex_rules.threshold_vertex_py)
_map_vertex = cuda.jit(device=True)(vertex_rules.map_vertex_py)
_project_vertex = cuda.jit(device=True)(vertex_rules.project_vertex_py)

# ----------------------------------------------------------------------------
# single-rate mean-field pressures


@kernel()
def fill_state(prior_s, prior_i, f_s, f_i):
    u = cuda.grid(1)
    if u < f_s.shape[0]:
        f_s[u] = prior_s
        f_i[u] = prior_i


@cuda.jit(device=True)
def _log_sum(indices, f_i, beta, lo, hi, step):
    """sum over arcs lo, lo+step, ... < hi of log1p(-beta * f_i[source]), float64 sum.

    Four gathers are issued before their terms are used, the ones past the end
    of the row masked to 0 (log1p(-0) = -0 leaves the sum unchanged): short
    rows (a few arcs per thread or lane, the common case) still keep several
    independent loads in flight, which is what a latency-bound gather needs.
    """
    acc = 0.0
    zero = np.float32(0.0)
    e = lo
    while e < hi:
        e1 = e + step
        e2 = e + 2 * step
        e3 = e + 3 * step
        x0 = f_i[indices[e]]
        x1 = f_i[indices[e1]] if e1 < hi else zero
        x2 = f_i[indices[e2]] if e2 < hi else zero
        x3 = f_i[indices[e3]] if e3 < hi else zero
        acc += math.log1p(-beta * x0)
        acc += math.log1p(-beta * x1)
        acc += math.log1p(-beta * x2)
        acc += math.log1p(-beta * x3)
        e += 4 * step
    return acc


@kernel()
def pressure_binned(indptr, indices, f_i, beta_i, log_rho, thread_verts, warp_verts,
                     hub_start, hub_end, hub_vertex, partial, n_thread_blocks, n_warp_blocks, pinned, pinning):
    """Degree-binned pressure: blocks [0, a) thread bin, [a, b) warp bin, [b, ...) hub chunks.

    Each block takes one branch as a whole, so the barriers inside are uniform.
    ``beta_i`` is float32: every term is a float32 log1p, the sum is float64.
    With ``pinning``, a vertex with ``pinned[u] != 0`` (its last reset put it in
    I or R) gathers nothing and gets L = 0, the neutral pressure
    (:func:`battus.kernels.infer_cpu.mean_field_pressures` says why); a hub's
    chunks then write 0 partials, uniformly per block.
    """
    sm = cuda.shared.array(BLOCK, dtype=np.float64)
    tid = cuda.threadIdx.x
    bdim = cuda.blockDim.x
    block = cuda.blockIdx.x
    if block < n_thread_blocks:
        k = block * bdim + tid
        if k < thread_verts.shape[0]:
            u = thread_verts[k]
            if pinning and pinned[u] != 0:
                log_rho[u] = 0.0
            else:
                log_rho[u] = _log_sum(indices, f_i, beta_i, indptr[u], indptr[u + 1], 1)
        return
    block -= n_thread_blocks
    if block < n_warp_blocks:
        lane = tid % WARP
        k = block * (bdim // WARP) + tid // WARP
        acc = 0.0
        if k < warp_verts.shape[0]:
            u = warp_verts[k]
            if not (pinning and pinned[u] != 0):
                acc = _log_sum(indices, f_i, beta_i, indptr[u] + lane, indptr[u + 1], WARP)
        if SHUFFLE:
            acc = warp_sum(acc)
            if lane == 0 and k < warp_verts.shape[0]:
                log_rho[warp_verts[k]] = acc
            return
        sm[tid] = acc
        cuda.syncthreads()
        tree_sum(sm, tid, lane, WARP // 2, 1)
        if lane == 0 and k < warp_verts.shape[0]:
            log_rho[warp_verts[k]] = sm[tid]
        return
    chunk = block - n_warp_blocks
    if pinning and pinned[hub_vertex[chunk]] != 0:
        if tid == 0:
            partial[chunk] = 0.0
        return
    acc = _log_sum(indices, f_i, beta_i, hub_start[chunk] + tid, hub_end[chunk], bdim)
    if SHUFFLE:  # warps reduce with shuffles, then one barrier and a fixed-order sum
        acc = warp_sum(acc)
        if tid % WARP == 0:
            sm[tid // WARP] = acc
        cuda.syncthreads()
        if tid == 0:
            total = 0.0
            for w in range(bdim // WARP):
                total += sm[w]
            partial[chunk] = total
        return
    sm[tid] = acc
    cuda.syncthreads()
    tree_sum(sm, tid, tid, bdim // 2, 1)
    if tid == 0:
        partial[chunk] = sm[0]


@kernel()
def uniform_pressure(indptr, beta_i, p_inf, log_rho):
    """Frame 0: every marginal equals the prior, so L[0, u] = deg(u) * log1p(-beta p)."""
    u = cuda.grid(1)
    if u < log_rho.shape[0]:
        term = math.log1p(-beta_i * p_inf)  # the float32 term the gather kernels would add
        log_rho[u] = (indptr[u + 1] - indptr[u]) * np.float64(term)


@kernel()
def zero_rows(flat):
    """L = 0, the neutral log-pressure, for the frames after the settled one (flattened rows)."""
    k = cuda.grid(1)
    if k < flat.shape[0]:
        flat[k] = 0.0


@kernel()
def finish_hubs(hub_verts, hub_ptr, partial, log_rho):
    """Sum each hub's chunk partials in chunk order (deterministic)."""
    h = cuda.grid(1)
    if h < hub_verts.shape[0]:
        acc = 0.0
        for c in range(hub_ptr[h], hub_ptr[h + 1]):
            acc += partial[c]
        log_rho[hub_verts[h]] = acc


@kernel()
def mean_field_update(log_rho, beta_r, f_s, f_i, gather_id, obs_row, reset):
    """Frame t -> t+1 of Eq. 3 from L = log rho of frame t.

    With ``reset`` frame t is observed: its pressure was already taken from the
    propagated marginals (the snapshot is scored first), and u's own state
    restarts from the snapshot before the step, as in the CPU backend.
    """
    u = cuda.grid(1)
    if u >= f_s.shape[0]:
        return
    w = gather_id[u]  # f_i is stored in gather order (battus.backends.cuda.layout.gather_order)
    if reset:
        s = obs_row[u]
        fs = 1.0 if s == 0 else 0.0
        fi = 1.0 if s == 1 else 0.0
    else:
        fs = np.float64(f_s[u])
        fi = np.float64(f_i[w])
    lg = np.float64(log_rho[u])
    k = fi + fs * -math.expm1(lg)
    f_s[u] = fs * math.exp(lg)
    f_i[w] = k * (1.0 - beta_r)


# ----------------------------------------------------------------------------
# forward-backward and decoding


@kernel()
def forward_backward(log_rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward, gamma):
    """Posteriors (3, T+1, n) in float32 over the log-pressures, thread per vertex; the messages
    are float64 registers (:func:`vertex_rules.forward_backward_rule`)."""
    u = cuda.grid(1)
    if u < gamma.shape[2]:
        _forward_backward_vertex(log_rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward,
                                 gamma, u)


@kernel()
def threshold_hitting_times(gamma, tau, with_recovery, t_inf, t_rec):
    u = cuda.grid(1)
    if u < gamma.shape[2]:
        t_inf[u], t_rec[u] = _threshold_vertex(gamma, u, tau, with_recovery)


@kernel()
def map_hitting_times(gamma, with_recovery, t_inf, t_rec):
    u = cuda.grid(1)
    if u < gamma.shape[2]:
        t_inf[u], t_rec[u] = _map_vertex(gamma, u, with_recovery)


@kernel()
def project_hitting_times(obs_times, obs_states, t_inf, t_rec):
    u = cuda.grid(1)
    if u < t_inf.shape[0]:
        t_inf[u], t_rec[u] = _project_vertex(obs_times, obs_states, u, t_inf[u], t_rec[u])
