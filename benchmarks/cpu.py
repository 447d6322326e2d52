"""CPU benchmark: Numba kernels against the plain-numpy reference in the same run.

Synthetic directed graph (default 200,000 vertices, 2,000,000 arcs, uniform
random arcs), SIR, T = 40, 100 initial infections, rates (.1, .1), schedule
{T/2, T}. Reports algorithm time and throughput in arc-steps per second
(arcs x mean-field steps x candidates) for Battus-Z and for fitted Battus,
checks that both implementations decode identical histories, and prints a
Markdown table.

The reference evaluates fit candidates one at a time; timing all 772 of a
SIR search would take tens of minutes, so it is timed on ``--ref-candidates``
of them and its throughput (which is per candidate) compared with the Numba
search's throughput over the whole search.

    python benchmarks/cpu.py [--n 200000] [--m 2000000] [--T 40]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numba
import numpy as np

from battus.backends import CPUBackend
from battus.graph import from_arcs
from battus.pipeline import method_options, reconstruct
from battus.problem import Problem, observe, schedule_times
from battus.simulate import simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import naive as ref  # noqa: E402  (the naive references live beside the tests)


def build_problem(n: int, m: int, T: int, seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    graph = from_arcs(rng.integers(0, n, m), rng.integers(0, n, m), directed=True, n=n)
    truth = simulate(graph, "sir", T, 100, 0.1, 0.1, seed=seed)
    return Problem(graph=graph, model="sir", T=T, n0=100,
                   observations=observe(truth, schedule_times(T)), truth=truth, name="cpu-bench")


def timed(fn, repeat: int):
    best = float("inf")
    out = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def add_problem_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark graph's options (see :func:`build_problem`), shared with benchmarks/causal.py."""
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--m", type=int, default=2_000_000)
    parser.add_argument("--T", type=int, default=40)
    parser.add_argument("--seed", type=int, default=123456789)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(parser)
    parser.add_argument("--ref-candidates", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-fit", action="store_true", help="Battus-Z row only (skip the fitted-Battus search)")
    args = parser.parse_args()

    problem = build_problem(args.n, args.m, args.T, args.seed)
    m, T = problem.graph.m, problem.T
    print(f"graph n={problem.n} arcs={m} T={T}; {platform.processor() or platform.machine()}, "
          f"{numba.get_num_threads()} Numba threads", flush=True)
    rows = []

    # Battus-Z: one mean-field pass (T+1 pressure steps) + forward-backward + decode
    options = method_options("battus-z")
    reconstruct(problem, options, backend="cpu")  # warm-up
    t_numba, recon = timed(lambda: reconstruct(problem, options, backend="cpu"), args.repeat)
    t_numba = recon.algorithm_seconds if args.repeat == 1 else t_numba
    t_ref, (_, ref_inf, ref_rec) = timed(lambda: ref.naive_reconstruct(problem, 0.1, 0.1), 1)
    same = np.array_equal(recon.t_inf, ref_inf) and np.array_equal(recon.t_rec, ref_rec)
    arc_steps = m * (T + 1)
    rows.append(("Battus-Z SIR", t_numba, t_ref, arc_steps / t_numba, arc_steps / t_ref, same))

    # Battus: full grid search (24x24 + 4 rounds of 7x7 = 772 candidates) + inference at the fit
    if not args.no_fit:
        rows.append(fitted_row(problem, args.ref_candidates))

    print()
    print("| method | Numba time (s) | numpy reference time (s) | Numba arc-steps/s | reference arc-steps/s "
          "| speed-up | identical histories |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, tn, tr, rn, rr, ok in rows:
        note = "" if "Battus-Z" in name else " (reference extrapolated)"
        same = "yes" if ok else "NO"
        print(f"| {name} | {tn:.3f} | {tr:.1f}{note} | {rn:.3g} | {rr:.3g} | {rn / rr:.1f}x | {same} |")


def fitted_row(problem: Problem, k: int) -> tuple:
    """The fitted-Battus row: the whole search on Numba, the reference's throughput on ``k`` candidates."""
    m, T = problem.graph.m, problem.T
    options = method_options("battus")
    # the algorithm interval: reconstruct compiles the fit's kernels on a tiny problem before it
    recon = reconstruct(problem, options, backend="cpu")
    t_fit = recon.algorithm_seconds
    candidates = sum(r["candidates"] for r in recon.fit_trace)
    fit_steps = m * T * candidates  # each candidate propagates T steps (up to the last observation)
    grid = np.linspace(1e-4, 0.5, k)
    t_ref_fit, ref_ll = timed(lambda: ref.naive_segmented_loglik(problem, grid, grid[::-1].copy()), 1)
    backend = CPUBackend()
    numba_ll = backend.loglik_batch(backend.prepare(problem), problem.prior, grid, grid[::-1].copy())
    # float64 cancellation in 1 - rho for tiny rates: agreement to ~1e-10 relative is all either can give
    ll_ok = bool(np.allclose(numba_ll, ref_ll, rtol=1e-8, atol=1e-9))
    _, ref_inf, ref_rec = ref.naive_reconstruct(problem, recon.beta_i, recon.beta_r, reset=True, decoder="map")
    same = ll_ok and np.array_equal(recon.t_inf, ref_inf) and np.array_equal(recon.t_rec, ref_rec)
    ref_rate = m * T * k / t_ref_fit
    return (f"Battus SIR ({candidates} candidates)", t_fit, fit_steps / ref_rate, fit_steps / t_fit, ref_rate, same)


if __name__ == "__main__":
    main()
