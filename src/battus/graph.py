"""Graphs in in-neighbour CSR form.

Infection flows along arcs ``v -> u``; for every vertex ``u`` the CSR row
``indices[indptr[u]:indptr[u+1]]`` lists the sources ``v`` of its incoming
arcs. ``indptr`` is int64 so graphs with more than 2**31 arcs fit; ``indices``
is int32 because vertex counts stay far below 2**31 and halving the bytes of
the hottest array matters on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


def largest_weak_component(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Boolean mask of the vertices in the largest weakly connected component.

    Ties are broken towards the component holding the smallest vertex index so
    the result is deterministic.
    """
    if n == 0:
        return np.zeros(0, dtype=bool)
    from .kernels.graph_cpu import weak_component_labels  # Numba: only where a graph is cleaned

    labels = weak_component_labels(n, src.astype(np.int64), dst.astype(np.int64))
    sizes = np.bincount(labels, minlength=n)
    return labels == int(np.argmax(sizes))


def sorted_unique(values: np.ndarray, xp=np) -> np.ndarray:
    """``xp.unique`` of a 1-D integer array by sort and compare (``xp``: numpy or cupy).

    numpy 2.x's ``np.unique`` goes through a hash table that is two orders of
    magnitude slower than sorting for tens of millions of int64 keys.
    """
    values = xp.sort(values)
    if values.shape[0] < 2:
        return values
    keep = xp.empty(values.shape[0], dtype=bool)
    keep[0] = True
    xp.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


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
        raise InputError(
            source, "arcs", f"source and target arrays differ in shape: {src.shape} vs {dst.shape}"
        )
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
    key = sorted_unique(dst * np.int64(max(n, 1)) + src)
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


# --------------------------------------------------------------------------
# Cleaning raw arcs (edge-list files are parsed in battus.edgelist), and
# graphs from scipy.sparse matrices and networkx graphs
# --------------------------------------------------------------------------

def _relabel(
    src: np.ndarray, dst: np.ndarray, how: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Map arbitrary int64 ids to ``0..N-1``; return (src labels, dst labels, ids per label).

    ``how='appearance'`` numbers ids in order of first appearance, row by row
    (what networkx and the DITTO exports do), ``'sorted'`` by increasing id.
    """
    if src.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    lo = int(min(src.min(), dst.min()))
    hi = int(max(src.max(), dst.max()))
    span = hi - lo + 1
    dense = span <= 8 * src.size + (1 << 20)  # id range small enough for a lookup table
    if how == "appearance" and dense:
        from .kernels.graph_cpu import appearance_labels

        return appearance_labels(src, dst, lo, span)
    if dense:
        present = np.zeros(span, dtype=bool)
        present[src - lo] = True
        present[dst - lo] = True
        table = np.cumsum(present, dtype=np.int64) - 1
        return table[src - lo], table[dst - lo], np.flatnonzero(present).astype(np.int64) + lo
    flat = np.empty(2 * src.shape[0], dtype=np.int64)
    flat[0::2] = src
    flat[1::2] = dst
    if how == "appearance":
        import pandas as pd  # here, not at the top: every job imports this module, few relabel ids

        uniq = pd.unique(flat).astype(np.int64)  # hash-based, keeps first-appearance order
        perm = np.argsort(uniq)
        labels = perm[np.searchsorted(uniq[perm], flat)].astype(np.int64)
        return labels[0::2].copy(), labels[1::2].copy(), uniq
    perm = np.argsort(flat)
    ordered = flat[perm]
    first = np.empty(ordered.shape[0], dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    labels = np.empty(flat.shape[0], dtype=np.int64)
    labels[perm] = np.cumsum(first) - 1
    return labels[0::2].copy(), labels[1::2].copy(), ordered[first].astype(np.int64)


def graph_from_raw_arcs(
    src: np.ndarray,
    dst: np.ndarray,
    *,
    directed: bool,
    keep_largest_component: bool = True,
    relabel: str = "appearance",
    name: str = "",
    source: str = "<arrays>",
    meta: dict | None = None,
) -> Graph:
    """Clean raw arcs ``src[i] -> dst[i]`` with arbitrary int64 vertex ids into a :class:`Graph`.

    Self-loops and duplicate arcs are dropped (for undirected input ``u v`` and
    ``v u`` are the same edge), undirected input is symmetrized, and with
    ``keep_largest_component`` only the largest weakly connected component is
    kept (ties go to the component holding the smallest label). Vertices are
    relabelled ``0..n-1`` (``relabel='appearance'``: order of first appearance
    in ``src[0], dst[0], src[1], ...``; ``'sorted'``: increasing id) and the
    original ids are kept in ``node_ids``. Every count is recorded in ``meta``:
    ``input_lines``, ``self_loops_dropped``, ``duplicates_dropped`` (for
    undirected input, repeated edges in either orientation),
    ``vertices_before_lwcc``, ``arcs_before_lwcc``, ``edges_before_lwcc`` and
    the same three ``*_after_lwcc``.
    """
    if relabel not in ("appearance", "sorted"):
        raise InputError(source, "relabel", f"expected 'appearance' or 'sorted', got {relabel!r}")
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.shape != dst.shape or src.ndim != 1:
        raise InputError(
            source, "arcs", f"source and target arrays differ in shape: {src.shape} vs {dst.shape}"
        )
    lines = int(src.shape[0])
    s, d, ids = _relabel(src, dst, relabel)
    del src, dst  # the caller's arrays stay; ours are freed as soon as possible
    n_all = int(ids.shape[0])
    if n_all >= 2**31:
        raise InputError(source, "n", "more than 2**31-1 vertices are not supported")
    loop = s == d
    self_loops = int(np.count_nonzero(loop))
    if self_loops:
        keep = ~loop
        s, d = s[keep], d[keep]
        del keep
    del loop
    # Arc keys (dst << bits) | src sort by (dst, src) and decode without division.
    bits = np.int64(max(n_all - 1, 1).bit_length())
    low = (np.int64(1) << bits) - 1
    if directed:
        key = d << bits
        key |= s
    else:
        key = np.maximum(s, d)
        key <<= bits
        key |= np.minimum(s, d)
    del s, d
    key = sorted_unique(key)
    duplicates = lines - self_loops - int(key.shape[0])
    d = key >> bits
    key &= low
    s = key
    del key
    units = int(s.shape[0])  # arcs (directed) or edges (undirected)
    record = dict(meta or {})
    record.update(
        source=str(source),
        directed=bool(directed),
        relabel=relabel,
        input_lines=lines,
        self_loops_dropped=self_loops,
        duplicates_dropped=duplicates,
        vertices_before_lwcc=n_all,
        arcs_before_lwcc=units if directed else 2 * units,
        edges_before_lwcc=units,
        largest_component_kept=bool(keep_largest_component),
    )
    n = n_all
    if keep_largest_component and n_all:
        mask = largest_weak_component(n_all, s, d)
        n = int(np.count_nonzero(mask))
        if n < n_all:
            table = np.cumsum(mask, dtype=np.int64) - 1
            keep = mask[s]  # both ends lie in the same component
            s, d = table[s[keep]], table[d[keep]]
            ids = ids[mask]
            del table, keep
    if directed:
        dst_sorted, src_sorted = d, s  # relabelling is monotone: still sorted by (dst, src)
    else:
        e = s.shape[0]
        key = np.empty(2 * e, dtype=np.int64)
        np.left_shift(d, bits, out=key[:e])
        key[:e] |= s
        np.left_shift(s, bits, out=key[e:])
        key[e:] |= d
        del s, d
        key.sort()
        dst_sorted = key >> bits
        key &= low
        src_sorted = key
        del key
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst_sorted, minlength=n), out=indptr[1:])
    del dst_sorted
    m = int(src_sorted.shape[0])
    if m == 0:
        raise InputError(
            source, "edges",
            f"no edge left after cleaning ({self_loops} self-loops and {duplicates} duplicates dropped"
            + (", largest component kept)" if keep_largest_component else ")"),
        )
    record.update(
        vertices_after_lwcc=n,
        arcs_after_lwcc=m,
        edges_after_lwcc=m if directed else m // 2,
    )
    return Graph(
        indptr=indptr,
        indices=src_sorted.astype(np.int32),
        node_ids=ids.astype(np.int64),
        directed=bool(directed),
        name=name,
        meta=record,
    )


def from_scipy(
    matrix,
    *,
    directed: bool,
    keep_largest_component: bool = False,
    name: str = "",
) -> Graph:
    """Graph of a square scipy.sparse matrix or dense array; ``A[i, j] != 0`` is an arc ``i -> j``.

    Vertices keep their row/column positions (``node_ids = 0..n-1``) unless
    ``keep_largest_component`` drops some. Self-loops (the diagonal) and
    explicit zeros are dropped; ``directed=False`` symmetrizes.
    """
    import scipy.sparse as sp  # optional dependency, imported only here

    source = "<scipy matrix>"
    try:
        coo = sp.coo_array(matrix)
    except (TypeError, ValueError) as exc:
        raise InputError(source, "matrix", f"not convertible to a sparse matrix ({exc})") from None
    if coo.ndim != 2 or coo.shape[0] != coo.shape[1]:
        raise InputError(source, "shape", f"expected a square matrix, got shape {coo.shape}")
    nz = coo.data != 0
    row = np.asarray(coo.row)[nz].astype(np.int64)
    col = np.asarray(coo.col)[nz].astype(np.int64)
    graph = from_arcs(
        row, col, directed=directed, n=int(coo.shape[0]),
        keep_largest_component=keep_largest_component, name=name, source=source,
    )
    return _with_meta(graph, {"source": source, "input_arcs": int(row.shape[0])})


def from_networkx(G, *, keep_largest_component: bool = False, name: str | None = None) -> Graph:
    """Graph of a networkx (Di/Multi)Graph; directedness from ``G.is_directed()``.

    Vertex ``i`` is the ``i``-th node of ``G.nodes``. When every node label is
    an integer the labels go to ``node_ids``; otherwise ``node_ids`` are the
    positions and ``meta['labels']`` lists the labels. Self-loops and parallel
    edges are dropped.
    """
    source = "<networkx graph>"
    nodes = list(G.nodes)
    index = {node: i for i, node in enumerate(nodes)}
    integer = all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) and -(2**63) <= v < 2**63
        for v in nodes
    )
    meta: dict = {"source": source}
    if integer and nodes:
        node_ids = np.asarray(nodes, dtype=np.int64)
    else:
        node_ids = np.arange(len(nodes), dtype=np.int64)
        if nodes:
            meta["labels"] = [v if isinstance(v, (int, float, str)) else str(v) for v in nodes]
    edges = list(G.edges())
    src = np.fromiter((index[u] for u, _ in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((index[v] for _, v in edges), dtype=np.int64, count=len(edges))
    graph = from_arcs(
        src, dst, directed=bool(G.is_directed()), n=len(nodes),
        keep_largest_component=keep_largest_component,
        name=name if name is not None else str(G.name or ""), source=source,
    )
    positions = graph.node_ids  # positions in G.nodes of the vertices kept
    if "labels" in meta:
        meta["labels"] = [meta["labels"][p] for p in positions]
    graph = Graph(graph.indptr, graph.indices, node_ids[positions], graph.directed, graph.name)
    meta["input_arcs"] = len(edges)
    return _with_meta(graph, meta)


def _with_meta(graph: Graph, meta: dict) -> Graph:
    record = dict(graph.meta)
    record.update(meta)
    return Graph(graph.indptr, graph.indices, graph.node_ids, graph.directed, graph.name, record)
