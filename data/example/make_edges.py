"""Regenerate ``edges.txt.gz``: a small SNAP-format edge list that exercises the cleaning chain.

It holds what real SNAP files hold and the cleaning rule must handle: ``#``
comment lines, tab-separated non-contiguous vertex ids, duplicate lines (in
both orientations), self-loops, and a second, smaller connected component that
the largest-weakly-connected-component step drops. Deterministic: the same
bytes every run (gzip mtime 0), so its sha256 can be pinned.

    python data/example/make_edges.py   # from the repository root
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np

from battus.generators import barabasi_albert

HERE = Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(20261126)
    core = barabasi_albert(1500, 3, seed=7)
    src, dst = core.arcs()
    keep = src < dst  # one line per undirected edge, as SNAP's undirected files do
    pairs = np.stack([src[keep], dst[keep]], axis=1)
    ring = np.arange(1500, 1520)
    island = np.stack([ring, np.roll(ring, -1)], axis=1)  # a 20-vertex cycle: the second component
    loops = np.repeat(rng.choice(1500, 12, replace=False)[:, None], 2, axis=1)
    repeats = pairs[rng.choice(pairs.shape[0], 40, replace=False)]
    repeats[::2] = repeats[::2, ::-1]  # half of the duplicates in the other orientation
    rows = np.concatenate([pairs, island, loops, repeats])
    rows = rows[rng.permutation(rows.shape[0])]
    ids = rng.choice(10**7, 1520, replace=False)  # SNAP ids are sparse, not 0..n-1
    lines = [
        "# Undirected graph: a Barabasi-Albert core (1500 vertices) and a 20-vertex cycle",
        "# Made by data/example/make_edges.py for the Battus example run",
        f"# Nodes: 1520 Edges: {rows.shape[0]} (with 12 self-loops and 40 duplicate lines)",
        "# FromNodeId\tToNodeId",
    ]
    lines += [f"{ids[a]}\t{ids[b]}" for a, b in rows]
    data = ("\n".join(lines) + "\n").encode()
    out = HERE / "edges.txt.gz"
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fh:
        fh.write(data)
    print(out, hashlib.sha256(out.read_bytes()).hexdigest())


if __name__ == "__main__":
    main()
