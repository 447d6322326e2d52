"""Numba-CUDA backend: every stage on the device, data resident between stages.

Same primitives and semantics as :class:`battus.backends.CPUBackend`; only the
decoded hitting times (and posteriors, when asked) come back to the host.

Numerics. Device state is float32, time-major, double-buffered where a step
reads what it writes. Mean-field pressures are kept as log-pressures
``L = sum_v log1p(-beta_i * fI_v)``: each term is computed in float32 and
summed in a float64 accumulator; the update then takes ``rho = exp(L)`` and
the infection probability ``1 - rho = -expm1(L)``, which keeps the
small-probability cases a float32 running product loses (relative error up
to 1 for d=50, beta*fI <= 1e-9). ``fastmath`` stays off everywhere (NVVM still
contracts a*b+c into FMA, a rounding-level difference to the CPU; the rate
grid, which must equal numpy's ``linspace`` bit for bit, is built in two
launches so no contraction can happen there).

Pressure kernels are degree-binned (bins built once per problem in
:meth:`CUDABackend.prepare`, outside the timed interval): in-degree below
``warp_min_degree`` one thread per vertex, up to ``hub_min_degree`` one warp per
vertex, larger vertices split into chunks of ``hub_chunk`` arcs per block
whose float64 partial sums are added in a fixed order by the update kernel,
so results are deterministic run to run. Reductions use shared memory and
``syncthreads`` only (no warp shuffles), so the same kernels run under the
CUDA simulator; ``kernel="thread"`` selects the plain thread-per-vertex
kernel, the reference the binned one is tested against on a real GPU.

Fitting uses a vertex x candidate layout ``(group, vertex, lane)`` with 32
candidates per group: a warp owns one (vertex, arc range) work item of one
group and each lane one candidate, so a gathered neighbour row is one 128-byte
line and no cross-lane reduction is needed. Rounds are evaluated in float32;
the best ``POLISH`` candidates of each round are then re-scored in float64
and the arg-max (first occurrence) is taken over those, so near-ties of the
final rounds (relative gaps down to 2e-8 on heb-sir) resolve exactly as in
the float64 CPU backend. Grid generation, arg-max and bound refinement run on
the device; the host reads the trace once at the end.

Device memory (bytes, n vertices, m arcs, T+1 frames, K observed frames):
``8(n+1) + 4m`` CSR, ``4m + 4n`` the same CSR in gather order, ``K n``
observations, ``~12 n + 24 (m / hub_chunk)`` bins, ``28 (n + m / item_arcs)``
fitting work items, ``4 (T+1) n`` log-pressures, ``12 (T+1) n`` posteriors,
``16 n`` hitting times, ``8 n`` state: O(m + T n). Fitting adds
``G * 32 * n * 16`` (float32 state of G groups per pass, G = ceil(chunk / 32))
and ``32 * n * 32`` (the float64 re-score group), plus ``G * 32 * 8`` per
split work item. Measured peaks (H100, docs/benchmarks.md): 3.85 GiB for
Battus-Z and 7.81 GiB for fitted Battus SIR on an Orkut-sized graph
(n = 3.07 M, m = 234 M, T = 40).
"""

from __future__ import annotations

import math
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cuda_compat import ensure_numpy_compat

ensure_numpy_compat()  # before numba.cuda compiles anything

from numba import cuda  # noqa: E402

from ..backends import Prepared  # noqa: E402
from ..problem import Problem, segments  # noqa: E402
from . import cpu as _cpu  # noqa: E402
from . import rng as _rng  # noqa: E402
from .rng import STREAM_RECOVERY, STREAM_TRANSMISSION  # noqa: E402

# Small graphs and the degree bins of hubs launch few blocks by design; numba-cuda
# warns on every such launch, which buries a user's progress messages.
warnings.filterwarnings("ignore", message="Grid size .* will likely result in GPU under-utilization")


def _simulated() -> bool:
    from numba.cuda import config

    return bool(getattr(config, "ENABLE_CUDASIM", False))


# Lanes of a (logical) warp: the kernels never shuffle, so the width is only a
# layout constant. The CUDA simulator runs each thread as a Python thread; a
# width of 8 there keeps CI fast while exercising the same code (several
# candidate groups, warp and hub bins) on tiny graphs.
WARP = 8 if _simulated() else 32
BLOCK = 256  # threads per block on a GPU; shared arrays are sized for it
# The simulator has no warp shuffles: there the reductions go through shared
# memory and block barriers; on a GPU warps reduce with shuffles (checked
# against the thread-per-vertex kernel by tests/test_gpu.py).
SHUFFLE = not _simulated()
POLISH = 8  # candidates of each fitting round re-scored in float64
SCORE_BLOCKS = 264  # fixed block count of the score reduction (2 per H100 SM)
_LOG_FLOOR = 1e-300


# ----------------------------------------------------------------------------
# simulator

# The host's counter-based draw compiled for the device: the same function, so
# the draws (and simulated histories) are bit-identical.
_uniform = cuda.jit(device=True)(_rng.uniform_py)


@cuda.jit
def _sir_step(indptr, indices, states, t, beta_i, beta_r, seed, same_step_recovery):
    """Frame t -> t+1 of the (T+1, n) history; thread per vertex (see battus.simulate)."""
    u = cuda.grid(1)
    if u >= indptr.shape[0] - 1:
        return
    s = states[t, u]
    infected = s == 1
    if s == 0:
        for e in range(indptr[u], indptr[u + 1]):
            if states[t, indices[e]] == 1:
                if _uniform(seed, STREAM_TRANSMISSION, t, e) < beta_i:
                    infected = True
                    break
    if s == 2:
        states[t + 1, u] = 2
    elif infected:
        if (s == 1 or same_step_recovery) and _uniform(seed, STREAM_RECOVERY, t, u) < beta_r:
            states[t + 1, u] = 2
        else:
            states[t + 1, u] = 1
    else:
        states[t + 1, u] = 0


# ----------------------------------------------------------------------------
# single-rate mean-field pressures


@cuda.jit
def _fill_state(prior_s, prior_i, f_s, f_i):
    u = cuda.grid(1)
    if u < f_s.shape[0]:
        f_s[u] = prior_s
        f_i[u] = prior_i


@cuda.jit
def _pressure_thread(indptr, indices, f_i, beta_i, log_rho):
    """Reference kernel: one thread per vertex, whatever its degree."""
    u = cuda.grid(1)
    if u >= log_rho.shape[0]:
        return
    acc = 0.0
    for e in range(indptr[u], indptr[u + 1]):
        acc += math.log1p(-beta_i * f_i[indices[e]])
    log_rho[u] = acc


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


@cuda.jit(device=True)
def _log_sum_lane(indices, f_i, g, lane, beta, lo, hi):
    """As _log_sum for one candidate lane of the (group, vertex, lane) layout.

    Eight 128-byte rows in flight per warp, then a plain remainder loop (a
    masked 8-wide tail as in _log_sum made the Orkut-sized SIR fit 11% slower
    on an H100: 27.1 s against 24.3 s).
    """
    acc = 0.0
    e = lo
    while e + 7 < hi:
        x0 = f_i[g, indices[e], lane]
        x1 = f_i[g, indices[e + 1], lane]
        x2 = f_i[g, indices[e + 2], lane]
        x3 = f_i[g, indices[e + 3], lane]
        x4 = f_i[g, indices[e + 4], lane]
        x5 = f_i[g, indices[e + 5], lane]
        x6 = f_i[g, indices[e + 6], lane]
        x7 = f_i[g, indices[e + 7], lane]
        acc += math.log1p(-beta * x0)
        acc += math.log1p(-beta * x1)
        acc += math.log1p(-beta * x2)
        acc += math.log1p(-beta * x3)
        acc += math.log1p(-beta * x4)
        acc += math.log1p(-beta * x5)
        acc += math.log1p(-beta * x6)
        acc += math.log1p(-beta * x7)
        e += 8
    while e < hi:
        acc += math.log1p(-beta * f_i[g, indices[e], lane])
        e += 1
    return acc


@cuda.jit(device=True)
def _warp_sum(acc):
    """Sum over the warp by shuffles; lane 0 holds the total (same order on every call)."""
    offset = WARP // 2
    while offset > 0:
        acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, offset)
        offset //= 2
    return acc


@cuda.jit(device=True)
def _tree_sum(sm, tid, pos, width, stride):
    """Pairwise sum in shared memory over the entries tid + k * stride of a group (``pos``: this thread's
    place in it, ``width``: half its size); the group's first thread ends up holding the total."""
    while width > 0:
        if pos < width:
            sm[tid] += sm[tid + width * stride]
        cuda.syncthreads()
        width //= 2


@cuda.jit
def _pressure_binned(indptr, indices, f_i, beta_i, log_rho, thread_verts, warp_verts,
                     hub_start, hub_end, partial, n_thread_blocks, n_warp_blocks):
    """Degree-binned pressure: blocks [0, a) thread bin, [a, b) warp bin, [b, ...) hub chunks.

    Each block takes one branch as a whole, so the barriers inside are uniform.
    ``beta_i`` is float32: every term is a float32 log1p, the sum is float64.
    """
    sm = cuda.shared.array(BLOCK, dtype=np.float64)
    tid = cuda.threadIdx.x
    bdim = cuda.blockDim.x
    block = cuda.blockIdx.x
    if block < n_thread_blocks:
        k = block * bdim + tid
        if k < thread_verts.shape[0]:
            u = thread_verts[k]
            log_rho[u] = _log_sum(indices, f_i, beta_i, indptr[u], indptr[u + 1], 1)
        return
    block -= n_thread_blocks
    if block < n_warp_blocks:
        lane = tid % WARP
        k = block * (bdim // WARP) + tid // WARP
        acc = 0.0
        if k < warp_verts.shape[0]:
            u = warp_verts[k]
            acc = _log_sum(indices, f_i, beta_i, indptr[u] + lane, indptr[u + 1], WARP)
        if SHUFFLE:
            acc = _warp_sum(acc)
            if lane == 0 and k < warp_verts.shape[0]:
                log_rho[warp_verts[k]] = acc
            return
        sm[tid] = acc
        cuda.syncthreads()
        _tree_sum(sm, tid, lane, WARP // 2, 1)
        if lane == 0 and k < warp_verts.shape[0]:
            log_rho[warp_verts[k]] = sm[tid]
        return
    chunk = block - n_warp_blocks
    acc = _log_sum(indices, f_i, beta_i, hub_start[chunk] + tid, hub_end[chunk], bdim)
    if SHUFFLE:  # warps reduce with shuffles, then one barrier and a fixed-order sum
        acc = _warp_sum(acc)
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
    _tree_sum(sm, tid, tid, bdim // 2, 1)
    if tid == 0:
        partial[chunk] = sm[0]


@cuda.jit
def _uniform_pressure(indptr, beta_i, p_inf, log_rho):
    """Frame 0: every marginal equals the prior, so L[0, u] = deg(u) * log1p(-beta p)."""
    u = cuda.grid(1)
    if u < log_rho.shape[0]:
        term = math.log1p(-beta_i * p_inf)  # the float32 term the gather kernels would add
        log_rho[u] = (indptr[u + 1] - indptr[u]) * np.float64(term)


@cuda.jit
def _finish_hubs(hub_verts, hub_ptr, partial, log_rho):
    """Sum each hub's chunk partials in chunk order (deterministic)."""
    h = cuda.grid(1)
    if h < hub_verts.shape[0]:
        acc = 0.0
        for c in range(hub_ptr[h], hub_ptr[h + 1]):
            acc += partial[c]
        log_rho[hub_verts[h]] = acc


@cuda.jit
def _mean_field_update(log_rho, beta_r, f_s, f_i, gather_id, obs_row, reset):
    """Frame t -> t+1 of Eq. 3 from L = log rho of frame t.

    With ``reset`` frame t is observed: its pressure was already taken from the
    propagated marginals (the snapshot is scored first), and u's own state
    restarts from the snapshot before the step, as in the CPU backend.
    """
    u = cuda.grid(1)
    if u >= f_s.shape[0]:
        return
    w = gather_id[u]  # f_i is stored in gather order (see CUDABackend.prepare)
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


@cuda.jit
def _forward_backward(log_rho, beta_r, prior, seg_left, seg_right, obs_index, obs_states,
                      backward, gamma):
    """Segment-wise dual-anchor smoothing, thread per vertex (see cpu.forward_backward).

    The forward messages are written into ``gamma`` (float32) and replaced in
    place by the posteriors during the backward sweep; the backward message
    lives in float64 registers. Later segments overwrite the shared boundary.
    """
    u = cuda.grid(1)
    n = gamma.shape[2]
    if u >= n:
        return
    for s in range(seg_left.shape[0]):
        lo = seg_left[s]
        hi = seg_right[s]
        a_s, a_i, a_r = _segment_start(obs_index, obs_states, prior, lo, u)
        gamma[0, lo, u] = a_s
        gamma[1, lo, u] = a_i
        gamma[2, lo, u] = a_r
        for t in range(lo, hi):
            lg = np.float64(log_rho[t + 1, u])
            q = math.exp(lg)
            nxt_s = a_s * q
            infected = a_s * -math.expm1(lg) + a_i
            nxt_i = infected * (1.0 - beta_r)
            nxt_r = infected * beta_r + a_r
            z = nxt_s + nxt_i + nxt_r
            a_s = nxt_s / z
            a_i = nxt_i / z
            a_r = nxt_r / z
            gamma[0, t + 1, u] = a_s
            gamma[1, t + 1, u] = a_i
            gamma[2, t + 1, u] = a_r
        if backward and obs_index[hi] >= 0:
            st = obs_states[obs_index[hi], u]
            d_s = 1.0 if st == 0 else 0.0
            d_i = 1.0 if st == 1 else 0.0
            d_r = 1.0 if st == 2 else 0.0
        else:
            d_s = 1.0
            d_i = 1.0
            d_r = 1.0
        t = hi
        while t >= lo:
            if t < hi and backward:
                lg = np.float64(log_rho[t + 1, u])
                q = math.exp(lg)
                d_from_i = (1.0 - beta_r) * d_i + beta_r * d_r
                b_s = q * d_s + -math.expm1(lg) * d_from_i
                z = b_s + d_from_i + d_r
                d_s = b_s / z
                d_i = d_from_i / z
                d_r = d_r / z
            g_s = np.float64(gamma[0, t, u]) * d_s
            g_i = np.float64(gamma[1, t, u]) * d_i
            g_r = np.float64(gamma[2, t, u]) * d_r
            z = g_s + g_i + g_r
            gamma[0, t, u] = g_s / z
            gamma[1, t, u] = g_i / z
            gamma[2, t, u] = g_r / z
            t -= 1


@cuda.jit
def _threshold_hitting_times(gamma, tau, with_recovery, t_inf, t_rec):
    u = cuda.grid(1)
    n_frames = gamma.shape[1]
    if u >= gamma.shape[2]:
        return
    ti = n_frames
    tr = n_frames
    for t in range(n_frames):
        if 1.0 - np.float64(gamma[0, t, u]) >= tau:
            ti = t
            break
    if with_recovery:
        for t in range(n_frames):
            if np.float64(gamma[2, t, u]) >= tau:
                tr = t
                break
    t_inf[u] = ti
    t_rec[u] = tr


@cuda.jit
def _map_hitting_times(gamma, with_recovery, t_inf, t_rec):
    u = cuda.grid(1)
    n_frames = gamma.shape[1]
    if u >= gamma.shape[2]:
        return
    ti = n_frames
    tr = n_frames
    level = 0
    for t in range(n_frames):
        g_s = gamma[0, t, u]
        g_i = gamma[1, t, u]
        best = 0
        top = g_s
        if g_i > top:
            best = 1
            top = g_i
        if with_recovery and gamma[2, t, u] > top:
            best = 2
        if best > level:
            level = best
        if level >= 1 and ti == n_frames:
            ti = t
        if level == 2 and tr == n_frames:
            tr = t
    t_inf[u] = ti
    t_rec[u] = tr


_project_vertex = cuda.jit(device=True)(_cpu.project_vertex_py)
_segment_start = cuda.jit(device=True)(_cpu.segment_start_py)


@cuda.jit
def _project_hitting_times(obs_times, obs_states, t_inf, t_rec):
    u = cuda.grid(1)
    if u >= t_inf.shape[0]:
        return
    ti, tr = _project_vertex(obs_times, obs_states, u, t_inf[u], t_rec[u])
    t_inf[u] = ti
    t_rec[u] = tr


@cuda.jit
def _states_from_hitting_times(t_inf, t_rec, out):
    u = cuda.grid(1)
    if u >= out.shape[1]:
        return
    for t in range(out.shape[0]):
        out[t, u] = 2 if t >= t_rec[u] else (1 if t >= t_inf[u] else 0)


# ----------------------------------------------------------------------------
# batched fitting: state (group, vertex, lane), candidate = group * 32 + lane


@cuda.jit
def _batch_fill(prior, f_s, f_i, f_r):
    u, g = cuda.grid(2)
    if u >= f_s.shape[1] * WARP or g >= f_s.shape[0]:
        return
    v = u // WARP
    lane = u % WARP
    f_s[g, v, lane] = prior[0]
    f_i[g, v, lane] = prior[1]
    f_r[g, v, lane] = prior[2]


@cuda.jit(device=True)
def _advance_candidate(f_s, f_i_cur, f_i_next, f_r, g, u, lane, log_rho, br):
    """Eq. 3 for vertex u and one candidate lane, from its float64 log-pressure."""
    fs = np.float64(f_s[g, u, lane])
    k = np.float64(f_i_cur[g, u, lane]) + fs * -math.expm1(log_rho)
    f_s[g, u, lane] = fs * math.exp(log_rho)
    f_i_next[g, u, lane] = k * (1.0 - br)
    f_r[g, u, lane] = np.float64(f_r[g, u, lane]) + k * br


@cuda.jit
def _batch_pressure(indices, item_vertex, item_start, item_end, item_slot, f_i_cur, f_i_next,
                    f_s, f_r, beta_gather, beta_r, c0, n_cand, partial):
    """Warp = work item (vertex, arc range) of one group; lane = candidate.

    Whole-vertex items update that vertex's marginals at once (fI double
    buffered: neighbours still read the current frame); split items leave a
    float64 partial for :func:`_batch_finish_split`.
    """
    g = cuda.blockIdx.y
    tid = cuda.threadIdx.x
    lane = tid % WARP
    item = cuda.blockIdx.x * (cuda.blockDim.x // WARP) + tid // WARP
    if item >= item_vertex.shape[0]:
        return
    c = g * WARP + lane
    if c >= n_cand:
        return
    beta = beta_gather[c0 + c]
    acc = _log_sum_lane(indices, f_i_cur, g, lane, beta, item_start[item], item_end[item])
    slot = item_slot[item]
    if slot >= 0:
        partial[slot, g, lane] = acc
        return
    _advance_candidate(f_s, f_i_cur, f_i_next, f_r, g, item_vertex[item], lane, acc, beta_r[c0 + c])


@cuda.jit
def _batch_finish_split(split_vertex, split_ptr, partial, f_i_cur, f_i_next, f_s, f_r, beta_r,
                        c0, n_cand):
    x, g = cuda.grid(2)
    h = x // WARP
    lane = x % WARP
    c = g * WARP + lane
    if h >= split_vertex.shape[0] or g >= f_s.shape[0] or c >= n_cand:
        return
    acc = 0.0
    for slot in range(split_ptr[h], split_ptr[h + 1]):
        acc += partial[slot, g, lane]
    _advance_candidate(f_s, f_i_cur, f_i_next, f_r, g, split_vertex[h], lane, acc, beta_r[c0 + c])


@cuda.jit
def _batch_score_reset(obs_row, gather_id, f_s, f_i, f_r, n_cand, block_ll):
    """log f^{y}_u summed over vertices per candidate, then reset to the observation.

    Block = 32 lanes x (blockDim / 32) rows with a fixed number of blocks and a
    fixed shared-memory tree, so the float64 sums are identical run to run.
    """
    sm = cuda.shared.array(BLOCK, dtype=np.float64)
    g = cuda.blockIdx.y
    tid = cuda.threadIdx.x
    lane = tid % WARP
    rows = cuda.blockDim.x // WARP
    row = tid // WARP
    c = g * WARP + lane
    n = f_s.shape[1]
    acc = 0.0
    if c < n_cand:
        u = cuda.blockIdx.x * rows + row
        stride = cuda.gridDim.x * rows
        while u < n:
            s = obs_row[u]
            w = gather_id[u]
            if s == 0:
                p = np.float64(f_s[g, w, lane])
            elif s == 1:
                p = np.float64(f_i[g, w, lane])
            else:
                p = np.float64(f_r[g, w, lane])
            acc += math.log(max(p, _LOG_FLOOR))
            f_s[g, w, lane] = 1.0 if s == 0 else 0.0
            f_i[g, w, lane] = 1.0 if s == 1 else 0.0
            f_r[g, w, lane] = 1.0 if s == 2 else 0.0
            u += stride
    sm[tid] = acc
    cuda.syncthreads()
    _tree_sum(sm, tid, row, rows // 2, WARP)
    if row == 0:
        block_ll[cuda.blockIdx.x, g, lane] = sm[tid]


@cuda.jit
def _batch_accumulate(block_ll, ll, c0, n_cand):
    c = cuda.grid(1)
    if c >= n_cand:
        return
    g = c // WARP
    lane = c % WARP
    acc = 0.0
    for b in range(block_ll.shape[0]):
        acc += block_ll[b, g, lane]
    ll[c0 + c] += acc


# ---- device-side rate search (one thread: a handful of scalars per round)


@cuda.jit
def _linspace_scaled(bounds, points, scaled):
    """scaled[a, k] = k * (hi - lo) / (points - 1): numpy.linspace's product."""
    a = cuda.grid(1)
    if a < bounds.shape[0]:
        step = (bounds[a, 1] - bounds[a, 0]) / (points - 1)
        for k in range(points):
            scaled[a, k] = k * step


@cuda.jit
def _linspace_shift(bounds, points, scaled, axes):
    """axes[a, k] = scaled + lo, last point = hi: a separate launch so no FMA forms."""
    a = cuda.grid(1)
    if a < bounds.shape[0]:
        for k in range(points):
            axes[a, k] = scaled[a, k] + bounds[a, 0]
        axes[a, points - 1] = bounds[a, 1]


@cuda.jit
def _cartesian(axes, points, sir, beta_i, beta_r, beta_gather):
    """Candidates beta_i-major (SI: beta_r = 0), as battus.fit.candidate_grid."""
    c = cuda.grid(1)
    n_cand = points * points if sir else points
    if c >= n_cand:
        return
    if sir:
        bi = axes[0, c // points]
        br = axes[1, c % points]
    else:
        bi = axes[0, c]
        br = 0.0
    beta_i[c] = bi
    beta_r[c] = br
    beta_gather[c] = bi


@cuda.jit
def _select_polish(ll, n_cand, norm, beta_i, beta_r, top_idx, pol_i, pol_r, pol_gather, pol_ll):
    """Indices of the POLISH best float32 objectives (ties to the lower index)."""
    if cuda.grid(1) != 0:
        return
    k = min(POLISH, n_cand)
    for j in range(k):
        top_idx[j] = -1
    for c in range(n_cand):
        v = ll[c] / norm
        j = k
        while j > 0 and (top_idx[j - 1] < 0 or ll[top_idx[j - 1]] / norm < v):
            j -= 1
        if j < k:
            i = k - 1
            while i > j:
                top_idx[i] = top_idx[i - 1]
                i -= 1
            top_idx[j] = c
    for j in range(POLISH):
        if j < k:
            pol_i[j] = beta_i[top_idx[j]]
            pol_r[j] = beta_r[top_idx[j]]
        else:
            pol_i[j] = 0.0
            pol_r[j] = 0.0
        pol_gather[j] = pol_i[j]
        pol_ll[j] = 0.0


@cuda.jit
def _finish_round(pol_ll, top_idx, n_top, norm, beta_i, beta_r, axes, points, sir, lower, upper,
                  round_no, bounds, trace):
    """Arg-max of the float64 re-scores (first occurrence), trace, next bounds."""
    if cuda.grid(1) != 0:
        return
    best = 0
    for j in range(1, n_top):
        vj = pol_ll[j] / norm
        vb = pol_ll[best] / norm
        if vj > vb or (vj == vb and top_idx[j] < top_idx[best]):
            best = j
    k = top_idx[best]
    bi = beta_i[k]
    br = beta_r[k]
    trace[round_no, 0] = bi
    trace[round_no, 1] = br
    trace[round_no, 2] = pol_ll[best] / norm
    trace[round_no, 3] = k
    step_i = axes[0, 1] - axes[0, 0] if points > 1 else 0.0
    bounds[0, 0] = max(lower, bi - step_i)
    bounds[0, 1] = min(upper, bi + step_i)
    if sir:
        step_r = axes[1, 1] - axes[1, 0] if points > 1 else 0.0
        bounds[1, 0] = max(lower, br - step_r)
        bounds[1, 1] = min(upper, br + step_r)


# ----------------------------------------------------------------------------
# host side


@dataclass
class CUDAPrepared(Prepared):
    """A problem as held on the device, plus the degree bins of its graph."""

    bins: dict
    items: dict
    gather_id: Any = None
    gather_indices: Any = None


class DevicePressures:
    """Log-pressures ``L[t, u] = log rho[t, u]`` (float32, device); ``to_host`` gives rho."""

    def __init__(self, log_rho) -> None:
        self.log_rho = log_rho

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.log_rho.shape)


def _blocks(count: int, threads: int) -> int:
    return max(1, (count + threads - 1) // threads)


class CUDABackend:
    """Numba-CUDA backend: float32 device state, float64 accumulators.

    ``kernel`` is ``"binned"`` (default) or ``"thread"`` (thread per vertex,
    the reference); ``fit_precision`` is ``"mixed"`` (float32 rounds plus a
    float64 re-score of the best candidates) or ``"float64"``.
    """

    name = "cuda"

    def __init__(self, kernel: str = "binned", fit_precision: str = "mixed",
                 warp_min_degree: int = 32, hub_min_degree: int = 1024, hub_chunk: int = 2048,
                 item_arcs: int = 1024, threads: int | None = None, reorder: bool = True) -> None:
        if kernel not in ("binned", "thread"):
            raise ValueError(f"kernel must be 'binned' or 'thread', got {kernel!r}")
        if fit_precision not in ("mixed", "float64"):
            raise ValueError(f"fit_precision must be 'mixed' or 'float64', got {fit_precision!r}")
        self.kernel = kernel
        self.fit_precision = fit_precision
        self.reorder = bool(reorder)
        self.warp_min_degree = int(warp_min_degree)
        self.hub_min_degree = int(hub_min_degree)
        self.hub_chunk = int(hub_chunk)
        self.item_arcs = int(item_arcs)
        self.simulated = _simulated()
        # The simulator runs every thread as a Python thread: small blocks keep tests fast.
        self.threads = int(threads) if threads else (WARP if self.simulated else BLOCK)
        if self.threads % WARP or self.threads > BLOCK or self.threads & (self.threads - 1):
            raise ValueError(f"threads must be a power of two multiple of {WARP} up to {BLOCK}")
        if self.simulated:
            self.device = "CUDA simulator"
        else:
            dev = cuda.get_current_device()
            name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
            self.device = f"{name} (cc {dev.compute_capability[0]}.{dev.compute_capability[1]})"
        self.live_bytes = 0
        self.peak_bytes = 0
        self._warm = False

    # -- memory accounting: every device array of the algorithm comes from here

    def _alloc(self, shape, dtype):
        arr = cuda.device_array(shape, dtype=dtype)
        self._track(arr)
        return arr

    def _upload(self, host):
        arr = cuda.to_device(np.ascontiguousarray(host))
        self._track(arr)
        return arr

    def _track(self, arr) -> None:
        nbytes = int(np.prod(arr.shape)) * np.dtype(arr.dtype).itemsize
        self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(arr, self._release, nbytes)

    def _release(self, nbytes: int) -> None:
        self.live_bytes -= nbytes

    def reset_peak(self) -> None:
        self.peak_bytes = self.live_bytes

    # -- interface

    def synchronize(self) -> None:
        cuda.synchronize()

    def start_interval(self):
        """Record a CUDA event opening the algorithm interval (device timeline)."""
        if self.simulated:  # the CUDA simulator has no timing events
            return time.perf_counter()
        start = cuda.event(timing=True)
        start.record()
        return start

    def stop_interval(self, start) -> float:
        """Seconds between ``start`` and a closing event, after the device finished."""
        if self.simulated:
            return time.perf_counter() - start
        stop = cuda.event(timing=True)
        stop.record()
        stop.synchronize()
        return cuda.event_elapsed_time(start, stop) / 1e3

    def warm_up(self) -> None:
        """Compile every kernel on a tiny problem, outside the timed interval."""
        if self._warm or self.simulated:  # the simulator compiles nothing
            return
        from ..fit import FitSettings
        from ..graph import from_arcs
        from ..problem import Observations

        graph = from_arcs(np.array([0, 1, 2]), np.array([1, 2, 0]), directed=True, n=3)
        obs = Observations(times=np.array([1, 2]),
                           states=np.array([[1, 1, 0], [2, 1, 1]], dtype=np.uint8))
        tiny = Problem(graph=graph, model="sir", T=2, n0=1, observations=obs)
        prep = self.prepare(tiny)
        self.fit_rates(prep, tiny, FitSettings(grid_points=2, refine_points=2, refine_rounds=1))
        for reset in (False, True):
            rho = self.pressures(prep, tiny.prior, 0.1, 0.1, reset)
        gamma = self.posteriors(prep, rho, tiny.prior, 0.1, True)
        for decoder in ("threshold", "map"):
            self.hitting_times(prep, gamma, decoder, 0.65, True, True)
        self.synchronize()
        self._warm = True

    def prepare(self, problem: Problem) -> CUDAPrepared:
        """Upload graph and observations and build the degree bins (outside the timed interval)."""
        obs = problem.observations
        left, right = segments(obs.times, problem.T)
        obs_index = obs.index(problem.T)
        indptr = np.ascontiguousarray(problem.graph.indptr, dtype=np.int64)
        indices = np.ascontiguousarray(problem.graph.indices, dtype=np.int32)
        prep = CUDAPrepared(
            n=problem.n,
            T=problem.T,
            indptr=self._upload(indptr),
            indices=self._upload(indices),
            obs_times=self._upload(np.asarray(obs.times, dtype=np.int64)),
            obs_states=self._upload(np.asarray(obs.states, dtype=np.uint8)),
            obs_index=self._upload(obs_index),
            seg_left=self._upload(left),
            seg_right=self._upload(right),
            host_obs_times=np.asarray(obs.times, dtype=np.int64),
            host_obs_index=obs_index,
            bins={},
            items={},
        )
        gather_id = self._gather_order(indices, problem.n)
        prep.gather_id = self._upload(gather_id)
        prep.gather_indices = self._upload(gather_id[indices])
        prep.bins = self._build_bins(indptr)
        prep.items = self._build_items(indptr, gather_id)
        return prep

    def _gather_order(self, indices: np.ndarray, n: int) -> np.ndarray:
        """Position of each vertex in the arrays the pressure kernels gather from.

        Vertices are ranked by how often they are gathered (out-degree), so the
        marginals of hubs share cache lines and stay in L1/L2: with power-law
        degrees the top 10% of sources take about 40% of all gathers. Only the
        gathered marginals and the fitting state use this order; rows, pressures,
        posteriors and outputs keep the caller's vertex ids.
        """
        if not self.reorder:
            return np.arange(n, dtype=np.int32)
        times_gathered = np.bincount(indices, minlength=n)
        rank = np.argsort(-times_gathered, kind="stable")
        gather_id = np.empty(n, dtype=np.int32)
        gather_id[rank] = np.arange(n, dtype=np.int32)
        return gather_id

    def _build_bins(self, indptr: np.ndarray) -> dict:
        deg = np.diff(indptr)
        # The thread bin stays in vertex order: neighbouring threads then read
        # neighbouring CSR rows, which share sectors (sorting it by degree made
        # the LiveJournal-sized pull step 1.6x slower on an H100). Warp-bin
        # vertices read their own rows coalesced, so there degree order only
        # groups warps of similar work into a block.
        thread_verts = np.nonzero(deg < self.warp_min_degree)[0].astype(np.int32)
        warp_verts = np.nonzero((deg >= self.warp_min_degree) & (deg < self.hub_min_degree))[0]
        warp_verts = warp_verts[np.argsort(-deg[warp_verts], kind="stable")]
        hub_verts = np.nonzero(deg >= self.hub_min_degree)[0]
        per_hub = (deg[hub_verts] + self.hub_chunk - 1) // self.hub_chunk
        hub_ptr = np.zeros(hub_verts.shape[0] + 1, dtype=np.int64)
        np.cumsum(per_hub, out=hub_ptr[1:])
        owner = np.repeat(np.arange(hub_verts.shape[0]), per_hub)
        offset = np.arange(int(hub_ptr[-1]), dtype=np.int64) - hub_ptr[owner]
        hub_start = indptr[hub_verts][owner] + offset * self.hub_chunk
        hub_end = np.minimum(hub_start + self.hub_chunk, indptr[hub_verts + 1][owner])
        warps_per_block = self.threads // WARP
        return {
            "thread_verts": self._upload(thread_verts),
            "warp_verts": self._upload(warp_verts.astype(np.int32)),
            "hub_verts": self._upload(hub_verts.astype(np.int32)),
            "hub_ptr": self._upload(hub_ptr),
            "hub_start": self._upload(hub_start.astype(np.int64)),
            "hub_end": self._upload(hub_end.astype(np.int64)),
            "partial": self._alloc(max(1, int(hub_ptr[-1])), np.float64),
            "n_thread_blocks": (thread_verts.shape[0] + self.threads - 1) // self.threads,
            "n_warp_blocks": (warp_verts.shape[0] + warps_per_block - 1) // warps_per_block,
            "n_hub_chunks": int(hub_ptr[-1]),
            "n_hubs": int(hub_verts.shape[0]),
            "max_degree": int(deg.max()) if deg.size else 0,
        }

    def _build_items(self, indptr: np.ndarray, gather_id: np.ndarray) -> dict:
        n = indptr.shape[0] - 1
        deg = np.diff(indptr)
        per_vertex = np.maximum(1, (deg + self.item_arcs - 1) // self.item_arcs)
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(per_vertex, out=ptr[1:])
        total = int(ptr[-1])
        vertex = np.repeat(np.arange(n, dtype=np.int64), per_vertex)
        offset = np.arange(total, dtype=np.int64) - ptr[vertex]
        start = indptr[vertex] + offset * self.item_arcs
        end = np.minimum(start + self.item_arcs, indptr[vertex + 1])
        split = per_vertex[vertex] > 1
        slot = np.full(total, -1, dtype=np.int64)
        slot[split] = np.arange(int(split.sum()), dtype=np.int64)
        split_vertex = np.nonzero(per_vertex > 1)[0]
        split_ptr = np.zeros(split_vertex.shape[0] + 1, dtype=np.int64)
        np.cumsum(per_vertex[split_vertex], out=split_ptr[1:])
        # largest items first: blocks of similar work, short tail (slots stay with their items)
        order = np.argsort(-(end - start), kind="stable")
        vertex, start, end, slot = vertex[order], start[order], end[order], slot[order]
        return {
            "vertex": self._upload(gather_id[vertex]),  # state rows are in gather order
            "start": self._upload(start),
            "end": self._upload(end),
            "slot": self._upload(slot),
            "split_vertex": self._upload(gather_id[split_vertex]),
            "split_ptr": self._upload(split_ptr),
            "n_items": total,
            "n_split": int(split_vertex.shape[0]),
            "n_slots": int(split.sum()),
        }

    # -- mean-field pressures

    def _pressure_step(self, prep: CUDAPrepared, f_i, beta32, log_rho_t) -> None:
        n = prep.n
        tpb = self.threads
        if self.kernel == "thread":
            _pressure_thread[_blocks(n, tpb), tpb](prep.indptr, prep.gather_indices, f_i, beta32,
                                                   log_rho_t)
            return
        b = prep.bins
        grid = b["n_thread_blocks"] + b["n_warp_blocks"] + b["n_hub_chunks"]
        if grid:
            _pressure_binned[grid, tpb](
                prep.indptr, prep.gather_indices, f_i, beta32, log_rho_t, b["thread_verts"],
                b["warp_verts"], b["hub_start"], b["hub_end"], b["partial"],
                b["n_thread_blocks"], b["n_warp_blocks"],
            )
        if b["n_hubs"]:
            _finish_hubs[_blocks(b["n_hubs"], tpb), tpb](b["hub_verts"], b["hub_ptr"], b["partial"],
                                                         log_rho_t)

    def pressures(self, prep: CUDAPrepared, prior, beta_i: float, beta_r: float,
                  reset: bool) -> DevicePressures:
        """Mean-field recursion (Eq. 3) keeping every frame's log-pressure on the device.

        The update stays a separate launch: fusing it into the pull kernels
        (commit 0bb21a6) made the Orkut-sized Battus-Z run 118.8 ms instead of
        100.7 ms on an H100 (the inlined float64 update raised the pull
        kernel's register use even on steps without it).
        """
        n, T = prep.n, prep.T
        tpb = self.threads
        grid = _blocks(n, tpb)
        prior = np.asarray(prior, dtype=np.float64)
        log_rho = self._alloc((T + 1, n), np.float32)
        f_s = self._alloc(n, np.float32)
        f_i = self._alloc(n, np.float32)
        obs_index = prep.host_obs_index
        _fill_state[grid, tpb](np.float32(prior[0]), np.float32(prior[1]), f_s, f_i)
        beta32 = np.float32(beta_i)
        for t in range(T + 1):
            if t == 0:  # the pressure of frame 0 always comes from the uniform prior
                _uniform_pressure[grid, tpb](prep.indptr, beta32, np.float32(prior[1]), log_rho[0])
            else:
                self._pressure_step(prep, f_i, beta32, log_rho[t])
            if t < T:
                do_reset = bool(reset and obs_index[t] >= 0)
                row = prep.obs_states[obs_index[t]] if do_reset else prep.obs_states[0]
                _mean_field_update[grid, tpb](log_rho[t], float(beta_r), f_s, f_i, prep.gather_id, row,
                                              do_reset)
        return DevicePressures(log_rho)

    def posteriors(self, prep: CUDAPrepared, rho: DevicePressures, prior, beta_r: float,
                   backward: bool):
        gamma = self._alloc((3, prep.T + 1, prep.n), np.float32)
        prior_d = cuda.to_device(np.asarray(prior, dtype=np.float64))
        _forward_backward[_blocks(prep.n, self.threads), self.threads](
            rho.log_rho, float(beta_r), prior_d, prep.seg_left, prep.seg_right, prep.obs_index,
            prep.obs_states, bool(backward), gamma,
        )
        return gamma

    def hitting_times(self, prep: CUDAPrepared, gamma, decoder: str, tau: float,
                      with_recovery: bool, projection: bool):
        t_inf = self._alloc(prep.n, np.int64)
        t_rec = self._alloc(prep.n, np.int64)
        grid, tpb = _blocks(prep.n, self.threads), self.threads
        if decoder == "threshold":
            _threshold_hitting_times[grid, tpb](gamma, float(tau), bool(with_recovery), t_inf, t_rec)
        else:
            _map_hitting_times[grid, tpb](gamma, bool(with_recovery), t_inf, t_rec)
        if projection:
            _project_hitting_times[grid, tpb](prep.obs_times, prep.obs_states, t_inf, t_rec)
        return t_inf, t_rec

    def decoded_states(self, prep: CUDAPrepared, t_inf, t_rec):
        """(T+1, n) uint8 history built on the device from hitting times."""
        out = self._alloc((prep.T + 1, prep.n), np.uint8)
        _states_from_hitting_times[_blocks(prep.n, self.threads), self.threads](t_inf, t_rec, out)
        return out

    def to_host(self, array) -> np.ndarray:
        if isinstance(array, DevicePressures):
            return np.exp(array.log_rho.copy_to_host().astype(np.float64))
        if hasattr(array, "copy_to_host"):
            return array.copy_to_host()
        return np.asarray(array)

    # -- batched likelihood (fitting)

    def _loglik_pass(self, prep: CUDAPrepared, prior_d, beta_gather, beta_r, c0: int, count: int,
                     dtype, ll, state: dict) -> None:
        """Add Eq. 4's unnormalised sum for candidates c0..c0+count-1 into ``ll``."""
        n = prep.n
        groups = (count + WARP - 1) // WARP
        f_s, f_a, f_b, f_r = (state[k][:groups] for k in ("f_s", "f_a", "f_b", "f_r"))
        it = prep.items
        partial = state["partial"]
        tpb = self.threads
        _batch_fill[(_blocks(n * WARP, tpb), groups), (tpb, 1)](prior_d, f_s, f_a, f_r)
        obs_index = prep.host_obs_index
        observed = np.nonzero(obs_index >= 0)[0]
        last = int(observed[-1]) if observed.size else -1
        item_grid = (_blocks(it["n_items"], tpb // WARP), groups)
        split_grid = (_blocks(it["n_split"] * WARP, tpb), groups)
        block_ll = state["block_ll"]
        for t in range(last + 1):
            if obs_index[t] >= 0:
                _batch_score_reset[(block_ll.shape[0], groups), tpb](
                    prep.obs_states[obs_index[t]], prep.gather_id, f_s, f_a, f_r, count,
                    block_ll[:, :groups])
                _batch_accumulate[_blocks(count, tpb), tpb](block_ll[:, :groups], ll, c0, count)
            if t == last:
                break
            _batch_pressure[item_grid, tpb](
                prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], f_a, f_b, f_s,
                f_r,
                beta_gather, beta_r, c0, count, partial[:, :groups],
            )
            if it["n_split"]:
                _batch_finish_split[split_grid, (tpb, 1)](
                    it["split_vertex"], it["split_ptr"], partial[:, :groups], f_a, f_b, f_s, f_r,
                    beta_r, c0, count,
                )
            f_a, f_b = f_b, f_a

    def _fit_state(self, prep: CUDAPrepared, groups: int, dtype) -> dict:
        n = prep.n
        return {
            "f_s": self._alloc((groups, n, WARP), dtype),
            "f_a": self._alloc((groups, n, WARP), dtype),
            "f_b": self._alloc((groups, n, WARP), dtype),
            "f_r": self._alloc((groups, n, WARP), dtype),
            "partial": self._alloc((max(1, prep.items["n_slots"]), groups, WARP), np.float64),
            "block_ll": self._alloc((SCORE_BLOCKS if not self.simulated else 2, groups, WARP),
                                    np.float64),
        }

    def _loglik_device(self, prep, prior, beta_i_d, beta_r_d, gather_d, n_cand: int, chunk: int,
                       dtype, ll_d, state) -> None:
        prior_d = cuda.to_device(np.asarray(prior, dtype=np.float64))
        for c0 in range(0, n_cand, chunk):
            count = min(chunk, n_cand - c0)
            self._loglik_pass(prep, prior_d, gather_d, beta_r_d, c0, count, dtype, ll_d, state)

    def loglik_batch(self, prep: CUDAPrepared, prior, beta_i: np.ndarray,
                     beta_r: np.ndarray) -> np.ndarray:
        """Unnormalised Eq. 4 for a batch of candidates (float32 state, float64 sums)."""
        beta_i = np.ascontiguousarray(beta_i, dtype=np.float64)
        beta_r = np.ascontiguousarray(beta_r, dtype=np.float64)
        n_cand = beta_i.shape[0]
        dtype = np.float64 if self.fit_precision == "float64" else np.float32
        groups = (n_cand + WARP - 1) // WARP
        state = self._fit_state(prep, groups, dtype)
        ll = cuda.to_device(np.zeros(n_cand))
        self._loglik_device(prep, prior, cuda.to_device(beta_i), cuda.to_device(beta_r),
                            cuda.to_device(beta_i.astype(dtype)), n_cand, groups * WARP, dtype,
                            ll, state)
        return ll.copy_to_host()

    def fit_rates(self, prep: CUDAPrepared, problem: Problem, settings) -> tuple[float, float, list]:
        """The search of :func:`battus.fit.fit_rates`, with the whole loop on the device."""
        sir = problem.model == "sir"
        n_obs = int(problem.observations.times.shape[0])
        norm = float(problem.n * n_obs)
        rounds = settings.refine_rounds + 1
        pmax = max(settings.grid_points, settings.refine_points)
        cmax = pmax * pmax if sir else pmax
        chunk = max(WARP, ((settings.chunk + WARP - 1) // WARP) * WARP)
        chunk = min(chunk, ((cmax + WARP - 1) // WARP) * WARP)
        mixed = self.fit_precision == "mixed"
        dtype = np.float32 if mixed else np.float64
        state = self._fit_state(prep, chunk // WARP, dtype)
        state64 = self._fit_state(prep, 1, np.float64) if mixed else None
        bounds = cuda.to_device(np.array([[settings.lower, settings.upper]] * 2, dtype=np.float64))
        scaled = self._alloc((2, pmax), np.float64)
        axes = self._alloc((2, pmax), np.float64)
        cand_i = self._alloc(cmax, np.float64)
        cand_r = self._alloc(cmax, np.float64)
        gather = self._alloc(cmax, dtype)
        ll = self._alloc(cmax, np.float64)
        top_idx = self._alloc(POLISH, np.int64)
        pol_i = self._alloc(POLISH, np.float64)
        pol_r = self._alloc(POLISH, np.float64)
        pol_gather = self._alloc(POLISH, np.float64)
        pol_ll = self._alloc(POLISH, np.float64)
        trace_d = self._alloc((rounds, 4), np.float64)
        prior = problem.prior
        tpb = self.threads
        for round_no in range(rounds):
            points = settings.grid_points if round_no == 0 else settings.refine_points
            n_cand = points * points if sir else points
            _linspace_scaled[1, 2](bounds, points, scaled)
            _linspace_shift[1, 2](bounds, points, scaled, axes)
            _cartesian[_blocks(n_cand, tpb), tpb](axes, points, sir, cand_i, cand_r, gather)
            _zero[_blocks(n_cand, tpb), tpb](ll)
            n_top = min(POLISH, n_cand)
            if mixed and n_cand <= POLISH:  # as cheap as the re-score alone: all in float64
                self._loglik_device(prep, prior, cand_i, cand_r, cand_i, n_cand, WARP, np.float64, ll,
                                    state64)
                _select_polish[1, 1](ll, n_cand, norm, cand_i, cand_r, top_idx, pol_i, pol_r,
                                     pol_gather, pol_ll)
                _gather_ll[1, POLISH](ll, top_idx, n_top, pol_ll)
            elif mixed:
                self._loglik_device(prep, prior, cand_i, cand_r, gather, n_cand, chunk, dtype, ll,
                                    state)
                _select_polish[1, 1](ll, n_cand, norm, cand_i, cand_r, top_idx, pol_i, pol_r,
                                     pol_gather, pol_ll)
                self._loglik_device(prep, prior, pol_i, pol_r, pol_gather, n_top, WARP, np.float64,
                                    pol_ll, state64)
            else:
                self._loglik_device(prep, prior, cand_i, cand_r, gather, n_cand, chunk, dtype, ll,
                                    state)
                _select_polish[1, 1](ll, n_cand, norm, cand_i, cand_r, top_idx, pol_i, pol_r,
                                     pol_gather, pol_ll)
                _gather_ll[1, POLISH](ll, top_idx, n_top, pol_ll)
            _finish_round[1, 1](pol_ll, top_idx, n_top, norm, cand_i, cand_r, axes, points, sir,
                                settings.lower, settings.upper, round_no, bounds, trace_d)
        trace_h = trace_d.copy_to_host()
        trace = []
        for round_no in range(rounds):
            points = settings.grid_points if round_no == 0 else settings.refine_points
            trace.append({"round": round_no, "candidates": points * points if sir else points,
                          "beta_i": float(trace_h[round_no, 0]), "beta_r": float(trace_h[round_no, 1]),
                          "objective": float(trace_h[round_no, 2])})
        return float(trace_h[-1, 0]), float(trace_h[-1, 1]), trace


@cuda.jit
def _zero(arr):
    i = cuda.grid(1)
    if i < arr.shape[0]:
        arr[i] = 0.0


@cuda.jit
def _gather_ll(ll, top_idx, n_top, pol_ll):
    j = cuda.grid(1)
    if j < n_top:
        pol_ll[j] = ll[top_idx[j]]


# ----------------------------------------------------------------------------
# simulator entry point


def simulate(indptr: np.ndarray, indices: np.ndarray, initial: np.ndarray, T: int, beta_i: float,
             beta_r: float, seed: int, same_step_recovery: bool = False) -> np.ndarray:
    """(T+1, n) uint8 history on the device; bit-identical to the CPU simulator for a seed."""
    n = indptr.shape[0] - 1
    states = np.zeros((T + 1, n), dtype=np.uint8)
    states[0, initial] = 1
    d_states = cuda.to_device(states)
    d_indptr = cuda.to_device(np.ascontiguousarray(indptr, dtype=np.int64))
    d_indices = cuda.to_device(np.ascontiguousarray(indices, dtype=np.int32))
    tpb = WARP if _simulated() else BLOCK
    for t in range(T):
        _sir_step[_blocks(n, tpb), tpb](d_indptr, d_indices, d_states, t, float(beta_i),
                                        float(beta_r), np.uint64(seed), bool(same_step_recovery))
    return d_states.copy_to_host()
