"""SHA-256 digests of the decoded histories of the 12 canonical datasets.

A change that must not alter any result (a refactor, a faster kernel) is
checked by running this before and after it, on both backends, and comparing
the printed lines::

    python benchmarks/history_digests.py --backend cpu --out before.json
    python benchmarks/history_digests.py --backend cpu --compare before.json

Each line is ``dataset method sha256(states) beta_i beta_r``; the digest
covers the decoded (T+1, n) int8 states in C order. The canonical exports are
read through the mirror (``BATTUS_SHARED``, default ``../shared``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

DATASETS = ("ba-si", "er-si", "oregon2-si", "prost-si", "farmers-si", "pol-si",
            "ba-sir", "er-sir", "oregon2-sir", "prost-sir", "covid-sir", "heb-sir")
# Battus-C is Battus-Z followed by the causal repair (`--causal`); "battus+causal" repairs fitted Battus
METHODS = {"battus-z": ("battus-z", {}), "battus": ("battus", {}), "battus-c": ("battus-z", {"causal": True}),
           "battus+causal": ("battus", {"causal": True})}


def digests(backend: str, datasets, methods) -> dict[str, dict]:
    os.environ.setdefault("BATTUS_SHARED", str(REPO.parent / "shared"))
    import numpy as np
    from conftest import load_canonical

    from battus.pipeline import method_options, reconstruct

    out: dict[str, dict] = {}
    for name in datasets:
        problem = load_canonical(name).to_problem()
        for method in methods:
            started = time.perf_counter()
            preset, overrides = METHODS[method]
            recon = reconstruct(problem, method_options(preset, **overrides), backend=backend)
            states = np.ascontiguousarray(recon.states, dtype=np.int8)
            key = f"{name} {method}"
            out[key] = {"sha256": hashlib.sha256(states.tobytes()).hexdigest(),
                        "beta_i": recon.beta_i, "beta_r": recon.beta_r}
            print(f"{key} {out[key]['sha256'][:16]} {recon.beta_i!r} {recon.beta_r!r} "
                  f"({time.perf_counter() - started:.1f} s, {recon.backend})", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--datasets", nargs="+", default=DATASETS, choices=DATASETS)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--out", type=Path, help="write the digests as JSON")
    ap.add_argument("--compare", type=Path, help="a JSON file of earlier digests; exit 1 on any difference")
    args = ap.parse_args(argv)
    found = digests(args.backend, args.datasets, args.methods)
    if args.out:
        args.out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    if args.compare:
        earlier = json.loads(args.compare.read_text())
        differ = [k for k in found if k in earlier and earlier[k] != found[k]]
        missing = [k for k in found if k not in earlier]
        for key in differ:
            print(f"DIFFERS {key}: {earlier[key]} -> {found[key]}")
        print(f"{len(found) - len(differ) - len(missing)} equal, {len(differ)} differ, {len(missing)} not in "
              f"{args.compare}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
