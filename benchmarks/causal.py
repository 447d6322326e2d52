"""Battus-C benchmark: time the causal decoder adds to Battus-Z on the CPU benchmark graph.

Same problem as ``benchmarks/cpu.py`` (directed uniform random graph, default
200,000 vertices and 2,000,000 arcs, SIR, T = 40, 100 initial infections,
rates (.1, .1), schedule {T/2, T}). Battus-Z is timed as ``reconstruct``'s
algorithm time; the decoder's added time is measured two ways: the
difference of the two pipelines' algorithm times, and ``causal_decode``
alone on Battus-Z's posteriors and hitting times (best of ``--repeat``).
Prints violations before/after and a Markdown row.

``--canonical DITTO_DIR`` instead runs Battus-Z with and without the causal
decoder on the 12 canonical datasets and prints the per-dataset Markdown
table (F1, NRMSE, causal violations, forced ones) next to HERMES's published
F1/NRMSE (the paper's canonical quality table).

    python benchmarks/causal.py [--n 200000] [--m 2000000] [--T 40] [--repeat 3] [--threads k]
    python benchmarks/causal.py --canonical ../shared/data/ditto
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numba

from battus.backends import CPUBackend
from battus.decode import causal_decode
from battus.pipeline import method_options, reconstruct
from battus.score import causal_violations, event_weighted, hermes_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import add_problem_arguments, build_problem  # noqa: E402  (the engine benchmark's graph and history)

CANONICAL = [
    # name, file under the DITTO mirror, HERMES published (F1, NRMSE)
    ("ba-si", "synthetic/ba-si.pt", (.9012, .1284)), ("er-si", "synthetic/er-si.pt", (.9011, .1269)),
    ("oregon2-si", "oregon2/oregon2-si.pt", (.8964, .1380)), ("prost-si", "prost/prost-si.pt", (.9056, .1308)),
    ("farmers-si", "farmers/farmers-si.pt", (.8980, .1491)), ("pol-si", "pol/rt-pol.txt", (.8487, .1823)),
    ("ba-sir", "synthetic/ba-sir.pt", (.8640, .1509)), ("er-sir", "synthetic/er-sir.pt", (.8657, .1307)),
    ("oregon2-sir", "oregon2/oregon2-sir.pt", (.8719, .1874)), ("prost-sir", "prost/prost-sir.pt", (.8609, .1737)),
    ("covid-sir", "covid/covid-sir.pt", (.7819, .1589)), ("heb-sir", "heb/heb-sir.pt", (.8356, .1223)),
]


def canonical_table(ditto: str) -> None:
    """Per-dataset Battus-Z vs Battus-C table on the canonical suite, HERMES's published scores beside."""
    from pathlib import Path

    from battus.causal import certify_violations
    from battus.hermes import canonical_from_pt, pol_from_retweets

    print("| Dataset | HERMES F1 | HERMES NRMSE | Battus-Z F1 | Battus-Z NRMSE | Battus-Z CV | Battus-C F1 "
          "| Battus-C NRMSE | Battus-C CV | forced | truth CV |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sums = {k: [] for k in ("hf", "hn", "zf", "zn", "cf", "cn")}
    cv = {("z", "si"): [], ("z", "sir"): [], ("c", "si"): [], ("c", "sir"): [], ("t", "si"): [], ("t", "sir"): []}
    for name, rel, (hf, hn) in CANONICAL:
        path = Path(ditto) / rel
        c = pol_from_retweets(path) if rel.endswith(".txt") else canonical_from_pt(path, name=name)
        problem = c.to_problem()
        z = reconstruct(problem, method_options("battus-z"))
        bc = reconstruct(problem, method_options("battus-z", causal=True))
        sz, sc = hermes_score(c.truth, z.states, c.model), hermes_score(c.truth, bc.states, c.model)
        vz, vc, vt = (causal_violations(c.graph, s) for s in (z.states, bc.states, c.truth))
        cert = certify_violations(c.graph, bc.states, problem.observations.times, problem.observations.states)
        assert cert["unforced"] == 0
        for k, v in zip(sums, (hf, hn, sz["f1"], sz["nrmse"], sc["f1"], sc["nrmse"]), strict=True):
            sums[k].append(v)
        cv[("z", c.model)].append(vz)
        cv[("c", c.model)].append(vc)
        cv[("t", c.model)].append(vt)
        print(f"| {name} | {hf:.4f} | {hn:.4f} | {sz['f1']:.4f} | {sz['nrmse']:.4f} | {100 * vz[0] / vz[1]:.2f}% "
              f"| {sc['f1']:.4f} | {sc['nrmse']:.4f} | {100 * vc[0] / vc[1]:.2f}% | {cert['forced']} "
              f"| {100 * vt[0] / vt[1]:.2f}% |")
    m = {k: sum(v) / len(v) for k, v in sums.items()}
    print(f"| **mean** | {m['hf']:.4f} | {m['hn']:.4f} | {m['zf']:.4f} | {m['zn']:.4f} | | {m['cf']:.4f} "
          f"| {m['cn']:.4f} | | | |")
    for model in ("si", "sir"):
        print(f"| event-weighted CV {model.upper()} | | | | | {100 * event_weighted(cv[('z', model)]):.2f}% | | "
              f"| {100 * event_weighted(cv[('c', model)]):.2f}% | | {100 * event_weighted(cv[('t', model)]):.2f}% |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_problem_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--canonical", metavar="DITTO_DIR", help="print the canonical-suite table instead")
    parser.add_argument("--threads", type=int, help="Numba threads (default: all)")
    args = parser.parse_args()
    if args.threads:
        numba.set_num_threads(args.threads)
    if args.canonical:
        canonical_table(args.canonical)
        return

    problem = build_problem(args.n, args.m, args.T, args.seed)
    print(f"graph n={problem.n} arcs={problem.graph.m} T={problem.T}; load average {os.getloadavg()[0]:.2f}; "
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

    # The stages alone, interleaved, with wall and process CPU time (on a shared machine CPU time is
    # the steadier measure of work; with one Numba thread the two agree when the machine is idle).
    backend = CPUBackend()
    prep = backend.prepare(problem)

    def battus_z():
        rho = backend.pressures(prep, problem.prior, 0.1, 0.1, False)
        gamma = backend.posteriors(prep, rho, problem.prior, 0.1, True)
        return (gamma, *backend.hitting_times(prep, gamma, "threshold", 0.65, True, True))

    gamma, t_inf, t_rec = battus_z()
    stage = {"z_wall": [], "z_cpu": [], "c_wall": [], "c_cpu": []}
    for _ in range(args.repeat):
        for name, fn in (("z", battus_z), ("c", lambda: causal_decode(backend, prep, problem, gamma, t_inf, t_rec))):
            w0, c0 = time.perf_counter(), time.process_time()
            out = fn()
            stage[f"{name}_wall"].append(time.perf_counter() - w0)
            stage[f"{name}_cpu"].append(time.process_time() - c0)
            if name == "c":
                extras = out[2]
    best = {k: min(v) for k, v in stage.items()}
    t_decoder = best["c_wall"]

    sz = hermes_score(problem.truth, z.states, "sir")
    sc = hermes_score(problem.truth, c.states, "sir")
    ev = extras["causal_events"]
    print(f"Battus-Z algorithm time      {t_z:8.3f} s  (runs: {', '.join(f'{x:.3f}' for x in z_times)})")
    print(f"Battus-C algorithm time      {t_c:8.3f} s  (runs: {', '.join(f'{x:.3f}' for x in c_times)})")
    print(f"difference                   {t_c - t_z:8.3f} s  = {100 * (t_c - t_z) / t_z:.1f}% of Battus-Z")
    print(f"causal_decode alone          {t_decoder:8.3f} s  = {100 * t_decoder / t_z:.1f}% of Battus-Z")
    print(f"stages alone: Battus-Z wall {best['z_wall']:.3f} s cpu {best['z_cpu']:.3f} s | causal_decode wall "
          f"{best['c_wall']:.3f} s cpu {best['c_cpu']:.3f} s | ratio wall {best['c_wall'] / best['z_wall']:.1%} "
          f"cpu {best['c_cpu'] / best['z_cpu']:.1%}")
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
