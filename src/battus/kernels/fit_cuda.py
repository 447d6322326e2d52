"""Numba-CUDA kernels of rate fitting (Eq. 4 for a batch of candidates); the CPU twin is
:mod:`battus.kernels.fit_cpu`.

Layout ``(group, vertex, lane)`` with ``L`` candidates per group, ``L`` the
last dimension of the state arrays (:data:`WARP` for the float32 rounds,
:data:`NARROW` for the float64 re-score and rounds of at most :data:`POLISH`
candidates): ``L`` consecutive lanes own one (vertex, arc range) work item of
one group and each lane one candidate, so a gathered neighbour row is one
``4 L``- or ``8 L``-byte line and no cross-lane reduction is needed. What a
neighbour row holds is the vertex's term ``log1p(-beta * fI)`` per
candidate, formed once per vertex and step by whichever kernel last set
``fI`` (as the CPU twin forms its factors ``1 - beta * fI``), not once per
arc: the same values, so the sums are unchanged bit for bit. Every
candidate's arithmetic (its arcs in CSR order, its split partials in slot
order, its score summed over the same rows and blocks) is independent of
``L``, so a candidate's value is bit-identical whatever group width holds it.
The search itself (grid, refinement, arg-max) is driven once for both backends by :func:`battus.fit.fit_rates`;
the CUDA backend (:mod:`battus.backends.cuda.rounds`) evaluates a round in
float32 and re-scores the best :data:`POLISH` candidates in float64, so
near-ties of the final rounds (relative gaps down to 2e-8 on heb-sir) resolve
exactly as in the float64 CPU backend.

A step gathers with one device function, :func:`_gather`, whichever kernel
runs it: one group (:func:`batch_pressure`), a group pair sharing its index
reads (:func:`batch_pressure_pair`), or a group pair with two lanes per
thread (:func:`batch_pressure_pair_two_lanes`).
"""

from __future__ import annotations

import math

import numpy as np

from .cuda_common import BLOCK, WARP, cuda, kernel, simulated, tree_sum

POLISH = 8  # candidates of each fitting round re-scored in float64
# Group width of float64 passes of at most POLISH candidates: 8 lanes (64-byte rows) on a GPU
# instead of 32 (256-byte rows, 24 of them idle); 2 under the simulator (WARP = 8 there), so that
# CI runs several groups per warp too.
NARROW = max(1, WARP // 4)
# Fixed block count of the score reduction (two blocks per SM of an H100): the sums' order is the same
# run to run. 2 under the simulator, where every thread of a block is a Python thread.
SCORE_BLOCKS = 2 if simulated() else 264
_LOG_FLOOR = 1e-300


@cuda.jit(device=True)
def _term(beta, fi):
    """log1p(-beta * fI) of a vertex for one candidate's rate ``beta``, in the state's precision:
    the value every neighbour of the vertex adds to its log-pressure (the element types make it a
    float32 log1p for float32 state and a float64 one for float64 state)."""
    return math.log1p(-beta * fi)


@cuda.jit(device=True)
def _gather(indices, terms, g, h, col, lo, hi, pair):
    """Sums over arcs lo..hi-1 of the sources' terms ``terms[group, source, col]`` in CSR order:
    of group g, and with ``pair`` of group h too (else the second sum stays 0).

    Each sum is float64, or complex128 where the terms are viewed as complex pairs of lanes
    (:func:`batch_pressure_pair_two_lanes`: the real and imaginary parts add separately, each
    lane's sum as one lane's), so every kernel variant adds a candidate's terms in the same
    order and its sums are the same bit for bit. Eight rows are in flight per round: four arcs'
    rows of both groups, or eight arcs' of the one group. The last arcs of a pair, 1 to 3, go
    together (their index reads in flight at once, a missing arc adding 0.0, which leaves a sum
    as it is: it starts at +0.0 and adds terms <= 0, so it is never -0.0); those of one group go
    one at a time (masked reads of up to seven arcs cost more than they hide).
    """
    zero = terms.dtype.type(0.0)
    sum_g = 0.0 + zero
    sum_h = 0.0 + zero
    e = lo
    step = 4 if pair else 8
    while e + step - 1 < hi:
        i0 = indices[e]
        i1 = indices[e + 1]
        i2 = indices[e + 2]
        i3 = indices[e + 3]
        if pair:  # the round's other four rows: the same arcs in group h
            k, j0, j1, j2, j3 = h, i0, i1, i2, i3
        else:  # the next four arcs in group g
            k, j0, j1, j2, j3 = g, indices[e + 4], indices[e + 5], indices[e + 6], indices[e + 7]
        x0 = terms[g, i0, col]
        y0 = terms[k, j0, col]
        x1 = terms[g, i1, col]
        y1 = terms[k, j1, col]
        x2 = terms[g, i2, col]
        y2 = terms[k, j2, col]
        x3 = terms[g, i3, col]
        y3 = terms[k, j3, col]
        sum_g += x0
        sum_g += x1
        sum_g += x2
        sum_g += x3
        if pair:
            sum_h += y0
            sum_h += y1
            sum_h += y2
            sum_h += y3
        else:
            sum_g += y0
            sum_g += y1
            sum_g += y2
            sum_g += y3
        e += step
    if not pair:
        while e < hi:
            sum_g += terms[g, indices[e], col]
            e += 1
        return sum_g, sum_h
    rest = hi - e
    if rest > 0:
        i0 = indices[e]
        i1 = indices[e + 1] if rest > 1 else 0
        i2 = indices[e + 2] if rest > 2 else 0
        x0 = terms[g, i0, col]
        y0 = terms[h, i0, col]
        x1 = terms[g, i1, col] if rest > 1 else zero
        y1 = terms[h, i1, col] if rest > 1 else zero
        x2 = terms[g, i2, col] if rest > 2 else zero
        y2 = terms[h, i2, col] if rest > 2 else zero
        sum_g += x0
        sum_g += x1
        sum_g += x2
        sum_h += y0
        sum_h += y1
        sum_h += y2
    return sum_g, sum_h


@kernel()
def batch_fill(prior, beta_gather, c0, n_cand, f_s, f_i, f_r, terms):
    u, g = cuda.grid(2)
    lanes = f_s.shape[2]
    if u >= f_s.shape[1] * lanes or g >= f_s.shape[0]:
        return
    v = u // lanes
    lane = u % lanes
    f_s[g, v, lane] = prior[0]
    f_i[g, v, lane] = prior[1]
    f_r[g, v, lane] = prior[2]
    c = g * lanes + lane
    if c < n_cand:
        terms[g, v, lane] = _term(beta_gather[c0 + c], f_i[g, v, lane])


@cuda.jit(device=True)
def _absorbed(f_s, g, u, lane):
    """Whether vertex u has no susceptible mass left for candidate lane (f_S = 0: reset to an
    observed I or R, or underflowed under a high rate), so that its gathers can be skipped.

    Its log-pressure L only ever meets f_S = 0 in :func:`_advance_candidate`,
    where f_S * exp(L) = 0 and f_I + f_S * -expm1(L) = f_I for every L that
    is not NaN, so its marginals and term come out the same bit for bit with
    L = 0 (only a NaN sum would differ: a term log1p(x < -1), i.e. a rate of
    1 meeting an f_I rounded above 1). After a reset only the vertices
    observed S there gather: on the Orkut-sized SI benchmark every vertex is
    infected at frame 20, so the second half of each pass gathers nothing.
    Looking from a pass's first step on, not only after a reset, also
    catches the candidates whose f_S underflows. The look costs a few per
    cent of a step where nothing is absorbed (``benchmarks/gpu_kernels.py``
    times it).
    """
    return f_s[g, u, lane] == 0.0


@cuda.jit(device=True)
def _advance_loaded(fs_cell, fi_cell, fr_cell, f_s, f_i, f_r, terms_next, beta_gather, g, u, lane, c,
                    log_rho, br):
    """Eq. 3 for vertex u and candidate lane c from its float64 log-pressure, given u's marginals
    as stored (``*_cell``); u's next term.

    Only u's own thread reads and writes u's marginals, so they advance in place; neighbours read
    the terms, which are double-buffered.

    A marginal is stored only where its value can change: not a zero f_S or f_I that stays zero,
    nor f_R plus a zero k. The marginals are never -0.0 or negative (products and sums of
    non-negative values, resets to 0.0 and 1.0), so a skipped store leaves exactly the bits it
    would have written; a NaN still compares unequal and is stored. After a reset every vertex
    observed R keeps (0, 0, 1) and one observed I keeps f_S = 0, the same for every lane, so
    whole rows of those stores go (the terms, double-buffered, are always stored). The term is
    formed from f_I rounded to the state's type in a register: the value the cell holds after
    the store, without reading it back.
    """
    fs = np.float64(fs_cell)
    fi = np.float64(fi_cell)
    k = fi + fs * -math.expm1(log_rho)
    s_next = fs * math.exp(log_rho)
    i_next = k * (1.0 - br)
    if not (fs == 0.0 and s_next == 0.0):
        f_s[g, u, lane] = s_next
    i_cell = fi_cell
    if not (fi == 0.0 and i_next == 0.0):
        i_cell = f_i.dtype.type(i_next)
        f_i[g, u, lane] = i_cell
    if k != 0.0:
        f_r[g, u, lane] = np.float64(fr_cell) + k * br
    terms_next[g, u, lane] = _term(beta_gather[c], i_cell)


@cuda.jit(device=True)
def _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g, u, lane, c, log_rho, br):
    """:func:`_advance_loaded` on u's marginals, all three read before any store (after the gathers:
    read before them, they would hold registers through the whole arc loop)."""
    _advance_loaded(f_s[g, u, lane], f_i[g, u, lane], f_r[g, u, lane], f_s, f_i, f_r, terms_next,
                    beta_gather, g, u, lane, c, log_rho, br)


@kernel()
def batch_pressure(indices, item_vertex, item_start, item_end, item_slot, terms_cur, terms_next,
                    f_s, f_i, f_r, beta_gather, beta_r, c0, n_cand, partial, g0):
    """``L`` consecutive threads = work item (vertex, arc range) of one group; lane = candidate.

    Neighbours' terms ``log1p(-beta * fI)`` are formed once per vertex and
    step (by the step that advanced it, :func:`batch_fill` or
    :func:`batch_score_reset`) rather than once per arc: the same values,
    added in the same order, so every sum is unchanged bit for bit, for one
    ``log1p`` a vertex instead of one an arc. Whole-vertex items advance that
    vertex at once; split items leave a float64 partial for
    :func:`batch_finish_split`. Groups from ``g0`` on. A vertex without
    susceptible mass gathers nothing (:func:`_absorbed`).
    """
    g = g0 + cuda.blockIdx.y
    tid = cuda.threadIdx.x
    lanes = f_s.shape[2]
    lane = tid % lanes
    item = cuda.blockIdx.x * (cuda.blockDim.x // lanes) + tid // lanes
    if item >= item_vertex.shape[0]:
        return
    c = g * lanes + lane
    if c >= n_cand:
        return
    u = item_vertex[item]
    acc = 0.0
    if not _absorbed(f_s, g, u, lane):
        acc, _ = _gather(indices, terms_cur, g, g, lane, item_start[item], item_end[item], False)
    slot = item_slot[item]
    if slot >= 0:
        partial[slot, g, lane] = acc
        return
    _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g, u, lane, c0 + c, acc, beta_r[c0 + c])


# Capped at 64 registers (72 uncapped): more threads resident hide more of the gathers' latency, and
# fewer registers spill (benchmarks/gpu_kernels.py times the caps).
@kernel(max_registers=64)
def batch_pressure_pair(indices, item_vertex, item_start, item_end, item_slot, terms_cur, terms_next,
                         f_s, f_i, f_r, beta_gather, beta_r, c0, n_cand, partial):
    """batch_pressure for the group pair (2 y, 2 y + 1), y = blockIdx.y: the pair's first group is
    full; lanes of the second past ``n_cand`` (state never advanced) re-read the first group's row
    and write nothing."""
    g = 2 * cuda.blockIdx.y
    tid = cuda.threadIdx.x
    lanes = f_s.shape[2]
    lane = tid % lanes
    item = cuda.blockIdx.x * (cuda.blockDim.x // lanes) + tid // lanes
    if item >= item_vertex.shape[0]:
        return
    c = g * lanes + lane
    d = c + lanes
    valid = d < n_cand
    h = g + 1 if valid else g
    u = item_vertex[item]
    acc0 = 0.0
    acc1 = 0.0
    if not (_absorbed(f_s, g, u, lane) and _absorbed(f_s, h, u, lane)):
        acc0, acc1 = _gather(indices, terms_cur, g, h, lane, item_start[item], item_end[item], True)
    slot = item_slot[item]
    if slot >= 0:
        partial[slot, g, lane] = acc0
        if valid:
            partial[slot, g + 1, lane] = acc1
        return
    _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g, u, lane, c0 + c, acc0, beta_r[c0 + c])
    if valid:
        _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g + 1, u, lane, c0 + d, acc1,
                           beta_r[c0 + d])


@kernel(max_registers=80)
def batch_pressure_pair_two_lanes(indices, item_vertex, item_start, item_end, item_slot, terms2_cur, terms_next,
                                  f_s, f_i, f_r, beta_gather, beta_r, c0, n_cand, partial):
    """batch_pressure_pair with two adjacent lanes per thread (``terms2_cur``: the current terms
    viewed as complex pairs of lanes, which :func:`_gather` sums as complex numbers, each part one
    lane's sum): ``L / 2`` threads hold a work item, so a warp works on two items at once, twice
    the independent chains of dependent reads (index, then row) per warp. A thread skips its
    gathers only when its two lanes are absorbed in both groups (:func:`_absorbed`; the values are
    the same either way).

    For graphs of short work items, where a warp of one item per L threads waits on its reads;
    on long items the two lanes' extra registers cost more than the second chain gains
    (:attr:`battus.backends.cuda.settings.CUDASettings.two_lane_max_arcs` picks the kernel).
    Capped at 80 registers, the cap that ran fastest. Lanes 2k and 2k + 1 per thread, so that one
    complex element holds both.
    """
    g = 2 * cuda.blockIdx.y
    tid = cuda.threadIdx.x
    lanes = f_s.shape[2]
    half = lanes // 2
    k = tid % half
    lane = 2 * k
    item = cuda.blockIdx.x * (cuda.blockDim.x // half) + tid // half
    if item >= item_vertex.shape[0]:
        return
    c = g * lanes + lane
    d = c + lanes
    valid0 = d < n_cand
    valid1 = d + 1 < n_cand
    h = g + 1 if valid0 else g
    u = item_vertex[item]
    a0 = 0.0
    a1 = 0.0
    b0 = 0.0
    b1 = 0.0
    if not (_absorbed(f_s, g, u, lane) and _absorbed(f_s, g, u, lane + 1)
            and _absorbed(f_s, h, u, lane) and _absorbed(f_s, h, u, lane + 1)):
        sum_g, sum_h = _gather(indices, terms2_cur, g, h, k, item_start[item], item_end[item], True)
        a0, a1, b0, b1 = sum_g.real, sum_g.imag, sum_h.real, sum_h.imag
    slot = item_slot[item]
    if slot >= 0:
        partial[slot, g, lane] = a0
        partial[slot, g, lane + 1] = a1
        if valid0:
            partial[slot, g + 1, lane] = b0
        if valid1:
            partial[slot, g + 1, lane + 1] = b1
        return
    _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g, u, lane, c0 + c, a0, beta_r[c0 + c])
    _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g, u, lane + 1, c0 + c + 1, a1,
                       beta_r[c0 + c + 1])
    if valid0:
        _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g + 1, u, lane, c0 + d, b0, beta_r[c0 + d])
    if valid1:
        _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g + 1, u, lane + 1, c0 + d + 1, b1,
                           beta_r[c0 + d + 1])


@kernel()
def batch_finish_split(split_vertex, split_ptr, partial, terms_next, f_s, f_i, f_r, beta_gather, beta_r,
                        c0, n_cand):
    x, g = cuda.grid(2)
    lanes = f_s.shape[2]
    h = x // lanes
    lane = x % lanes
    c = g * lanes + lane
    if h >= split_vertex.shape[0] or g >= f_s.shape[0] or c >= n_cand:
        return
    acc = 0.0
    for slot in range(split_ptr[h], split_ptr[h + 1]):
        acc += partial[slot, g, lane]
    _advance_candidate(f_s, f_i, f_r, terms_next, beta_gather, g, split_vertex[h], lane, c0 + c, acc,
                       beta_r[c0 + c])


@kernel()
def batch_advance_held(held_rows, f_s, f_i, f_r, terms_next, beta_gather, beta_r, c0, n_cand):
    """One step of the vertices a reset left infected (``held_rows``: their state rows, in gather
    order), whose work items a compact step leaves out
    (:func:`battus.backends.cuda.layout.compact_items`).

    Their f_S is the reset's 0.0 in every lane, so their gathers would be skipped
    (:func:`_absorbed`) and they advance with L = 0, as here: f_S = 0.0 is passed, not read.
    """
    x, g = cuda.grid(2)
    lanes = f_s.shape[2]
    k = x // lanes
    lane = x % lanes
    c = g * lanes + lane
    if k >= held_rows.shape[0] or g >= f_s.shape[0] or c >= n_cand:
        return
    u = held_rows[k]
    _advance_loaded(f_s.dtype.type(0.0), f_i[g, u, lane], f_r[g, u, lane], f_s, f_i, f_r, terms_next, beta_gather,
                    g, u, lane, c0 + c, 0.0, beta_r[c0 + c])


@kernel()
def batch_score_reset(obs_states, snapshot, gather_id, f_s, f_i, f_r, terms, terms_next, beta_gather, c0, n_cand,
                      block_ll):
    """log f^{y}_u summed over vertices per candidate, then reset to the observation (and the
    vertex's term to the reset marginal's, in both term buffers: a vertex reset to R keeps it, and a
    compact step, which leaves such vertices out, does not write it again).

    Every lane scores against row ``snapshot`` of ``obs_states``. Block = L
    lanes x (blockDim / L) rows with a fixed number of blocks and a fixed
    shared-memory tree, so the float64 sums are identical run to run (and,
    with the same rows per block, for every group width L).
    """
    sm = cuda.shared.array(BLOCK, dtype=np.float64)
    g = cuda.blockIdx.y
    tid = cuda.threadIdx.x
    lanes = f_s.shape[2]
    lane = tid % lanes
    rows_per_block = cuda.blockDim.x // lanes
    row = tid // lanes
    c = g * lanes + lane
    n = f_s.shape[1]
    acc = 0.0
    if c < n_cand:
        u = cuda.blockIdx.x * rows_per_block + row
        stride = cuda.gridDim.x * rows_per_block
        while u < n:
            s = obs_states[snapshot, u]
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
            term = _term(beta_gather[c0 + c], f_i[g, w, lane])
            terms[g, w, lane] = term
            terms_next[g, w, lane] = term
            u += stride
    sm[tid] = acc
    cuda.syncthreads()
    tree_sum(sm, tid, row, rows_per_block // 2, lanes)
    if row == 0:
        block_ll[cuda.blockIdx.x, g, lane] = sm[tid]


@kernel()
def batch_accumulate(block_ll, ll, c0, n_cand):
    c = cuda.grid(1)
    if c >= n_cand:
        return
    lanes = block_ll.shape[2]
    g = c // lanes
    lane = c % lanes
    acc = 0.0
    for b in range(block_ll.shape[0]):
        acc += block_ll[b, g, lane]
    ll[c0 + c] += acc

