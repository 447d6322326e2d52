"""Battus-C benchmark: time the causal decoder adds to Battus-Z on the CPU benchmark graph.

Same problem as ``benchmarks/cpu.py`` (directed uniform random graph, default
200,000 vertices and 2,000,000 arcs, SIR, T = 40, 100 initial infections,
rates (.1, .1), schedule {T/2, T}). Battus-Z is timed as ``reconstruct``'s
algorithm time; the decoder's added time is measured two ways: the
difference of the two pipelines' algorithm times, and ``causal_decode``
alone on Battus-Z's posteriors and hitting times (best of ``--repeat``).
Prints violations before/after and a Markdown row.

    python benchmarks/causal.py [--n 200000] [--m 2000000] [--T 40] [--repeat 3]
"""

from __future__ import annotations

import argparse
import platform
import time

import numba
import numpy as np

from battus.backends import CPUBackend
from battus.causal import causal_decode
from battus.graph import from_arcs
from battus.infer import method_options, reconstruct
from battus.problem import Problem, observe, schedule_times
from battus.score import hermes_score
from battus.simulate import simulate


def build_problem(n: int, m: int, T: int, seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    graph = from_arcs(rng.integers(0, n, m), rng.integers(0, n, m), directed=True, n=n)
    truth = simulate(graph, "sir", T, 100, 0.1, 0.1, seed=seed)
    return Problem(graph=graph, model="sir", T=T, n0=100,
                   observations=observe(truth, schedule_times(T)), truth=truth, name="cpu-bench")


def best_of(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--m", type=int, default=2_000_000)
    parser.add_argument("--T", type=int, default=40)
    parser.add_argument("--seed", type=int, default=123456789)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    problem = build_problem(args.n, args.m, args.T, args.seed)
    print(f"graph n={problem.n} arcs={problem.graph.m} T={problem.T}; "
          f"{platform.processor() or platform.machine()}, {numba.get_num_threads()} Numba threads", flush=True)
    plain, causal = method_options("battus-z"), method_options("battus-z", causal=True)
    reconstruct(problem, plain)  # warm-up (compilation)
    reconstruct(problem, causal)
    z_times, c_times = [], []
    for _ in range(args.repeat):  # interleaved so both see the same machine state
        z = reconstruct(problem, plain)
        c = reconstruct(problem, causal)
        z_times.append(z.algorithm_seconds)
        c_times.append(c.algorithm_seconds)
    t_z, t_c = min(z_times), min(c_times)

    backend = CPUBackend()
    prep = backend.prepare(problem)
    rho = backend.pressures(prep, problem.prior, 0.1, 0.1, False)
    gamma = backend.posteriors(prep, rho, problem.prior, 0.1, True)
    t_inf, t_rec = backend.hitting_times(prep, gamma, "threshold", 0.65, True, True)
    t_decoder, (_, _, extras) = best_of(lambda: causal_decode(backend, prep, problem, gamma, t_inf, t_rec),
                                        args.repeat)

    sz = hermes_score(problem.truth, z.states, "sir")
    sc = hermes_score(problem.truth, c.states, "sir")
    ev = extras["causal_events"]
    print(f"Battus-Z algorithm time      {t_z:8.3f} s  (runs: {', '.join(f'{x:.3f}' for x in z_times)})")
    print(f"Battus-C algorithm time      {t_c:8.3f} s  (runs: {', '.join(f'{x:.3f}' for x in c_times)})")
    print(f"difference                   {t_c - t_z:8.3f} s  = {100 * (t_c - t_z) / t_z:.1f}% of Battus-Z")
    print(f"causal_decode alone          {t_decoder:8.3f} s  = {100 * t_decoder / t_z:.1f}% of Battus-Z")
    print(f"violations {extras['causal_violations_before']} -> {extras['causal_violations']} of {ev} events "
          f"({100 * extras['causal_violations_before'] / ev:.2f}% -> {100 * extras['causal_violations'] / ev:.2f}%), "
          f"forced {extras['causal_violations_forced']}, moved {extras['causal_vertices_moved']}, "
          f"rounds {extras['causal_rounds']}")
    print(f"F1 {sz['f1']:.4f} -> {sc['f1']:.4f}, NRMSE {sz['nrmse']:.4f} -> {sc['nrmse']:.4f}")
    print()
    print("| graph | Battus-Z (s) | Battus-C (s) | decoder alone (s) | added | CV before -> after |")
    print("|---|---|---|---|---|---|")
    print(f"| n={problem.n:,} arcs={problem.graph.m:,} T={problem.T} SIR | {t_z:.3f} | {t_c:.3f} | {t_decoder:.3f} "
          f"| {100 * t_decoder / t_z:.1f}% | {100 * extras['causal_violations_before'] / ev:.2f}% -> "
          f"{100 * extras['causal_violations'] / ev:.2f}% |")


if __name__ == "__main__":
    main()
