"""GPU scaling benchmark: synthetic stand-ins of the paper's SNAP graphs on one device.

For each preset of :data:`battus.synth.SCALE_PRESETS` (Web-Stanford, Web-Google,
Orkut, LiveJournal sizes, Chung-Lu power-law degrees), simulate SI and SIR
with T=40, 100 initial infections and (beta_i, beta_r) = (.1, .1) on the GPU,
observe the benchmark schedule {20, 40}, and time Battus-Z and Battus (fitted)
on the CUDA backend: the algorithm interval (fit + pressures + forward-backward
+ decode, after the graph upload; the same sequence as
:func:`battus.pipeline.reconstruct`) measured with CUDA events, median of
``--repeats`` runs after one warm-up run. Also reported: peak device memory of
the algorithm's arrays (graph included), per-phase times, and the ratio of the
median to a bytes-moved floor (bytes the kernels must stream / measured
device-to-device copy bandwidth).

    python benchmarks/gpu_scale.py --presets web-stanford web-google orkut livejournal \
        --repeats 5 --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time

import numpy as np


def copy_bandwidth(nbytes: int = 1 << 30, repeats: int = 10) -> dict:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus written.

    Measured twice: the driver's copy (cuMemcpyDtoD through Numba) and, where
    cupy is installed, an elementwise copy kernel; the floor uses the larger,
    so the ratios are not flattered by a slow copy.
    """
    from numba import cuda

    src = cuda.to_device(np.random.default_rng(0).random(nbytes // 8))
    dst = cuda.device_array(nbytes // 8, dtype=np.float64)
    dst.copy_to_device(src)
    times = []
    for _ in range(repeats):
        start, stop = cuda.event(), cuda.event()
        start.record()
        dst.copy_to_device(src)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    out = {"driver_copy": 2 * nbytes / statistics.median(times)}
    del src, dst
    try:
        import cupy
    except ImportError:
        return out
    a = cupy.random.random(nbytes // 8)
    b = cupy.empty_like(a)
    b[...] = a
    times = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    out["kernel_copy"] = 2 * nbytes / statistics.median(times)
    del a, b
    cupy.get_default_memory_pool().free_all_blocks()
    return out


def inference_floor_bytes(n: int, m: int, T: int, sir: bool, n_obs: int) -> int:
    """Bytes pressures + forward-backward + decode must stream at least once.

    Per pressure frame: the CSR (4m indices + 8n row pointers), the infected
    marginal gathered (4n, cached), the state read and written (16n) and the
    log-pressure written (4n). Forward-backward reads the pressures and writes
    three posteriors (16 bytes per vertex-frame); decoding reads one (SI) or two
    (SIR) posterior frames per vertex-frame, the observations, and writes two
    int64 hitting times.
    """
    frames = T + 1
    pressures = frames * (4 * m + 8 * n + 4 * n + 16 * n + 4 * n)
    smoothing = frames * 16 * n
    decode = frames * (8 if sir else 4) * n + n_obs * n + 16 * n
    return pressures + smoothing + decode


def fit_floor_bytes(m: int, T_fit: int, candidates: int) -> int:
    """Each candidate's infected marginal gathered once per arc per step (4 bytes)."""
    return candidates * m * T_fit * 4


def candidates_of(settings, sir: bool) -> int:
    per_round = [settings.grid_points] + [settings.refine_points] * settings.refine_rounds
    return sum(p * p if sir else p for p in per_round)


def run_algorithm(backend, prep, problem, options):
    """The algorithm interval of battus.pipeline.reconstruct, with an event per phase."""
    from numba import cuda

    from battus.fit import fit_rates

    events = [cuda.event() for _ in range(5)]
    events[0].record()
    if options.fit:
        beta_i, beta_r, _ = fit_rates(backend, prep, problem, options.fit_settings)
    else:
        beta_i, beta_r = options.beta_i, options.beta_r
    if problem.model != "sir":
        beta_r = 0.0
    events[1].record()
    rho = backend.pressures(prep, problem.prior, beta_i, beta_r, options.reset)
    events[2].record()
    gamma = backend.posteriors(prep, rho, problem.prior, beta_r, options.backward)
    events[3].record()
    t_inf, t_rec = backend.hitting_times(prep, gamma, options.decoder, options.tau,
                                         problem.model == "sir", options.projection)
    events[4].record()
    events[4].synchronize()
    phases = [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(4)]
    return sum(phases), dict(zip(("fit", "pressures", "smoothing", "decode"), phases, strict=True)), (
        beta_i, beta_r, t_inf, t_rec)


def pressure_step_times(graph, repeats: int = 20) -> dict:
    """One mean-field pull step (ms): every vertex in the thread bin (one thread per vertex, whatever
    its degree) against the default degree bins."""
    from numba import cuda

    from battus.backends.cuda import CUDABackend, CUDASettings
    from battus.problem import Observations, Problem

    n = graph.n
    obs = Observations(times=np.array([1]), states=np.zeros((1, n), dtype=np.uint8))
    problem = Problem(graph, "si", 1, min(100, n), obs)
    out = {}
    rng = np.random.default_rng(0)
    f_i = cuda.to_device(rng.random(n).astype(np.float32) * 0.01)
    everything_threads = CUDASettings(warp_min_degree=1 << 40, hub_min_degree=1 << 40)
    for kernel, settings in (("thread", everything_threads), ("binned", CUDASettings())):
        be = CUDABackend(settings)
        prep = be.prepare(problem)
        log_rho = cuda.device_array(n, dtype=np.float32)
        be.pressure_step(prep, f_i, np.float32(0.1), log_rho, None)
        cuda.synchronize()
        times = []
        for _ in range(repeats):
            start, stop = cuda.event(), cuda.event()
            start.record()
            be.pressure_step(prep, f_i, np.float32(0.1), log_rho, None)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        out[kernel] = statistics.median(times)
        del prep
    return out


def sweep_bins(preset: str, seed: int, repeats: int, log) -> list:
    """Battus-Z SIR time for several degree-bin settings of the CUDA backend."""
    from battus.backends.cuda import CUDABackend, CUDASettings
    from battus.pipeline import method_options
    from battus.problem import Problem, observe, schedule_times
    from battus.simulate import simulate
    from battus.warmup import warm_up

    graph, _, _ = make_graph(preset, seed)
    T = 40
    truth = simulate(graph, "sir", T, 100, 0.1, 0.1, seed=seed + 1, backend="cuda")
    problem = Problem(graph, "sir", T, 100, observe(truth, schedule_times(T)), truth)
    options = method_options("battus-z")
    rows = []
    for warp_min in (16, 32):
        for hub_min in (512, 1024, 4096):
            for hub_chunk in (2048, 8192):
                backend = CUDABackend(CUDASettings(warp_min_degree=warp_min, hub_min_degree=hub_min,
                                                   hub_chunk=hub_chunk))
                warm_up(backend)
                prep = backend.prepare(problem)
                run_algorithm(backend, prep, problem, options)
                samples = [run_algorithm(backend, prep, problem, options)[0] for _ in range(repeats)]
                row = {"preset": preset, "warp_min_degree": warp_min, "hub_min_degree": hub_min,
                       "hub_chunk": hub_chunk, "median_s": statistics.median(samples)}
                rows.append(row)
                log(f"  sweep {preset} warp>={warp_min} hub>={hub_min} chunk={hub_chunk}: "
                    f"{row['median_s'] * 1e3:.2f} ms")
                backend.close()
            del prep, backend
    return rows


def make_graph(preset: str, seed: int):
    from battus.synth import scale_graph

    try:
        import cupy

        xp = cupy
    except ImportError:
        xp = None
    t0 = time.perf_counter()
    graph = scale_graph(preset, seed=seed, xp=xp)
    if xp is not None:
        xp.get_default_memory_pool().free_all_blocks()
    return graph, time.perf_counter() - t0, "cupy" if xp is not None else "numpy"


def bench_preset(preset: str, repeats: int, seed: int, bandwidth: float, log,
                 models=("si", "sir"), methods=("battus-z", "battus"), device_sets=((),)) -> dict:
    from battus.backends.cuda import CUDABackend
    from battus.pipeline import method_options
    from battus.problem import Problem, observe, schedule_times
    from battus.simulate import simulate
    from battus.warmup import warm_up

    T, n0, rate = 40, 100, 0.1
    graph, gen_seconds, gen_with = make_graph(preset, seed)
    deg = graph.in_degree()
    row = {"preset": preset, "n": graph.n, "arcs": graph.m, "max_in_degree": int(deg.max()),
           "generate_seconds": gen_seconds, "generated_with": gen_with, "runs": {}}
    log(f"{preset}: n={graph.n} arcs={graph.m} max in-degree {int(deg.max())} "
        f"(generated in {gen_seconds:.1f}s with {gen_with})")
    row["pressure_step_ms"] = pressure_step_times(graph)
    log(f"  one pull step: {row['pressure_step_ms']}")
    times = schedule_times(T)
    for model in models:
        t0 = time.perf_counter()
        truth = simulate(graph, model, T, n0, rate, rate, seed=seed + 1, backend="cuda")
        log(f"  simulated {model} in {time.perf_counter() - t0:.2f}s: "
            f"{int((truth[-1] > 0).sum())} ever infected")
        problem = Problem(graph, model, T, n0, observe(truth, times), truth, f"{preset}-{model}")
        for method, devices in ((m, d) for m in methods for d in device_sets):
            options = method_options(method)
            backend = CUDABackend(devices=devices or None)
            warm_up(backend)
            prep = backend.prepare(problem)
            backend.synchronize()
            run_algorithm(backend, prep, problem, options)  # warm-up run
            backend.memory.reset_peak()
            samples, phases = [], []
            for _ in range(repeats):
                total, phase, result = run_algorithm(backend, prep, problem, options)
                samples.append(total)
                phases.append(phase)
            median = statistics.median(samples)
            floor = inference_floor_bytes(graph.n, graph.m, T, model == "sir", len(times))
            if options.fit:
                floor += fit_floor_bytes(graph.m, int(times[-1]),
                                         candidates_of(options.fit_settings, model == "sir"))
            floor_seconds = floor / bandwidth
            key = run_key(method, model, devices)
            row["runs"][key] = {
                "median_s": median, "samples_s": samples,
                "phases_median_s": {k: statistics.median(p[k] for p in phases) for k in phases[0]},
                "peak_device_bytes": backend.memory.peak_bytes, "floor_bytes": floor,
                "floor_s": floor_seconds, "ratio_to_floor": median / floor_seconds,
                "beta": [float(result[0]), float(result[1])],
                # compare across code versions: equal fitted rates and hitting times
                "hitting_times_sha256": hashlib.sha256(backend.to_host(result[2]).tobytes()
                                                       + backend.to_host(result[3]).tobytes()).hexdigest(),
            }
            log(f"  {key:14s} median {median * 1e3:9.2f} ms  peak {backend.memory.peak_bytes / 2**30:6.2f} GiB"
                f"  floor {floor_seconds * 1e3:9.2f} ms  ratio {median / floor_seconds:5.2f}"
                f"  phases {row['runs'][key]['phases_median_s']}")
            backend.close()
            del prep, backend
        for method in methods:  # each further GPU set against the first: speed-up and the same results
            first, *others = [run_key(method, model, devices) for devices in device_sets]
            for key in others:
                a, b = row["runs"][first], row["runs"][key]
                same = (a["beta"], a["hitting_times_sha256"]) == (b["beta"], b["hitting_times_sha256"])
                row.setdefault("speedups", {})[key] = {"against": first, "speedup": a["median_s"] / b["median_s"],
                                                       "same_results": same}
                log(f"  {key} against {first}: {a['median_s'] / b['median_s']:.3f}x, "
                    f"same rates and hitting times: {'yes' if same else 'NO'}")
    return row


def run_key(method: str, model: str, devices: tuple[int, ...]) -> str:
    """A run's name in the output: ``battus/sir``, or ``battus/sir@0,1`` on a set of GPUs."""
    return f"{method}/{model}" + (f"@{','.join(map(str, devices))}" if devices else "")


def main(argv=None) -> int:
    from battus.synth import SCALE_PRESETS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=list(SCALE_PRESETS), choices=list(SCALE_PRESETS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--json", default=None, help="write all numbers here")
    ap.add_argument("--models", nargs="+", default=["si", "sir"], choices=["si", "sir"])
    ap.add_argument("--methods", nargs="+", default=["battus-z", "battus"], choices=["battus-z", "battus"])
    ap.add_argument("--devices", nargs="+", default=[], metavar="0,1",
                    help="time each run on each of these GPU sets (a fit spreads over a set; default: "
                         "the current GPU)")
    ap.add_argument("--sweep", action="store_true",
                    help="only time Battus-Z SIR over a grid of degree-bin settings")
    args = ap.parse_args(argv)

    from numba import cuda

    from battus.backends.cuda import CUDABackend

    def log(msg: str) -> None:
        print(msg, flush=True)

    device = CUDABackend().device
    if args.sweep:
        log(f"device {device}")
        rows = [r for preset in args.presets for r in sweep_bins(preset, args.seed, args.repeats, log)]
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"device": device, "sweep": rows}, fh, indent=1)
        return 0
    copies = copy_bandwidth()
    bandwidth = max(copies.values())
    log(f"device {device}; device-to-device copy (read + write): "
        + ", ".join(f"{k} {v / 1e12:.2f} TB/s" for k, v in copies.items()))
    result = {"device": device, "copy_bandwidth_Bps": bandwidth, "copies_Bps": copies,
              "presets": []}
    for preset in args.presets:
        try:
            device_sets = tuple(tuple(int(x) for x in d.split(",")) for d in args.devices) or ((),)
            result["presets"].append(bench_preset(preset, args.repeats, args.seed, bandwidth, log, args.models,
                                                  args.methods, device_sets))
        except Exception as exc:  # keep the other presets' numbers
            log(f"{preset}: FAILED {type(exc).__name__}: {exc}")
            result.setdefault("failed", {})[preset] = repr(exc)
        cuda.current_context().deallocations.clear()
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(result, fh, indent=1)
    log("")
    log("| graph | n | arcs | max in-deg | method/model | median ms | peak GiB | floor ms | ratio |")
    log("|---|---|---|---|---|---|---|---|---|")
    for row in result["presets"]:
        for key, r in row["runs"].items():
            log(f"| {row['preset']} | {row['n']:,} | {row['arcs']:,} | {row['max_in_degree']:,} | {key} | "
                f"{r['median_s'] * 1e3:.1f} | {r['peak_device_bytes'] / 2**30:.2f} | "
                f"{r['floor_s'] * 1e3:.1f} | {r['ratio_to_floor']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
