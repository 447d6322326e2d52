"""Synthetic scale graphs: Chung-Lu graphs with power-law degrees of given n and m.

These stand in for the SNAP graphs of the paper's large-graph extension where
downloading is not possible, and let users study scaling. Vertex ``i`` of a
Chung-Lu graph gets weight ``w_i ~ (i + 1) ** (-1 / (gamma - 1))``, which gives
a power-law degree distribution with exponent ``gamma``; every arc draws its
endpoints independently in proportion to the weights. Endpoints are drawn by
the closed-form inverse CDF of the continuous weight profile, so generation is
a handful of vectorised passes (numpy, or cupy on a GPU: pass ``xp=cupy``),
with no per-vertex Python loop. Duplicate arcs and self-loops are removed and
topped up by further draws until exactly ``m`` distinct arcs remain; vertex
labels are randomly permuted so hubs are not clustered at low ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .errors import InputError

if TYPE_CHECKING:
    from .graph import Graph


@dataclass(frozen=True)
class ScalePreset:
    """Vertex and stored-arc counts of a SNAP graph of the paper."""

    n: int
    arcs: int
    directed: bool


# Stored arcs: an undirected graph stores each edge twice (Orkut: 117,185,083 edges).
SCALE_PRESETS: dict[str, ScalePreset] = {
    "web-stanford": ScalePreset(255_265, 2_234_572, True),
    "web-google": ScalePreset(855_802, 5_066_842, True),
    "orkut": ScalePreset(3_072_441, 234_370_166, False),
    "livejournal": ScalePreset(4_843_953, 68_466_754, True),
}


def _endpoints(xp, rng, count: int, n: int, gamma: float):
    """``count`` vertex ids drawn with P(i) ~ (i + 1) ** (-1 / (gamma - 1))."""
    a = 1.0 / (gamma - 1.0)
    u = rng.random(count, dtype=xp.float64)
    if abs(a - 1.0) < 1e-12:  # w ~ 1/x: the CDF is logarithmic
        x = xp.exp(u * np.log(n + 1.0))
    else:
        top = (n + 1.0) ** (1.0 - a)
        x = (1.0 + u * (top - 1.0)) ** (1.0 / (1.0 - a))
    return xp.clip(x.astype(xp.int64) - 1, 0, n - 1)


def _permutation(xp, rng, n: int):
    """Random permutation of 0..n-1 (cupy's Generator has no ``permutation``)."""
    return xp.argsort(rng.random(n, dtype=xp.float64)).astype(xp.int64)


def _random_subset(xp, rng, n: int, k: int):
    """The first ``k`` entries of ``_permutation(xp, rng, n)``, as a set, from the same draws.

    A partition instead of a full sort: which ``k`` of the ``n`` uniform draws are smallest is all
    that is used (the draws are distinct doubles, so the set is the same).
    """
    return xp.argpartition(rng.random(n, dtype=xp.float64), k - 1)[:k]


def chung_lu(n: int, m: int, *, gamma_in: float = 2.3, gamma_out: float | None = None,
             directed: bool = True, seed: int = 0, xp=None, name: str = "") -> Graph:
    """A Chung-Lu graph with ``n`` vertices and exactly ``m`` stored arcs.

    ``gamma_in`` (and ``gamma_out``, default equal) set the power-law exponents
    of the in- and out-degree profiles of a directed graph; in- and out-hubs are
    different vertices. Undirected graphs (``directed=False``) draw m/2 edges
    from one profile and store both arcs of each, so ``m`` must be even. ``xp``
    is ``numpy`` (default) or ``cupy``; the returned CSR is on the host.
    """
    xp = np if xp is None else xp
    if n < 2:
        raise InputError("synth", "n", f"need n >= 2, got {n}")
    if not directed and m % 2:
        raise InputError("synth", "m", "an undirected graph stores an even number of arcs")
    max_arcs = n * (n - 1)
    if not (0 <= m <= max_arcs // 4):
        raise InputError("synth", "m", f"m must lie in 0..{max_arcs // 4} for n={n} (sparse graphs)")
    for key, g in (("gamma_in", gamma_in), ("gamma_out", gamma_out)):
        if g is not None and g <= 1.0:
            raise InputError("synth", key, f"power-law exponent must exceed 1, got {g}")
    gamma_out = gamma_in if gamma_out is None else gamma_out
    # numba-free import of the presets above (the workflow reads them at parse time): graph here
    from .graph import Graph, sorted_unique

    rng = xp.random.default_rng(seed)  # numpy and cupy streams differ for one seed
    perm_in = _permutation(xp, rng, n)
    perm_out = _permutation(xp, rng, n) if directed else perm_in
    target = m if directed else m // 2
    keys = xp.zeros(0, dtype=xp.int64)
    n64 = np.int64(n)
    for _ in range(64):
        missing = target - int(keys.shape[0])
        if missing <= 0:
            break
        draw = int(missing * 1.05) + 16
        dst = perm_in[_endpoints(xp, rng, draw, n, gamma_in)]
        src = perm_out[_endpoints(xp, rng, draw, n, gamma_out)]
        keep = src != dst
        src, dst = src[keep], dst[keep]
        if not directed:  # an undirected edge is keyed by (max, min)
            src, dst = xp.minimum(src, dst), xp.maximum(src, dst)
        fresh = sorted_unique(dst * n64 + src, xp)
        keys = sorted_unique(xp.concatenate([keys, fresh]), xp) if keys.shape[0] else fresh
    else:
        raise InputError("synth", "m", "could not draw enough distinct arcs (graph too dense)")
    if keys.shape[0] > target:  # drop a random surplus, keep the sort order
        drop = _random_subset(xp, rng, int(keys.shape[0]), int(keys.shape[0]) - target)
        mask = xp.ones(keys.shape[0], dtype=bool)
        mask[drop] = False
        keys = keys[mask]
    dst = keys // n64
    src = keys - dst * n64
    del keys
    if not directed:  # both arcs of every edge, in (dst, src) order: the keys are distinct
        keys = xp.sort(xp.concatenate([dst * n64 + src, src * n64 + dst]))
        dst = keys // n64
        src = keys - dst * n64
        del keys
    counts = xp.bincount(dst, minlength=n)
    indptr = xp.zeros(n + 1, dtype=xp.int64)
    xp.cumsum(counts, out=indptr[1:])
    indices = src.astype(xp.int32)
    if xp is not np:
        indptr, indices = indptr.get(), indices.get()
    return Graph(
        indptr=np.ascontiguousarray(indptr),
        indices=np.ascontiguousarray(indices),
        node_ids=np.arange(n, dtype=np.int64),
        directed=bool(directed),
        name=name or f"chung-lu-n{n}-m{m}",
        meta={"generator": "chung_lu", "gamma_in": gamma_in, "gamma_out": gamma_out, "seed": seed},
    )


def scale_graph(preset: str, *, seed: int = 0, xp=None, gamma: float = 2.6) -> Graph:
    """The synthetic stand-in for a SNAP graph of the paper (``SCALE_PRESETS``)."""
    if preset not in SCALE_PRESETS:
        raise InputError("synth", "preset", f"unknown preset {preset!r} ({', '.join(SCALE_PRESETS)})")
    p = SCALE_PRESETS[preset]
    return chung_lu(p.n, p.arcs, gamma_in=gamma, directed=p.directed, seed=seed, xp=xp,
                    name=f"synthetic-{preset}")
