"""Probe (issue 13): do L2 cache hints shorten the gather-bound steps? Checked bit for bit.

A fitting step gathers one 128-byte row (float32, 32 lanes) or 64-byte row
(float64, 8 lanes) of terms per arc and group, from state far larger than the
50 MB L2, while it also streams the CSR indices, the work items and its own
vertices' state. Streaming data loaded and stored with the default policy
competes with the hot (high out-degree) rows for L2. The variants below load
and store what is touched once with ``.cs`` (evict first), and optionally the
gathers of cold sources too (``gather id >= hot``; gather ids are ranked by
out-degree, so the hot rows are the first ``hot`` ones), and optionally the
hot ones with ``L2::evict_last``. Cache operators are performance hints
only: every variant's outputs must equal the default kernel's bit for bit.

    PYTHONPATH=src python3 benchmarks/probe_cache.py --presets orkut livejournal
    ncu --clock-control none --metrics ... python3 benchmarks/probe_cache.py --presets orkut --ncu
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from battus.kernels.cuda_common import WARP, cuda, simulated  # noqa: E402

HINTS = not simulated()
L2_BYTES = 40 << 20  # budget for hot rows (the H100 has 50 MB of L2)


# -- loads and stores with cache operators ---------------------------------------------------

def _evict_last_intrinsic():
    """ld.global.L2::evict_last for float32/float64 arrays (not exposed by numba-cuda)."""
    from llvmlite import ir
    from numba.core import types
    from numba.core.extending import intrinsic
    from numba.cuda import cgutils

    @intrinsic
    def ld_el(typingctx, array, index):
        sig = array.dtype(array, index)

        def codegen(context, builder, sig, args):
            array_type, index_type = sig.args
            arr, idx = args
            ary = context.make_array(array_type)(context, builder, value=arr)
            if isinstance(index_type, types.BaseTuple):
                inds = cgutils.unpack_tuple(builder, idx, count=len(index_type))
            else:
                inds = [idx]
            ptr = cgutils.get_item_pointer(context, builder, array_type, ary, inds, wraparound=False)
            ty = context.get_value_type(array_type.dtype)
            bits = array_type.dtype.bitwidth
            cons = "=f,l" if bits == 32 else "=d,l"
            asm = ir.InlineAsm(ir.FunctionType(ty, [ty.as_pointer()]),
                               f"ld.global.L2::evict_last.f{bits} $0, [$1];", cons)
            return builder.call(asm, [ptr])

        return sig, codegen

    return ld_el


if HINTS:
    _ld_el = _evict_last_intrinsic()

    @cuda.jit(device=True, inline=True)
    def ld_cs(a, i):
        return cuda.ldcs(a, i)

    @cuda.jit(device=True, inline=True)
    def st_cs(a, i, v):
        cuda.stcs(a, i, v)

    @cuda.jit(device=True, inline=True)
    def ld_el(a, i):
        return _ld_el(a, i)
else:
    @cuda.jit(device=True)
    def ld_cs(a, i):
        return a[i]

    @cuda.jit(device=True)
    def st_cs(a, i, v):
        a[i] = v

    @cuda.jit(device=True)
    def ld_el(a, i):
        return a[i]


@cuda.jit(device=True, inline=True)
def ld(a, i):
    return a[i]


@cuda.jit(device=True, inline=True)
def st(a, i, v):
    a[i] = v


# -- kernel factories ------------------------------------------------------------------------

def make_pair(ld_stream, ld_own, st_own, st_term, ld_hot, ld_cold):
    """batch_pressure_pair with the given loads/stores (see kernels/fit_cuda.py)."""

    @cuda.jit(device=True, inline=True)
    def gather(terms, g, u, lane, hot):
        k = (np.int64(g), np.int64(u), np.int64(lane))
        if u < hot:
            return ld_hot(terms, k)
        return ld_cold(terms, k)

    @cuda.jit(device=True, inline=True)
    def advance(f_s, f_i, f_r, terms_next, beta_gather, g, u, lane, c, log_rho, br):
        k = (np.int64(g), np.int64(u), np.int64(lane))
        fs = np.float64(ld_own(f_s, k))
        kk = np.float64(ld_own(f_i, k)) + fs * -math.expm1(log_rho)
        st_own(f_s, k, fs * math.exp(log_rho))
        st_own(f_i, k, kk * (1.0 - br))
        st_own(f_r, k, np.float64(ld_own(f_r, k)) + kk * br)
        # the term of the stored fI, in the state's precision (as _term in fit_cuda)
        st_term(terms_next, k, math.log1p(-beta_gather[c] * ld_own(f_i, k)))

    @cuda.jit(max_registers=64) if HINTS else cuda.jit
    def pair(indices, item_vertex, item_start, item_end, item_slot, terms_cur, terms_next,
             f_s, f_i, f_r, beta_gather, beta_r, c0, n_cand, partial, hot):
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
        lo = ld_stream(item_start, item)
        hi = ld_stream(item_end, item)
        acc0 = 0.0
        acc1 = 0.0
        e = lo
        while e + 3 < hi:
            i0 = ld_stream(indices, e)
            i1 = ld_stream(indices, e + 1)
            i2 = ld_stream(indices, e + 2)
            i3 = ld_stream(indices, e + 3)
            x0 = gather(terms_cur, g, i0, lane, hot)
            y0 = gather(terms_cur, h, i0, lane, hot)
            x1 = gather(terms_cur, g, i1, lane, hot)
            y1 = gather(terms_cur, h, i1, lane, hot)
            x2 = gather(terms_cur, g, i2, lane, hot)
            y2 = gather(terms_cur, h, i2, lane, hot)
            x3 = gather(terms_cur, g, i3, lane, hot)
            y3 = gather(terms_cur, h, i3, lane, hot)
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
            i0 = ld_stream(indices, e)
            acc0 += gather(terms_cur, g, i0, lane, hot)
            acc1 += gather(terms_cur, h, i0, lane, hot)
            e += 1
        slot = ld_stream(item_slot, item)
        if slot >= 0:
            partial[slot, g, lane] = acc0
            if valid:
                partial[slot, g + 1, lane] = acc1
            return
        u = ld_stream(item_vertex, item)
        advance(f_s, f_i, f_r, terms_next, beta_gather, g, u, lane, c0 + c, acc0, beta_r[c0 + c])
        if valid:
            advance(f_s, f_i, f_r, terms_next, beta_gather, g + 1, u, lane, c0 + d, acc1, beta_r[c0 + d])

    return pair


def make_single(ld_stream, ld_own, st_own, st_term, ld_hot, ld_cold):
    """batch_pressure (one group per blockIdx.y, 8 rows in flight) with the given loads/stores."""

    @cuda.jit(device=True, inline=True)
    def gather(terms, g, u, lane, hot):
        k = (np.int64(g), np.int64(u), np.int64(lane))
        if u < hot:
            return ld_hot(terms, k)
        return ld_cold(terms, k)

    @cuda.jit(device=True, inline=True)
    def advance(f_s, f_i, f_r, terms_next, beta_gather, g, u, lane, c, log_rho, br):
        k = (np.int64(g), np.int64(u), np.int64(lane))
        fs = np.float64(ld_own(f_s, k))
        kk = np.float64(ld_own(f_i, k)) + fs * -math.expm1(log_rho)
        st_own(f_s, k, fs * math.exp(log_rho))
        st_own(f_i, k, kk * (1.0 - br))
        st_own(f_r, k, np.float64(ld_own(f_r, k)) + kk * br)
        st_term(terms_next, k, math.log1p(-beta_gather[c] * ld_own(f_i, k)))

    @cuda.jit
    def single(indices, item_vertex, item_start, item_end, item_slot, terms_cur, terms_next,
               f_s, f_i, f_r, beta_gather, beta_r, c0, n_cand, partial, g0, hot):
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
        lo = ld_stream(item_start, item)
        hi = ld_stream(item_end, item)
        acc = 0.0
        e = lo
        while e + 7 < hi:
            x0 = gather(terms_cur, g, ld_stream(indices, e), lane, hot)
            x1 = gather(terms_cur, g, ld_stream(indices, e + 1), lane, hot)
            x2 = gather(terms_cur, g, ld_stream(indices, e + 2), lane, hot)
            x3 = gather(terms_cur, g, ld_stream(indices, e + 3), lane, hot)
            x4 = gather(terms_cur, g, ld_stream(indices, e + 4), lane, hot)
            x5 = gather(terms_cur, g, ld_stream(indices, e + 5), lane, hot)
            x6 = gather(terms_cur, g, ld_stream(indices, e + 6), lane, hot)
            x7 = gather(terms_cur, g, ld_stream(indices, e + 7), lane, hot)
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
            acc += gather(terms_cur, g, ld_stream(indices, e), lane, hot)
            e += 1
        slot = ld_stream(item_slot, item)
        if slot >= 0:
            partial[slot, g, lane] = acc
            return
        advance(f_s, f_i, f_r, terms_next, beta_gather, g, ld_stream(item_vertex, item), lane, c0 + c, acc,
                beta_r[c0 + c])

    return single


# name: (stream loads, own-state loads, own-state stores, term stores, hot gathers, cold gathers, hot rows?)
VARIANTS = {
    "default": (ld, ld, st, st, ld, ld, False),
    "cs-stream": (ld_cs, ld, st, st, ld, ld, False),
    "cs-stream-own": (ld_cs, ld_cs, st_cs, st, ld, ld, False),
    "cs-all-but-terms": (ld_cs, ld_cs, st_cs, st, ld, ld_cs, True),
    "cs-terms-too": (ld_cs, ld_cs, st_cs, st_cs, ld, ld_cs, True),
    "evict-last-hot": (ld_cs, ld_cs, st_cs, st, ld_el, ld_cs, True),
}


def _timed(launch, repeats: int) -> float:
    launch()
    cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = cuda.event(), cuda.event()
        start.record()
        launch()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def fit_probe(graph, kind: str, repeats: int, log, ncu: bool, variants: list[str]) -> list:
    """kind: 'pair' (float32, 2 groups of 32), 'single' (float32, 1 group of 32), 'narrow64'
    (float64, 1 group of WARP // 4 lanes)."""
    from battus.backends.cuda import CUDABackend
    from battus.problem import Observations, Problem

    n = graph.n
    obs = Observations(times=np.array([1]), states=np.zeros((1, n), dtype=np.uint8))
    problem = Problem(graph, "sir", 1, min(100, n), obs)
    be = CUDABackend()
    prep = be.prepare(problem)
    it = prep.items
    if kind == "narrow64":
        lanes, groups, dtype = max(1, WARP // 4), 1, np.float64
    else:
        lanes, groups, dtype = WARP, (2 if kind == "pair" else 1), np.float32
    count = groups * lanes
    rng = np.random.default_rng(1)
    shape = (groups, n, lanes)
    i0 = (rng.random(shape) * 0.01).astype(dtype)
    s0 = (0.9 + 0.1 * rng.random(shape)).astype(dtype)
    r0 = (rng.random(shape) * 0.01).astype(dtype)
    betas = np.linspace(0.01, 0.5, count).astype(dtype)
    t_host = np.log1p(-betas.reshape(groups, 1, lanes) * i0).astype(dtype)
    t_a = cuda.to_device(t_host)
    beta_i = cuda.to_device(betas)
    beta_r = cuda.to_device(np.linspace(0.3, 0.02, count))
    partial = cuda.device_array((max(1, it["n_slots"]), groups, lanes), dtype=np.float64)
    tpb = be.threads
    nblk = -(-it["n_items"] // (tpb // lanes))
    row_bytes = lanes * np.dtype(dtype).itemsize * (2 if kind == "pair" else 1)
    hot_rows = min(n, L2_BYTES // row_bytes)
    from battus.kernels import fit_cuda as KF

    ref = None
    rows = []
    for name in ["fit_cuda"] + variants:  # the committed kernel first: every variant must equal it
        spec = VARIANTS.get(name, VARIANTS["default"])
        hot = np.int64(hot_rows if spec[6] else n)
        try:
            if name == "fit_cuda":
                kern = KF.batch_pressure_pair if kind == "pair" else KF.batch_pressure
            else:
                kern = (make_pair if kind == "pair" else make_single)(*spec[:6])
            t_b = cuda.to_device(np.zeros(shape, dtype=dtype))
            f_s, f_i, f_r = cuda.to_device(s0), cuda.to_device(i0), cuda.to_device(r0)
            grid = (nblk, 1)
            args = (prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], t_a, t_b, f_s, f_i,
                    f_r, beta_i, beta_r, 0, count, partial)
            if name == "fit_cuda":
                args = args + (() if kind == "pair" else (0,))
            else:
                args = args + ((hot,) if kind == "pair" else (0, hot))

            def launch(kern=kern, args=args, grid=grid):
                kern[grid, tpb](*args)

            if ncu:  # one launch from the initial state per variant: the profiler times it
                launch()
                cuda.synchronize()
                ms = float("nan")
            else:
                ms = _timed(launch, repeats)
                f_s.copy_to_device(s0)
                f_i.copy_to_device(i0)
                f_r.copy_to_device(r0)
                launch()
                cuda.synchronize()
            host = np.concatenate([t_b.copy_to_host().ravel(), f_s.copy_to_host().ravel(),
                                   f_i.copy_to_host().ravel(), f_r.copy_to_host().ravel(),
                                   partial.copy_to_host().ravel()])
            ref = host if ref is None else ref
            same = host.tobytes() == ref.tobytes()
            gathered = groups * lanes * np.dtype(dtype).itemsize * graph.m
            rows.append({"kind": kind, "variant": name, "ms": ms, "identical": same, "hot_rows": int(hot),
                         "gathered_GBps": gathered / ms / 1e6})
            log(f"  {kind:8s} {name:18s} {ms:8.3f} ms  identical {same}  hot rows {int(hot):>9,}  "
                f"gathered {gathered / ms / 1e6:6.0f} GB/s")
            del t_b, f_s, f_i, f_r
        except Exception as exc:  # a variant that does not compile is reported, not fatal
            log(f"  {kind:8s} {name:18s} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
    return rows


def main(argv=None) -> int:
    from gpu_scale import make_graph

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=["orkut", "livejournal"])
    ap.add_argument("--kinds", nargs="+", default=["pair", "single", "narrow64"])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--ncu", action="store_true", help="one launch per variant, for a profiler")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, flush=True)

    for preset in args.presets:
        graph, _, _ = make_graph(preset, args.seed)
        log(f"{preset}: n={graph.n} arcs={graph.m}")
        for kind in args.kinds:
            fit_probe(graph, kind, args.repeats, log, args.ncu, args.variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
