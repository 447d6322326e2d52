"""Kernel-level timings on one device: compile options of the hot loops, checked bit for bit.

For each preset (synthetic SNAP-sized graph of :data:`battus.synth.SCALE_PRESETS`):

* one Battus-Z pull step (``pressure_binned`` + ``finish_hubs``) on random
  marginals, for variants of the pull kernel compiled with other options
  (register cap, L1/shared carveout); each variant's log-pressures must equal
  the default kernel's bit for bit;
* one fitting step of a 64-candidate float32 pass (two groups of 32):
  ``batch_pressure`` per group, the pair kernels (one index read for both
  groups; one or two lanes per thread), and compile-option variants; the
  advanced state must be identical.

Median of ``--repeats`` launches timed with CUDA events, after a warm-up.

    PYTHONPATH=src python3 benchmarks/gpu_kernels.py --presets livejournal orkut
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = {  # name: cuda.jit options
    "default": None,
    "maxL1": {"shared_memory_carveout": "MaxL1"},
    "regs32": {"max_registers": 32},
    "regs40": {"max_registers": 40},
    "regs48": {"max_registers": 48},
    "regs64": {"max_registers": 64},
}


def _timed(launch, repeats: int) -> float:
    from numba import cuda

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


def _compile(kernel, options):
    from numba import cuda

    return kernel if options is None else cuda.jit(**options)(kernel.py_func)


def _regs(kernel) -> int:
    try:
        return int(next(iter(kernel.get_regs_per_thread().values())))
    except Exception:
        return -1


def pull_step(graph, repeats: int, log) -> list:
    from numba import cuda

    from battus.backends.cuda import CUDABackend
    from battus.kernels import infer_cuda
    from battus.problem import Observations, Problem

    n = graph.n
    obs = Observations(times=np.array([1]), states=np.zeros((1, n), dtype=np.uint8))
    problem = Problem(graph, "si", 1, min(100, n), obs)
    be = CUDABackend()
    prep = be.prepare(problem)
    b = prep.bins
    tpb = be.threads
    grid = b["n_thread_blocks"] + b["n_warp_blocks"] + b["n_hub_chunks"]
    f_i = cuda.to_device(np.random.default_rng(0).random(n).astype(np.float32) * 0.01)
    beta = np.float32(0.1)
    ref = None
    rows = []
    for name, options in VARIANTS.items():
        kern = _compile(infer_cuda.pressure_binned, options)
        out = cuda.device_array(n, dtype=np.float32)

        def launch(kern=kern, out=out):
            kern[grid, tpb](prep.indptr, prep.gather_indices, f_i, beta, out, b["thread_verts"],
                            b["warp_verts"], b["hub_start"], b["hub_end"], b["hub_vertex"], b["partial"],
                            b["n_thread_blocks"], b["n_warp_blocks"], prep.obs_states[0], False)
            if b["n_hubs"]:
                infer_cuda.finish_hubs[max(1, -(-b["n_hubs"] // tpb)), tpb](b["hub_verts"], b["hub_ptr"],
                                                                             b["partial"], out)

        ms = _timed(launch, repeats)
        host = out.copy_to_host()
        ref = host if ref is None else ref
        same = host.tobytes() == ref.tobytes()
        rows.append({"kernel": "pull", "variant": name, "ms": ms, "regs": _regs(kern), "identical": same,
                     "GBps_csr": (4 * graph.m + 8 * n) / ms / 1e6})
        log(f"  pull  {name:8s} {ms:7.3f} ms  regs {rows[-1]['regs']:3d}  identical {same}  "
            f"CSR {rows[-1]['GBps_csr']:.0f} GB/s")
    return rows


def fit_step(graph, repeats: int, log, compile_variants: bool = True) -> list:
    from numba import cuda

    from battus.backends.cuda import CUDABackend
    from battus.kernels import fit_cuda
    from battus.kernels.cuda_common import WARP
    from battus.problem import Observations, Problem

    n = graph.n
    obs = Observations(times=np.array([1]), states=np.zeros((1, n), dtype=np.uint8))
    problem = Problem(graph, "sir", 1, min(100, n), obs)
    be = CUDABackend()
    prep = be.prepare(problem)
    it = prep.items
    groups, count = 2, 2 * WARP
    rng = np.random.default_rng(1)
    shape = (groups, n, WARP)
    i0 = (rng.random(shape) * 0.01).astype(np.float32)
    s0 = (0.9 + 0.1 * rng.random(shape)).astype(np.float32)
    r0 = (rng.random(shape) * 0.01).astype(np.float32)
    betas = np.linspace(0.01, 0.5, count).astype(np.float32)
    # the neighbours' terms log1p(-beta fI) (on the host: any values will do for a timing)
    t_a = cuda.to_device(np.log1p(-betas.reshape(groups, 1, WARP) * i0).astype(np.float32))
    beta_i = cuda.to_device(betas)
    beta_r = cuda.to_device(np.linspace(0.3, 0.02, count))
    partial = cuda.device_array((max(1, it["n_slots"]), groups, WARP), dtype=np.float64)
    tpb = be.threads
    nblk = -(-it["n_items"] // (tpb // WARP))
    # every vertex looks at its f_S before gathering (fit_cuda._absorbed); none is absorbed in this
    # state, so every row gathers every arc
    variants = [("single", fit_cuda.batch_pressure, None), ("pair", fit_cuda.batch_pressure_pair, None),
                ("pair-two-lanes", fit_cuda.batch_pressure_pair_two_lanes, None)]
    for name, options in VARIANTS.items():
        if options is not None and compile_variants:
            variants.append((f"pair-{name}", fit_cuda.batch_pressure_pair, options))
    ref = None
    rows = []
    for name, kernel, options in variants:
        kern = _compile(kernel, options)
        t_b = cuda.to_device(np.zeros(shape, dtype=np.float32))
        f_s, f_i, f_r = cuda.to_device(s0), cuda.to_device(i0), cuda.to_device(r0)
        two_lanes = kernel is fit_cuda.batch_pressure_pair_two_lanes
        read = t_a.view(np.complex64) if two_lanes else t_a  # the two-lane kernel reads lane pairs as one
        args = (prep.gather_indices, it["vertex"], it["start"], it["end"], it["slot"], read, t_b, f_s, f_i, f_r,
                beta_i, beta_r, 0, count, partial)
        single = kernel is fit_cuda.batch_pressure
        grid = (-(-it["n_items"] // (tpb // (WARP // 2))) if two_lanes else nblk, groups if single else groups // 2)
        tail = (0,) if single else ()  # batch_pressure's first group g0

        def launch(kern=kern, args=args, f_s=f_s, f_i=f_i, f_r=f_r, grid=grid, tail=tail):
            f_s.copy_to_device(s0)
            f_i.copy_to_device(i0)
            f_r.copy_to_device(r0)
            kern[grid, tpb](*args, *tail)

        # the kernel alone (the state drifts from launch to launch; the timing does not care)
        ms_k = _timed(lambda kern=kern, args=args, grid=grid, tail=tail: kern[grid, tpb](*args, *tail), repeats)
        launch()
        cuda.synchronize()
        host = np.concatenate([t_b.copy_to_host().ravel(), f_s.copy_to_host().ravel(), f_i.copy_to_host().ravel(),
                               f_r.copy_to_host().ravel(), partial.copy_to_host().ravel()])
        ref = host if ref is None else ref
        same = host.tobytes() == ref.tobytes()
        digest = hashlib.sha256(host.tobytes()).hexdigest()[:16]  # to compare builds of the kernels
        gathered = groups * WARP * 4 * graph.m
        rows.append({"kernel": "fit", "variant": name, "ms": ms_k, "regs": _regs(kern), "identical": same,
                     "sha256": digest, "GBps_gathered": gathered / ms_k / 1e6})
        log(f"  fit   {name:14s} {ms_k:7.3f} ms  regs {rows[-1]['regs']:3d}  identical {same}  "
            f"gathered rows {rows[-1]['GBps_gathered']:.0f} GB/s  state {digest}")
    return rows


def main(argv=None) -> int:
    from gpu_scale import make_graph

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=["livejournal", "orkut"])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-fit", action="store_true")
    ap.add_argument("--skip-pull", action="store_true")
    ap.add_argument("--no-compile-variants", action="store_true",
                    help="fit step: only the kernels as compiled by the package (each option set compiles anew)")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, flush=True)

    out = []
    for preset in args.presets:
        graph, _, _ = make_graph(preset, args.seed)
        log(f"{preset}: n={graph.n} arcs={graph.m}")
        rows = [] if args.skip_pull else pull_step(graph, args.repeats, log)
        if not args.skip_fit:
            rows += fit_step(graph, args.repeats, log, compile_variants=not args.no_compile_variants)
        out.append({"preset": preset, "rows": rows})
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
