"""Random graph generators for the workflow's synthetic histories.

All generators are seeded and deterministic (numpy ``default_rng``), return
an undirected :class:`~battus.graph.Graph` (both arcs of every edge stored,
no self-loops, no duplicates) and record their parameters in ``graph.meta``.

- :func:`barabasi_albert` -- preferential attachment, ``m`` edges per new
  vertex (the canonical BA topology has n = 1,000 and about 4n edges);
- :func:`erdos_renyi` -- G(n, M): ``M`` distinct edges drawn uniformly;
- :func:`power_law` -- Chung--Lu graph with a power-law expected degree
  sequence, built in O(n + m) numpy work;
- ``chunglu`` and ``scale`` in :func:`generate` dispatch to :mod:`battus.synth`
  (exactly ``m`` stored arcs, directed or not; ``scale`` = a paper-size
  stand-in for one of the SNAP graphs, e.g. ``web-stanford``).
"""

from __future__ import annotations

import numpy as np

from .errors import InputError
from .graph import Graph, from_arcs

GENERATORS = ("ba", "er", "powerlaw", "chunglu", "scale")


def _finish(src: np.ndarray, dst: np.ndarray, n: int, name: str, meta: dict) -> Graph:
    graph = from_arcs(src, dst, directed=False, n=n, name=name, source=f"generator:{meta['generator']}")
    return Graph(graph.indptr, graph.indices, graph.node_ids, False, name, meta={**meta, "edges": graph.num_edges})


def barabasi_albert(n: int, m: int, seed: int, name: str = "ba") -> Graph:
    """Barabasi--Albert graph: each new vertex attaches to ``m`` distinct earlier vertices."""
    if m < 1 or n <= m:
        raise InputError("generator:ba", "n, m", f"need 1 <= m < n, got n={n}, m={m}")
    rng = np.random.default_rng(seed)
    # endpoint list: every vertex appears once per incident edge (preferential attachment)
    ends = np.empty(2 * m * n, dtype=np.int64)
    src = np.empty(m * (n - m), dtype=np.int64)
    dst = np.empty(m * (n - m), dtype=np.int64)
    targets = np.arange(m, dtype=np.int64)  # the first new vertex links to the m seed vertices
    filled = 0
    k = 0
    for v in range(m, n):
        src[k:k + m] = v
        dst[k:k + m] = targets
        k += m
        ends[filled:filled + m] = targets
        ends[filled + m:filled + 2 * m] = v
        filled += 2 * m
        chosen: set[int] = set()
        while len(chosen) < m:
            draws = ends[rng.integers(0, filled, size=2 * m)]
            for x in draws.tolist():
                chosen.add(x)
                if len(chosen) == m:
                    break
        targets = np.fromiter(chosen, dtype=np.int64, count=m)
    return _finish(src, dst, n, name, {"generator": "ba", "n": n, "m": m, "seed": seed})


def erdos_renyi(n: int, edges: int, seed: int, name: str = "er") -> Graph:
    """G(n, M) random graph with exactly ``edges`` distinct undirected edges."""
    max_edges = n * (n - 1) // 2
    if n < 2 or not (0 <= edges <= max_edges):
        raise InputError("generator:er", "edges", f"need 0 <= edges <= {max_edges} for n={n}, got {edges}")
    rng = np.random.default_rng(seed)
    keys = np.empty(0, dtype=np.int64)
    while keys.size < edges:
        need = edges - keys.size
        u = rng.integers(0, n, size=2 * need + 16)
        v = rng.integers(0, n, size=2 * need + 16)
        ok = u != v
        lo, hi = np.minimum(u[ok], v[ok]), np.maximum(u[ok], v[ok])
        new = lo * n + hi
        _, first = np.unique(new, return_index=True)
        new = new[np.sort(first)]  # keep draw order so the result depends on the seed only
        new = new[~np.isin(new, keys)]
        keys = np.concatenate([keys, new[:need]])
    return _finish(keys // n, keys % n, n, name, {"generator": "er", "n": n, "edges": edges, "seed": seed})


def power_law(n: int, edges: int, seed: int, exponent: float = 2.5, name: str = "powerlaw") -> Graph:
    """Chung--Lu graph: expected degrees ~ rank^(-1/(exponent-1)), about ``edges`` edges."""
    if n < 2 or edges < 1 or exponent <= 2.0:
        raise InputError("generator:powerlaw", "n, edges, exponent",
                         f"need n >= 2, edges >= 1, exponent > 2; got {n}, {edges}, {exponent}")
    rng = np.random.default_rng(seed)
    weights = (np.arange(1, n + 1, dtype=np.float64)) ** (-1.0 / (exponent - 1.0))
    prob = weights / weights.sum()
    # oversample endpoint pairs, then drop loops and duplicates until ``edges`` remain
    draws = int(edges * 1.3) + 64
    keys = np.empty(0, dtype=np.int64)
    for _ in range(8):
        u = rng.choice(n, size=draws, p=prob)
        v = rng.choice(n, size=draws, p=prob)
        ok = u != v
        lo, hi = np.minimum(u[ok], v[ok]), np.maximum(u[ok], v[ok])
        keys = np.unique(np.concatenate([keys, lo * n + hi]))
        if keys.size >= edges:
            break
    keys = rng.permutation(keys)[:edges]
    perm = rng.permutation(n)  # hide the rank order in the labels
    return _finish(perm[keys // n], perm[keys % n], n, name,
                   {"generator": "powerlaw", "n": n, "edges": edges, "exponent": exponent, "seed": seed})


def generate(generator: str, seed: int, name: str = "", **kwargs) -> Graph:
    """Dispatch by name: ``ba`` (n, m), ``er`` (n, edges), ``powerlaw`` (n, edges, exponent),
    ``chunglu`` (n, edges, exponent, directed) and ``scale`` (preset, exponent)."""
    name = name or generator
    if generator == "ba":
        return barabasi_albert(int(kwargs["n"]), int(kwargs["m"]), seed, name=name)
    if generator == "er":
        return erdos_renyi(int(kwargs["n"]), int(kwargs["edges"]), seed, name=name)
    if generator == "powerlaw":
        return power_law(int(kwargs["n"]), int(kwargs["edges"]), seed,
                         exponent=float(kwargs.get("exponent", 2.5)), name=name)
    if generator == "chunglu":
        from .synth import chung_lu

        directed = bool(kwargs.get("directed", False))
        arcs = int(kwargs["edges"]) * (1 if directed else 2)
        graph = chung_lu(int(kwargs["n"]), arcs, gamma_in=float(kwargs.get("exponent", 2.3)),
                         directed=directed, seed=seed, name=name)
        return Graph(graph.indptr, graph.indices, graph.node_ids, graph.directed, name,
                     meta={"generator": "chunglu", **kwargs, "seed": seed})
    if generator == "scale":
        from .synth import scale_graph

        graph = scale_graph(str(kwargs["preset"]), seed=seed, gamma=float(kwargs.get("exponent", 2.3)))
        return Graph(graph.indptr, graph.indices, graph.node_ids, graph.directed, name,
                     meta={"generator": "scale", **kwargs, "seed": seed})
    raise InputError("generator", "generator", f"unknown generator {generator!r} ({', '.join(GENERATORS)})")
