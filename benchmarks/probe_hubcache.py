"""Probe: the Battus-Z pull step with the most-gathered marginals held in shared memory.

The pull step of Battus-Z is bound by L2 sector requests, about one per arc
(docs/benchmarks.md, "Profiles and L2 cache hints"). Marginals are stored in
gather order (most-gathered source first), so the first ``K`` values are the
hubs' and serve a fixed share of all gathers. This probe compiles a copy of
:func:`battus.kernels.infer_cuda.pressure_binned` run by a persistent grid
whose blocks first copy ``f_i[:K]`` to shared memory and then take the
binned kernel's blocks (as virtual blocks of the backend's thread count) in
turn; a gather below ``K`` reads shared memory. Hub chunks write one partial
per warp, summed in warp order, which is the committed kernel's order, so
every log-pressure must equal the committed step's bit for bit (checked).

    PYTHONPATH=src python3 benchmarks/probe_hubcache.py --presets orkut livejournal

Prints, per preset and variant (real block size, cache KiB): the median of
20 pull steps (CUDA events), the share of arcs whose source is cached, and
whether the output equals the committed step's.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from battus.kernels.cuda_common import WARP, cuda, warp_sum  # noqa: E402


@cuda.jit(device=True)
def _load(cache, f_i, j, n_cached):
    if j < n_cached:
        return cache[j]
    return f_i[j]


@cuda.jit(device=True)
def _log_sum_cached(indices, f_i, cache, n_cached, beta, lo, hi, step):
    """infer_cuda._log_sum with a gather below ``n_cached`` served from shared memory."""
    acc = 0.0
    zero = np.float32(0.0)
    e = lo
    while e < hi:
        e1 = e + step
        e2 = e + 2 * step
        e3 = e + 3 * step
        x0 = _load(cache, f_i, indices[e], n_cached)
        x1 = _load(cache, f_i, indices[e1], n_cached) if e1 < hi else zero
        x2 = _load(cache, f_i, indices[e2], n_cached) if e2 < hi else zero
        x3 = _load(cache, f_i, indices[e3], n_cached) if e3 < hi else zero
        acc += math.log1p(-beta * x0)
        acc += math.log1p(-beta * x1)
        acc += math.log1p(-beta * x2)
        acc += math.log1p(-beta * x3)
        e += 4 * step
    return acc


@cuda.jit
def pressure_cached(indptr, indices, f_i, beta_i, log_rho, thread_verts, warp_verts, hub_start, hub_end,
                    warp_partial, n_thread_blocks, n_warp_blocks, n_virtual, vdim, n_cached):
    cache = cuda.shared.array(0, dtype=np.float32)
    tid = cuda.threadIdx.x
    bdim = cuda.blockDim.x
    i = tid
    while i < n_cached:
        cache[i] = f_i[i]
        i += bdim
    cuda.syncthreads()
    per = bdim // vdim
    vtid = tid % vdim
    lane = tid % WARP
    vb = cuda.blockIdx.x * per + tid // vdim
    while vb < n_virtual:
        block = vb
        if block < n_thread_blocks:
            k = block * vdim + vtid
            if k < thread_verts.shape[0]:
                u = thread_verts[k]
                log_rho[u] = _log_sum_cached(indices, f_i, cache, n_cached, beta_i, indptr[u], indptr[u + 1], 1)
        else:
            block -= n_thread_blocks
            if block < n_warp_blocks:
                k = block * (vdim // WARP) + vtid // WARP
                acc = 0.0
                if k < warp_verts.shape[0]:
                    u = warp_verts[k]
                    acc = _log_sum_cached(indices, f_i, cache, n_cached, beta_i, indptr[u] + lane, indptr[u + 1],
                                          WARP)
                acc = warp_sum(acc)
                if lane == 0 and k < warp_verts.shape[0]:
                    log_rho[warp_verts[k]] = acc
            else:
                chunk = block - n_warp_blocks
                acc = _log_sum_cached(indices, f_i, cache, n_cached, beta_i, hub_start[chunk] + vtid,
                                      hub_end[chunk], vdim)
                acc = warp_sum(acc)
                if lane == 0:
                    warp_partial[chunk * (vdim // WARP) + vtid // WARP] = acc
        vb += cuda.gridDim.x * per


@cuda.jit
def finish_hubs_warps(hub_verts, hub_ptr, warp_partial, warps, log_rho):
    """finish_hubs over per-warp partials: each chunk's warps summed in order from 0.0 (the committed
    kernel's chunk total), then the chunks in order."""
    h = cuda.grid(1)
    if h < hub_verts.shape[0]:
        acc = 0.0
        for c in range(hub_ptr[h], hub_ptr[h + 1]):
            total = 0.0
            for w in range(warps):
                total += warp_partial[c * warps + w]
            acc += total
        log_rho[hub_verts[h]] = acc


def _allow_shared(kernel, nbytes: int) -> None:
    from numba.cuda.cudadrv.driver import binding, driver

    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    for overload in kernel.overloads.values():
        cufunc = overload._codelibrary.get_cufunc()
        driver.cuKernelSetAttribute(attr, int(nbytes), cufunc.handle, cuda.get_current_device().id)


def _median_ms(launch, repeats: int = 20) -> float:
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


def probe(preset: str, variants, log) -> None:
    from gpu_scale import make_graph

    from battus.backends.cuda import CUDABackend
    from battus.problem import Observations, Problem

    graph, _, _ = make_graph(preset, 0)
    n = graph.n
    obs = Observations(times=np.array([1]), states=np.zeros((1, n), dtype=np.uint8))
    problem = Problem(graph, "si", 1, min(100, n), obs)
    be = CUDABackend()
    prep = be.prepare(problem)
    rng = np.random.default_rng(0)
    f_i = cuda.to_device(rng.random(n).astype(np.float32) * 0.01)
    beta = np.float32(0.1)
    ref = cuda.device_array(n, dtype=np.float32)
    base_ms = _median_ms(lambda: be._pressure_step(prep, f_i, beta, ref))
    expected = ref.copy_to_host()
    gathered = np.bincount(prep.gather_indices.copy_to_host(), minlength=n)
    log(f"{preset}: n={n} arcs={graph.m}; committed binned step {base_ms:.3f} ms")
    b = prep.bins
    vdim = be.threads
    warps = vdim // WARP
    n_virtual = b["n_thread_blocks"] + b["n_warp_blocks"] + b["n_hub_chunks"]
    warp_partial = cuda.device_array(max(1, b["n_hub_chunks"] * warps), dtype=np.float64)
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    for tpb, cache_kib in variants:
        n_cached = min(n, cache_kib * 1024 // 4)
        nbytes = n_cached * 4
        per_sm = max(1, min(2048 // tpb, (228 * 1024) // (nbytes + 1024)))
        grid = sms * per_sm
        out = cuda.device_array(n, dtype=np.float32)
        args = (prep.indptr, prep.gather_indices, f_i, beta, out, b["thread_verts"], b["warp_verts"],
                b["hub_start"], b["hub_end"], warp_partial, b["n_thread_blocks"], b["n_warp_blocks"], n_virtual,
                vdim, n_cached)
        kernel = pressure_cached.specialize(*args)
        _allow_shared(kernel, max(nbytes, 1))

        def launch(kernel=kernel, args=args, grid=grid, tpb=tpb, nbytes=nbytes, out=out):
            kernel[grid, tpb, 0, nbytes](*args)
            if b["n_hubs"]:
                finish_hubs_warps[max(1, -(-b["n_hubs"] // 256)), 256](b["hub_verts"], b["hub_ptr"], warp_partial,
                                                                     warps, out)

        ms = _median_ms(launch)
        same = out.copy_to_host().tobytes() == expected.tobytes()
        share = gathered[:n_cached].sum() / max(1, gathered.sum())
        log(f"  block {tpb:4d}, cache {cache_kib:3d} KiB ({n_cached:6d} values, {share:5.1%} of gathers), "
            f"{grid} blocks: {ms:.3f} ms ({ms / base_ms:.2f}x committed), identical {same}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["orkut", "livejournal"])
    args = ap.parse_args(argv)
    variants = [(1024, 0), (1024, 44), (1024, 96), (1024, 200), (512, 0), (512, 44), (512, 96), (256, 0),
                (256, 44)]
    for preset in args.presets:
        probe(preset, variants, lambda msg: print(msg, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
