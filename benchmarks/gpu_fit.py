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

``profile``: one fit per preset, model and variant (the ``time`` mode's truth) with a CUDA
event pair around every fitting-kernel launch, summed per kernel and per pass phase (phase k:
after the pass's k-th reset to a snapshot; 0 from the prior). The events add to the fit's time,
and a small kernel's interval can include a wait for the host's next launch, so take the large
kernels' sums as where the time goes, not as the fit's time.

    PYTHONPATH=src python3 benchmarks/gpu_fit.py time --presets orkut --models si sir \
        --variant base '{}' --variant narrow '{"narrow_lanes": 8}' --json fit.json
    PYTHONPATH=src python3 benchmarks/gpu_fit.py digest --json digest.json
    PYTHONPATH=src python3 benchmarks/gpu_fit.py profile --presets livejournal --models sir
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
    from battus.backends.cuda import CUDABackend, CUDASettings
    from battus.warmup import warm_up

    backend = CUDABackend(CUDASettings.from_dict(kwargs))
    warm_up(backend)
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


def _problems(args):
    """(preset, model, problem) of the ``time`` mode's truths, graph by graph."""
    from gpu_scale import make_graph

    from battus.problem import Problem, observe, schedule_times
    from battus.simulate import simulate

    for preset in args.presets:
        graph, gen_s, _ = make_graph(preset, args.seed)
        print(f"{preset}: n={graph.n} arcs={graph.m} (generated in {gen_s:.1f}s)", flush=True)
        for model in args.models:
            truth = simulate(graph, model, 40, 100, 0.1, 0.1, seed=args.seed + 1, backend="cuda")
            yield preset, model, Problem(graph, model, 40, 100, observe(truth, schedule_times(40)), truth)


def _warm_backends(args) -> dict:
    backends = {}
    for name, kw in args.variant:
        backends[name] = _backend(json.loads(kw))
        warm_fit(backends[name])
    return backends


def time_mode(args) -> dict:
    from battus.fit import fit_rates

    backends = _warm_backends(args)
    out = {"device": next(iter(backends.values())).device, "rows": []}
    print(f"device {out['device']}", flush=True)
    for preset, model, problem in _problems(args):
        for name in backends:
            be = backends[name]
            prep = be.prepare(problem)
            be.synchronize()
            samples = []
            for _ in range(args.repeats):
                be.memory.reset_peak()
                t0 = time.perf_counter()
                beta_i, beta_r, trace = fit_rates(be, prep, problem)
                be.synchronize()
                samples.append(time.perf_counter() - t0)
            row = {"preset": preset, "model": model, "variant": name, "seconds": samples,
                   "beta": [beta_i, beta_r], "objectives": [float(r["objective"]).hex() for r in trace],
                   "peak_device_bytes": be.memory.peak_bytes}
            out["rows"].append(row)
            print(f"  {preset} {model} {name:10s} fit {min(samples):8.3f} s (of {len(samples)})  "
                  f"beta ({beta_i:.6g}, {beta_r:.6g})  peak {be.memory.peak_bytes / 2**30:.2f} GiB  "
                  f"objective {trace[-1]['objective']!r}", flush=True)
            del prep
    return out


class _TimedLaunches:
    """Every launch of the fitting kernels between a pair of CUDA events, by kernel and phase."""

    KERNELS = ("batch_fill", "batch_pressure", "batch_pressure_pair", "batch_pressure_pair_two_lanes",
               "batch_finish_split", "batch_advance_held", "batch_score_reset", "batch_accumulate")

    def __init__(self) -> None:
        from battus.kernels import fit_cuda

        self.module = fit_cuda
        self.kernels = {name: getattr(fit_cuda, name) for name in self.KERNELS if hasattr(fit_cuda, name)}
        self.records: list = []
        self.phase = 0

    def __enter__(self):
        for name, kern in self.kernels.items():
            setattr(self.module, name, self._wrap(name, kern))
        return self

    def __exit__(self, *exc) -> None:
        for name, kern in self.kernels.items():
            setattr(self.module, name, kern)

    def _wrap(self, name: str, kern):
        from numba import cuda

        timed = self

        class Configured:
            def __getitem__(self, config):
                launch = kern[config]

                def call(*args):
                    if name == "batch_fill":  # a pass starts from the prior
                        timed.phase = 0
                    start, stop = cuda.event(), cuda.event()
                    start.record()
                    launch(*args)
                    stop.record()
                    timed.records.append((name, timed.phase, start, stop))
                    if name == "batch_score_reset":
                        timed.phase += 1
                return call

        return Configured()

    def summary(self) -> dict:
        seconds: dict = {}
        launches: dict = {}
        for name, phase, start, stop in self.records:
            key = f"{name} phase {phase}"
            seconds[key] = seconds.get(key, 0.0) + start.elapsed_time(stop) / 1e3
            launches[key] = launches.get(key, 0) + 1
        return {key: {"seconds": seconds[key], "launches": launches[key]}
                for key in sorted(seconds, key=lambda k: -seconds[k])}


def profile_mode(args) -> dict:
    from battus.fit import fit_rates

    backends = _warm_backends(args)
    out = {"device": next(iter(backends.values())).device, "rows": []}
    print(f"device {out['device']}", flush=True)
    for preset, model, problem in _problems(args):
        states = problem.observations.states
        counts = [[int(np.count_nonzero(row == s)) for s in range(3)] for row in states]
        print(f"  {preset} {model}: S/I/R at each snapshot {counts}", flush=True)
        for name, be in backends.items():
            prep = be.prepare(problem)
            be.synchronize()
            with _TimedLaunches() as timed:
                t0 = time.perf_counter()
                fit_rates(be, prep, problem)
                be.synchronize()
                wall = time.perf_counter() - t0
            kernels = timed.summary()
            out["rows"].append({"preset": preset, "model": model, "variant": name, "seconds": wall,
                                "snapshot_counts": counts, "kernels": kernels})
            total = sum(k["seconds"] for k in kernels.values())
            print(f"  {preset} {model} {name:10s} fit {wall:8.3f} s with events, kernels {total:.3f} s", flush=True)
            for key, k in kernels.items():
                print(f"      {key:40s} {k['seconds']:8.3f} s  {k['launches']:6d} launches", flush=True)
            del prep
    return out


def digest_mode(args) -> dict:
    import os

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import CANONICAL_FILES, load_canonical

    from battus.pipeline import method_options, reconstruct
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
    ap.add_argument("mode", choices=["time", "digest", "profile"])
    ap.add_argument("--presets", nargs="+", default=["livejournal", "orkut"])
    ap.add_argument("--models", nargs="+", default=["si", "sir"])
    ap.add_argument("--variant", nargs=2, action="append", metavar=("NAME", "KWARGS_JSON"),
                    help="CUDASettings values as JSON (repeatable); default: the defaults")
    ap.add_argument("--backend-kwargs", default="{}", help="digest mode: CUDASettings values as JSON")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if not args.variant:
        args.variant = [("default", "{}")]
    out = {"time": time_mode, "digest": digest_mode, "profile": profile_mode}[args.mode](args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
