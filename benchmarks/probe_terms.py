"""Probe (issue 13): precomputed per-source terms log1p(-beta * fI) instead of one log1p per arc.

Times one Battus-Z pull step and one fitting step (float32 pair and single group, float64
narrow) with the kernels of this commit and with term-reading variants written here; checks
every output bit for bit. Kept in this commit as the record of the measurement; the kept variant
became the fitting kernels in the next commit, which removes this script.

    PYTHONPATH=src python3 benchmarks/probe_terms.py livejournal orkut
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from battus.kernels.cuda_common import WARP, cuda, kernel  # noqa: E402


def _timed(launch, repeats=10):
    launch()
    cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = cuda.event(), cuda.event()
        a.record()
        launch()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


# ---------------------------------------------------------------- Battus-Z pull with terms

@cuda.jit
def z_terms(f_i, beta, terms):
    u = cuda.grid(1)
    if u < f_i.shape[0]:
        terms[u] = math.log1p(-beta * f_i[u])


@cuda.jit(device=True)
def _sum_terms(indices, terms, lo, hi, step):
    acc = 0.0
    zero = np.float32(0.0)
    e = lo
    while e < hi:
        e1 = e + step
        e2 = e + 2 * step
        e3 = e + 3 * step
        x0 = terms[indices[e]]
        x1 = terms[indices[e1]] if e1 < hi else zero
        x2 = terms[indices[e2]] if e2 < hi else zero
        x3 = terms[indices[e3]] if e3 < hi else zero
        acc += x0
        acc += x1
        acc += x2
        acc += x3
        e += 4 * step
    return acc


@cuda.jit
def z_pull_terms(indptr, indices, terms, log_rho, thread_verts, warp_verts, hub_start, hub_end, partial,
                 n_thread_blocks, n_warp_blocks):
    sm = cuda.shared.array(256, dtype=np.float64)
    tid = cuda.threadIdx.x
    bdim = cuda.blockDim.x
    block = cuda.blockIdx.x
    if block < n_thread_blocks:
        k = block * bdim + tid
        if k < thread_verts.shape[0]:
            u = thread_verts[k]
            log_rho[u] = _sum_terms(indices, terms, indptr[u], indptr[u + 1], 1)
        return
    block -= n_thread_blocks
    if block < n_warp_blocks:
        lane = tid % WARP
        k = block * (bdim // WARP) + tid // WARP
        acc = 0.0
        if k < warp_verts.shape[0]:
            u = warp_verts[k]
            acc = _sum_terms(indices, terms, indptr[u] + lane, indptr[u + 1], WARP)
        offset = WARP // 2
        while offset > 0:
            acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, offset)
            offset //= 2
        if lane == 0 and k < warp_verts.shape[0]:
            log_rho[warp_verts[k]] = acc
        return
    chunk = block - n_warp_blocks
    acc = _sum_terms(indices, terms, hub_start[chunk] + tid, hub_end[chunk], bdim)
    offset = WARP // 2
    while offset > 0:
        acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, offset)
        offset //= 2
    if tid % WARP == 0:
        sm[tid // WARP] = acc
    cuda.syncthreads()
    if tid == 0:
        total = 0.0
        for w in range(bdim // WARP):
            total += sm[w]
        partial[chunk] = total


def pull(graph, log, tdtype=np.float32):
    from battus.backends.cuda import CUDABackend
    from battus.kernels import infer_cuda as K
    from battus.problem import Observations, Problem

    n = graph.n
    obs = Observations(times=np.array([1]), states=np.zeros((1, n), dtype=np.uint8))
    prep = CUDABackend().prepare(Problem(graph, "si", 1, min(100, n), obs))
    b = prep.bins
    tpb = 256
    grid = b["n_thread_blocks"] + b["n_warp_blocks"] + b["n_hub_chunks"]
    f_i = cuda.to_device(np.random.default_rng(0).random(n).astype(np.float32) * 0.01)
    beta = np.float32(0.1)
    out_a = cuda.device_array(n, dtype=np.float32)
    out_b = cuda.device_array(n, dtype=np.float32)
    terms = cuda.device_array(n, dtype=tdtype)
    hubs = max(1, -(-b["n_hubs"] // tpb))

    def cur():
        K.pressure_binned[grid, tpb](prep.indptr, prep.gather_indices, f_i, beta, out_a, b["thread_verts"],
                                     b["warp_verts"], b["hub_start"], b["hub_end"], b["partial"],
                                     b["n_thread_blocks"], b["n_warp_blocks"])
        if b["n_hubs"]:
            K.finish_hubs[hubs, tpb](b["hub_verts"], b["hub_ptr"], b["partial"], out_a)

    def new():
        z_terms[-(-n // tpb), tpb](f_i, beta, terms)
        z_pull_terms[grid, tpb](prep.indptr, prep.gather_indices, terms, out_b, b["thread_verts"],
                                b["warp_verts"], b["hub_start"], b["hub_end"], b["partial"],
                                b["n_thread_blocks"], b["n_warp_blocks"])
        if b["n_hubs"]:
            K.finish_hubs[hubs, tpb](b["hub_verts"], b["hub_ptr"], b["partial"], out_b)

    t_cur, t_new = _timed(cur), _timed(new)
    t_tk = _timed(lambda: z_terms[-(-n // tpb), tpb](f_i, beta, terms))
    same = out_a.copy_to_host().tobytes() == out_b.copy_to_host().tobytes()
    log(f"  Z pull (terms {np.dtype(tdtype).name}): current {t_cur:.3f} ms, terms {t_new:.3f} ms "
        f"(terms kernel {t_tk:.3f}), identical {same}")


# ---------------------------------------------------------------- fit with terms

@cuda.jit(device=True)
def _sum_lane_pair(indices, t, g, h, lane, lo, hi):
    acc0 = 0.0
    acc1 = 0.0
    e = lo
    while e + 3 < hi:
        i0 = indices[e]
        i1 = indices[e + 1]
        i2 = indices[e + 2]
        i3 = indices[e + 3]
        x0 = t[g, i0, lane]
        y0 = t[h, i0, lane]
        x1 = t[g, i1, lane]
        y1 = t[h, i1, lane]
        x2 = t[g, i2, lane]
        y2 = t[h, i2, lane]
        x3 = t[g, i3, lane]
        y3 = t[h, i3, lane]
        acc0 += x0
        acc0 += x1
        acc0 += x2
        acc0 += x3
        acc1 += y0
        acc1 += y1
        acc1 += y2
        acc1 += y3
        e += 4
    while e < hi:
        i0 = indices[e]
        acc0 += t[g, i0, lane]
        acc1 += t[h, i0, lane]
        e += 1
    return acc0, acc1


@cuda.jit(device=True)
def _sum_lane(indices, t, g, lane, lo, hi):
    acc = 0.0
    e = lo
    while e + 7 < hi:
        x0 = t[g, indices[e], lane]
        x1 = t[g, indices[e + 1], lane]
        x2 = t[g, indices[e + 2], lane]
        x3 = t[g, indices[e + 3], lane]
        x4 = t[g, indices[e + 4], lane]
        x5 = t[g, indices[e + 5], lane]
        x6 = t[g, indices[e + 6], lane]
        x7 = t[g, indices[e + 7], lane]
        acc += x0
        acc += x1
        acc += x2
        acc += x3
        acc += x4
        acc += x5
        acc += x6
        acc += x7
        e += 8
    while e < hi:
        acc += t[g, indices[e], lane]
        e += 1
    return acc


@cuda.jit(device=True)
def _advance_terms(f_s, f_i, f_r, t_next, g, u, lane, log_rho, beta, br):
    fs = np.float64(f_s[g, u, lane])
    k = np.float64(f_i[g, u, lane]) + fs * -math.expm1(log_rho)
    f_s[g, u, lane] = fs * math.exp(log_rho)
    f_i[g, u, lane] = k * (1.0 - br)
    f_r[g, u, lane] = np.float64(f_r[g, u, lane]) + k * br
    t_next[g, u, lane] = math.log1p(-beta * f_i[g, u, lane])


@kernel(max_registers=64)
def pair_terms(indices, item_vertex, item_start, item_end, item_slot, t_cur, t_next, f_i, f_s, f_r,
               beta_gather, beta_r, c0, n_cand, partial):
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
    acc0, acc1 = _sum_lane_pair(indices, t_cur, g, g + 1 if valid else g, lane, item_start[item], item_end[item])
    slot = item_slot[item]
    if slot >= 0:
        partial[slot, g, lane] = acc0
        if valid:
            partial[slot, g + 1, lane] = acc1
        return
    u = item_vertex[item]
    _advance_terms(f_s, f_i, f_r, t_next, g, u, lane, acc0, beta_gather[c0 + c], beta_r[c0 + c])
    if valid:
        _advance_terms(f_s, f_i, f_r, t_next, g + 1, u, lane, acc1, beta_gather[c0 + d], beta_r[c0 + d])


@cuda.jit
def single_terms(indices, item_vertex, item_start, item_end, item_slot, t_cur, t_next, f_i, f_s, f_r,
                 beta_gather, beta_r, c0, n_cand, partial, g0):
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
    acc = _sum_lane(indices, t_cur, g, lane, item_start[item], item_end[item])
    slot = item_slot[item]
    if slot >= 0:
        partial[slot, g, lane] = acc
        return
    _advance_terms(f_s, f_i, f_r, t_next, g, item_vertex[item], lane, acc, beta_gather[c0 + c], beta_r[c0 + c])


@cuda.jit
def fit_terms(f_i, beta_gather, c0, t):
    x, g = cuda.grid(2)
    lanes = f_i.shape[2]
    v = x // lanes
    lane = x % lanes
    if v < f_i.shape[1] and g < f_i.shape[0]:
        t[g, v, lane] = math.log1p(-beta_gather[c0 + g * lanes + lane] * f_i[g, v, lane])


def fit(graph, log, dtype, lanes, groups, pair, tdtype=None):
    tdtype = dtype if tdtype is None else tdtype
    from battus.backends.cuda import CUDABackend
    from battus.kernels import fit_cuda as KF
    from battus.problem import Observations, Problem

    n = graph.n
    obs = Observations(times=np.array([1]), states=np.zeros((1, n), dtype=np.uint8))
    prep = CUDABackend().prepare(Problem(graph, "sir", 1, min(100, n), obs))
    it = prep.items
    count = groups * lanes
    rng = np.random.default_rng(1)
    shape = (groups, n, lanes)
    a0 = (rng.random(shape) * 0.01).astype(dtype)
    s0 = (0.9 + 0.1 * rng.random(shape)).astype(dtype)
    r0 = (rng.random(shape) * 0.01).astype(dtype)
    beta_i = cuda.to_device(np.linspace(0.01, 0.5, count).astype(dtype))
    beta_r = cuda.to_device(np.linspace(0.3, 0.02, count))
    partial_a = cuda.to_device(np.zeros((max(1, it["n_slots"]), groups, lanes)))
    partial_b = cuda.to_device(np.zeros((max(1, it["n_slots"]), groups, lanes)))
    tpb = 256
    nblk = -(-it["n_items"] // (tpb // lanes))
    f_a = cuda.to_device(a0)
    f_b = cuda.to_device(np.zeros(shape, dtype=dtype))
    f_s, f_r = cuda.to_device(s0), cuda.to_device(r0)
    g_i, g_s, g_r = cuda.to_device(a0), cuda.to_device(s0), cuda.to_device(r0)
    t_a = cuda.device_array(shape, dtype=tdtype)
    t_b = cuda.to_device(np.zeros(shape, dtype=tdtype))
    fgrid = (-(-n * lanes // tpb), groups)
    fit_terms[fgrid, (tpb, 1)](g_i, beta_i, 0, t_a)
    if pair:
        def cur():
            KF.batch_pressure_pair[(nblk, groups // 2), tpb](
                prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], f_a, f_b, f_s, f_r,
                beta_i, beta_r, 0, count, partial_a)

        def new():
            pair_terms[(nblk, groups // 2), tpb](
                prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], t_a, t_b, g_i, g_s, g_r,
                beta_i, beta_r, 0, count, partial_b)
    else:
        def cur():
            KF.batch_pressure[(nblk, groups), tpb](
                prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], f_a, f_b, f_s, f_r,
                beta_i, beta_r, 0, count, partial_a, 0)

        def new():
            single_terms[(nblk, groups), tpb](
                prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], t_a, t_b, g_i, g_s, g_r,
                beta_i, beta_r, 0, count, partial_b, 0)
    # one launch each from the same state, compared bit for bit
    cur()
    new()
    cuda.synchronize()
    ref_t = cuda.device_array(shape, dtype=tdtype)
    fit_terms[fgrid, (tpb, 1)](f_b, beta_i, 0, ref_t)
    whole = np.ones(n, dtype=bool)
    whole[it["split_vertex"].copy_to_host()] = False
    fb, gi = f_b.copy_to_host(), g_i.copy_to_host()
    tb, rt = t_b.copy_to_host(), ref_t.copy_to_host()
    same = (np.array_equal(fb[:, whole].view(np.uint8), gi[:, whole].view(np.uint8))
            and f_s.copy_to_host().tobytes() == g_s.copy_to_host().tobytes()
            and f_r.copy_to_host().tobytes() == g_r.copy_to_host().tobytes()
            and partial_a.copy_to_host().tobytes() == partial_b.copy_to_host().tobytes()
            and np.array_equal(tb[:, whole].view(np.uint8), rt[:, whole].view(np.uint8)))
    t_cur, t_new = _timed(cur), _timed(new)
    t_tk = _timed(lambda: fit_terms[fgrid, (tpb, 1)](g_i, beta_i, 0, t_a))
    name = (f"{np.dtype(dtype).name} terms {np.dtype(tdtype).name} L={lanes} groups={groups} "
            f"{'pair' if pair else 'single'}")
    log(f"  fit {name}: current {t_cur:.3f} ms, terms {t_new:.3f} ms (a terms pass {t_tk:.3f}), identical {same}")


def main():
    from gpu_scale import make_graph

    presets = sys.argv[1:] or ["livejournal", "orkut"]
    for preset in presets:
        graph, _, _ = make_graph(preset, 2026)
        print(f"{preset}: n={graph.n} arcs={graph.m}", flush=True)
        for tdtype in (np.float32, np.float64):  # terms stored in the state's precision, or float64
            pull(graph, print, tdtype)
            fit(graph, print, np.float32, WARP, 2, True, tdtype)
            fit(graph, print, np.float32, WARP, 1, False, tdtype)
        fit(graph, print, np.float64, max(1, WARP // 4), 1, False)
        fit(graph, print, np.float32, WARP, 4, True)
        fit(graph, print, np.float32, WARP, 4, False)


if __name__ == "__main__":
    main()
