"""Battus-C on the GPU: time the causal decoder adds to Battus-Z at SNAP sizes.

Synthetic stand-ins (``battus.synth`` presets, generated on the GPU when cupy
is present), SIR, T = 40, 100 initial infections, rates (.1, .1), schedule
{T/2, T}. Prints the median algorithm interval (CUDA events, after a
warm-up) of Battus-Z and of Battus-Z + causal decoding, their ratio, and the
violations before and after. The two methods' runs alternate, so that a drift
in the speed of the host or of the GPU reaches both medians alike (on the
small presets, Battus-Z medians of separate blocks of runs had differed by up
to 2x between processes), and the table gives, beside the ratio of the
medians, the median of the ratios of each Battus-C run to the Battus-Z run
just before it (the paired figure, less sensitive to that drift).

    python benchmarks/gpu_causal.py [--presets orkut livejournal] [--repeat 3]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_scale import make_graph  # noqa: E402

from battus.backends import get_backend  # noqa: E402
from battus.pipeline import method_options, reconstruct  # noqa: E402
from battus.problem import Problem, observe, schedule_times  # noqa: E402
from battus.score import causal_violations  # noqa: E402
from battus.simulate import simulate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["orkut"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    backend = get_backend("cuda")
    print(f"device: {backend.device}", flush=True)
    rows = []
    for preset in args.presets:
        graph, _, _ = make_graph(preset, args.seed)
        truth = simulate(graph, "sir", 40, 100, 0.1, 0.1, seed=args.seed + 1, backend="cuda")
        problem = Problem(graph, "sir", 40, 100, observe(truth, schedule_times(40)), truth, preset)
        methods = {"battus-z": method_options("battus-z"), "battus-c": method_options("battus-z", causal=True)}
        for options in methods.values():
            reconstruct(problem, options, backend=backend)  # warm-up
        runs = {label: [] for label in methods}
        for _ in range(args.repeat):
            for label, options in methods.items():
                runs[label].append(reconstruct(problem, options, backend=backend))
        times = {label: statistics.median(r.algorithm_seconds for r in got) for label, got in runs.items()}
        recon = {label: got[-1] for label, got in runs.items()}
        for label in methods:
            low = min(r.algorithm_seconds for r in runs[label])
            print(f"{preset} {label}: {1e3 * times[label]:.1f} ms (fastest {1e3 * low:.1f})", flush=True)
        before = causal_violations(graph, recon["battus-z"].states)
        after = causal_violations(graph, recon["battus-c"].states)
        # compare code versions: the same repaired history gives the same digest
        digest = hashlib.sha256(np.ascontiguousarray(recon["battus-c"].states).tobytes()).hexdigest()
        print(f"{preset} battus-c history sha256 {digest[:16]}", flush=True)
        paired = statistics.median(c.algorithm_seconds / z.algorithm_seconds - 1
                                   for z, c in zip(runs["battus-z"], runs["battus-c"], strict=True))
        rows.append((preset, graph.n, graph.m, times["battus-z"], times["battus-c"], paired, before, after))
    print("\n| graph | n | arcs | Battus-Z (ms) | Battus-C (ms) | added (medians) | added (paired) | CV before "
          "| CV after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for preset, n, m, tz, tc, paired, before, after in rows:
        print(f"| {preset} | {n:,} | {m:,} | {1e3 * tz:.1f} | {1e3 * tc:.1f} | {100 * (tc - tz) / tz:.0f}% "
              f"| {100 * paired:.0f}% | {100 * before[0] / max(1, before[1]):.2f}% "
              f"| {100 * after[0] / max(1, after[1]):.2f}% |")
    assert np.isfinite(rows[0][3])


if __name__ == "__main__":
    main()
