"""Graphs in in-neighbour CSR form.

Infection flows along arcs ``v -> u``; for every vertex ``u`` the CSR row
``indices[indptr[u]:indptr[u+1]]`` lists the sources ``v`` of its incoming
arcs. ``indptr`` is int64 so graphs with more than 2**31 arcs fit; ``indices``
is int32 because vertex counts stay far below 2**31 and halving the bytes of
the hottest array matters on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from .errors import InputError


@dataclass(frozen=True)
class Graph:
    """In-neighbour CSR graph with the original vertex ids kept."""

    indptr: np.ndarray
    indices: np.ndarray
    node_ids: np.ndarray
    directed: bool
    name: str = ""
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def n(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def m(self) -> int:
        """Number of stored arcs (an undirected edge counts twice)."""
        return int(self.indices.shape[0])

    @property
    def num_edges(self) -> int:
        """Arcs for directed graphs, undirected edges otherwise (the paper's |E|)."""
        return self.m if self.directed else self.m // 2

    def in_degree(self) -> np.ndarray:
        return np.diff(self.indptr)

    def arcs(self) -> tuple[np.ndarray, np.ndarray]:
        """Return (src, dst) arrays of all arcs."""
        dst = np.repeat(np.arange(self.n, dtype=np.int64), self.in_degree())
        return self.indices.astype(np.int64), dst


@numba.njit(cache=True)
def _find(parent: np.ndarray, x: int) -> int:
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression keeps later finds short
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@numba.njit(cache=True)
def _weak_component_labels(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    parent = np.arange(n)
    for e in range(src.shape[0]):
        a = _find(parent, src[e])
        b = _find(parent, dst[e])
        if a != b:
            if a < b:
                parent[b] = a
            else:
                parent[a] = b
    for x in range(n):
        parent[x] = _find(parent, x)
    return parent


def largest_weak_component(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Boolean mask of the vertices in the largest weakly connected component.

    Ties are broken towards the component holding the smallest vertex index so
    the result is deterministic.
    """
    if n == 0:
        return np.zeros(0, dtype=bool)
    labels = _weak_component_labels(n, src.astype(np.int64), dst.astype(np.int64))
    sizes = np.bincount(labels, minlength=n)
    return labels == int(np.argmax(sizes))


def from_arcs(
    src: np.ndarray,
    dst: np.ndarray,
    *,
    directed: bool,
    n: int | None = None,
    node_ids: np.ndarray | None = None,
    keep_largest_component: bool = False,
    symmetrize: bool | None = None,
    drop_self_loops: bool = True,
    name: str = "",
    source: str = "<arrays>",
) -> Graph:
    """Build an in-neighbour CSR graph from arc lists ``src[i] -> dst[i]``.

    Duplicate arcs are dropped, and self-loops too unless ``drop_self_loops``
    is false (the canonical exports keep theirs: the published numbers were
    computed with them in every vertex's own pressure). Undirected graphs are
    symmetrized (``symmetrize`` defaults to ``not directed``). With
    ``keep_largest_component`` only the largest weakly connected component is
    kept and vertices are relabelled to ``0..n-1`` in the order of their
    previous labels; ``node_ids`` always maps new labels to the caller's ids.
    """
    src = np.asarray(src)
    dst = np.asarray(dst)
    if src.shape != dst.shape or src.ndim != 1:
        raise InputError(source, "arcs", f"source and target arrays differ in shape: {src.shape} vs {dst.shape}")
    if src.size and (min(src.min(), dst.min()) < 0):
        raise InputError(source, "arcs", "negative vertex index")
    if n is None:
        n = int(max(src.max(), dst.max()) + 1) if src.size else 0
    elif src.size and max(src.max(), dst.max()) >= n:
        raise InputError(source, "arcs", f"vertex index {int(max(src.max(), dst.max()))} >= n={n}")
    if node_ids is None:
        node_ids = np.arange(n, dtype=np.int64)
    node_ids = np.asarray(node_ids, dtype=np.int64)
    if node_ids.shape != (n,):
        raise InputError(source, "node_ids", f"expected shape ({n},), got {node_ids.shape}")
    src = src.astype(np.int64)
    dst = dst.astype(np.int64)
    if symmetrize is None:
        symmetrize = not directed
    if symmetrize:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    if drop_self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    if keep_largest_component:
        mask = largest_weak_component(n, src, dst)
        relabel = np.full(n, -1, dtype=np.int64)
        relabel[mask] = np.arange(int(mask.sum()))
        arc_keep = mask[src] & mask[dst]
        src, dst = relabel[src[arc_keep]], relabel[dst[arc_keep]]
        node_ids = node_ids[mask]
        n = int(mask.sum())
    # Sort by (dst, src) and drop duplicates: rows of the in-CSR come out sorted.
    key = np.unique(dst * np.int64(max(n, 1)) + src)
    dst_sorted = key // max(n, 1)
    src_sorted = key - dst_sorted * max(n, 1)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst_sorted, minlength=n), out=indptr[1:])
    if n >= 2**31:
        raise InputError(source, "n", "more than 2**31-1 vertices are not supported")
    return Graph(
        indptr=indptr,
        indices=src_sorted.astype(np.int32),
        node_ids=node_ids,
        directed=bool(directed),
        name=name,
    )


def is_symmetric(graph: Graph) -> bool:
    """True when every arc has its reverse (the graph is undirected in effect)."""
    src, dst = graph.arcs()
    n = max(graph.n, 1)
    fwd = np.sort(dst * n + src)
    rev = np.sort(src * n + dst)
    return bool(np.array_equal(fwd, rev))
