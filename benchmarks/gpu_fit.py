"""Fitted-Battus rate search on the GPU: time variants of the CUDA backend and check they agree.

Two modes, each run in its own process so that another checkout of the code
(``PYTHONPATH=old/src``) can be measured the same way:

``time``: for each preset of :data:`battus.synth.SCALE_PRESETS` and model, the
same truth as ``benchmarks/gpu_scale.py`` (T = 40, 100 initial infections,
rates (.1, .1), observed frames {20, 40}); one :func:`battus.fit.fit_rates`
call per backend variant after a warm-up fit on a small graph, timed on the
host after the device finished (the search copies each round's values back,
so it is synchronous), with the fitted rates, every round's objective (hex),
and the backend's peak device memory.

``digest``: the 12 canonical datasets (``BATTUS_SHARED``), Battus-Z and
fitted Battus on the GPU, sha256 of the hitting times and the fitted rates.

    PYTHONPATH=src python3 benchmarks/gpu_fit.py time --presets orkut --models si sir \
        --variant base '{}' --variant narrow '{"narrow_lanes": 8}' --json fit.json
    PYTHONPATH=src python3 benchmarks/gpu_fit.py digest --json digest.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _hash(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(a.tobytes() + str(a.dtype).encode() + str(a.shape).encode())
    return h.hexdigest()[:24]


def _backend(kwargs: dict):
    from battus.backends.cuda import CUDABackend

    backend = CUDABackend(**kwargs)
    backend.warm_up()
    return backend


def warm_fit(backend) -> None:
    """A full-size search (24 x 24 + 4 x 7 x 7) on a small graph: every fitting kernel compiles."""
    from battus.fit import fit_rates
    from battus.problem import Problem, observe, schedule_times
    from battus.simulate import simulate
    from battus.synth import chung_lu

    graph = chung_lu(2000, 20000, seed=1)
    for model in ("si", "sir"):
        truth = simulate(graph, model, 40, 10, 0.1, 0.1, seed=2)
        problem = Problem(graph, model, 40, 10, observe(truth, schedule_times(40)), truth)
        fit_rates(backend, backend.prepare(problem), problem)
    backend.synchronize()


def time_mode(args) -> dict:
    from gpu_scale import make_graph

    from battus.fit import fit_rates
    from battus.problem import Problem, observe, schedule_times
    from battus.simulate import simulate

    variants = [(name, json.loads(kw)) for name, kw in args.variant]
    backends = {}
    for name, kw in variants:
        backends[name] = _backend(kw)
        warm_fit(backends[name])
    out = {"device": next(iter(backends.values())).device, "rows": []}
    print(f"device {out['device']}", flush=True)
    for preset in args.presets:
        graph, gen_s, _ = make_graph(preset, args.seed)
        print(f"{preset}: n={graph.n} arcs={graph.m} (generated in {gen_s:.1f}s)", flush=True)
        for model in args.models:
            truth = simulate(graph, model, 40, 100, 0.1, 0.1, seed=args.seed + 1, backend="cuda")
            problem = Problem(graph, model, 40, 100, observe(truth, schedule_times(40)), truth)
            for name, _ in variants:
                be = backends[name]
                prep = be.prepare(problem)
                be.synchronize()
                samples = []
                for _ in range(args.repeats):
                    be.reset_peak()
                    t0 = time.perf_counter()
                    beta_i, beta_r, trace = fit_rates(be, prep, problem)
                    be.synchronize()
                    samples.append(time.perf_counter() - t0)
                row = {"preset": preset, "model": model, "variant": name, "seconds": samples,
                       "beta": [beta_i, beta_r], "objectives": [float(r["objective"]).hex() for r in trace],
                       "peak_device_bytes": be.peak_bytes}
                out["rows"].append(row)
                print(f"  {preset} {model} {name:10s} fit {min(samples):8.3f} s (of {len(samples)})  "
                      f"beta ({beta_i:.6g}, {beta_r:.6g})  peak {be.peak_bytes / 2**30:.2f} GiB  "
                      f"objective {trace[-1]['objective']!r}", flush=True)
                del prep
    return out


def digest_mode(args) -> dict:
    import os

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import CANONICAL_FILES, load_canonical

    from battus.infer import method_options, reconstruct
    from battus.problem import Problem, observe, schedule_times

    backend = _backend(json.loads(args.backend_kwargs))
    out = {"device": backend.device, "shared": os.environ.get("BATTUS_SHARED"), "digests": {}}
    for name in CANONICAL_FILES:
        c = load_canonical(name)
        problem = Problem(c.graph, c.model, c.T, c.n0, observe(c.truth, schedule_times(c.T)), c.truth, name)
        for method in ("battus-z", "battus"):
            r = reconstruct(problem, method_options(method), backend)
            key = f"{name}/{method}"
            out["digests"][key] = {"times": _hash(r.t_inf, r.t_rec), "beta": [float(r.beta_i).hex(),
                                                                                float(r.beta_r).hex()]}
            print(f"{key:22s} {out['digests'][key]['times']} beta ({r.beta_i:.6g}, {r.beta_r:.6g})", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["time", "digest"])
    ap.add_argument("--presets", nargs="+", default=["livejournal", "orkut"])
    ap.add_argument("--models", nargs="+", default=["si", "sir"])
    ap.add_argument("--variant", nargs=2, action="append", metavar=("NAME", "KWARGS_JSON"),
                    help="a CUDABackend configuration (repeatable); default: the defaults")
    ap.add_argument("--backend-kwargs", default="{}", help="digest mode: CUDABackend keyword arguments")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.mode == "time" and not args.variant:
        args.variant = [("default", "{}")]
    out = time_mode(args) if args.mode == "time" else digest_mode(args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
